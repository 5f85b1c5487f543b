"""URLs a client sends, parsed so that a malformed one is the caller's 400 rather than a server error."""

from __future__ import annotations

from urllib.parse import SplitResult, urlsplit, urlunsplit

from prism.kit.secret import MASK


def split_url(url: str) -> SplitResult | None:
    """The parts of `url`, or None when urllib refuses to parse it. urlsplit raises ValueError for an unclosed
    IPv6 bracket (`https://[::1/x`), a bracketed host that is not an address, and a host that NFKC normalisation
    turns into a delimiter; each validator answers None with its own error. The port is not checked here (reading
    `.port` can still raise): the validators that use it say what is wrong with it."""
    try:
        return urlsplit(url)
    except ValueError:
        return None


def without_secrets(url: str) -> str:
    """`url` as it may be kept in the clear and shown: without userinfo, each query value and the fragment withheld
    (`?api_key=********`), where a credential is often written. A URL that carries none of these (and a file's
    name) is as it is."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not (parts.query or parts.fragment or "@" in parts.netloc):
        return url
    # A piece without `=` is withheld whole: `?s3cret` is a value too.
    query = "&".join(name + "=" + MASK if sep else MASK
                     for name, sep, _ in (piece.partition("=") for piece in parts.query.split("&") if piece))
    return urlunsplit((parts.scheme, parts.netloc.rpartition("@")[2], parts.path, query,
                       MASK if parts.fragment else ""))
