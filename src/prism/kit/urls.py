"""URLs a client sends, parsed so that a malformed one is the caller's 400 rather than a server error."""

from __future__ import annotations

from urllib.parse import SplitResult, urlsplit


def split_url(url: str) -> SplitResult | None:
    """The parts of `url`, or None when urllib refuses to parse it. urlsplit raises ValueError for an unclosed
    IPv6 bracket (`https://[::1/x`), a bracketed host that is not an address, and a host that NFKC normalisation
    turns into a delimiter; each validator answers None with its own error. The port is not checked here (reading
    `.port` can still raise): the validators that use it say what is wrong with it."""
    try:
        return urlsplit(url)
    except ValueError:
        return None
