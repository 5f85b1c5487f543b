"""How an integration's URLs are shown: never with a credential written into them. The operator may have put a
token in a URL's query string or `user:password@` before its host; an organization may have done the same in
its own. docs/integrations.md, "What each organization sees of an integration"."""

from __future__ import annotations

from pathlib import PurePath
from urllib.parse import parse_qsl, urlsplit, urlunsplit


def shown_url(url: str) -> str:
    """`url` without its userinfo (`user:password@`): a credential, shown to no one once stored."""
    parts = urlsplit(url)
    if not parts.scheme or "@" not in parts.netloc:
        return url
    return urlunsplit((parts.scheme, parts.netloc.rpartition("@")[2], parts.path, parts.query, parts.fragment))


def address_only(source: str) -> str:
    """scheme://host[:port]/path of a URL, without userinfo, query string or fragment (where a token may be
    written); of a file the operator imported, its name only (the deployment's file system is nobody else's)."""
    parts = urlsplit(source)
    if parts.scheme in ("http", "https"):
        return urlunsplit((parts.scheme, parts.netloc.rpartition("@")[2], parts.path, "", ""))
    return source if source == "(inline)" else PurePath(source).name


def url_secrets(url: str) -> set[str]:
    """What `url` carries besides its address, where a credential may be written: the userinfo and its password,
    the query string and each of its values, the fragment (the empty ones left out)."""
    parts = urlsplit(url)
    found = {parts.netloc.rpartition("@")[0], parts.password or "", parts.query, parts.fragment,
             *(value for _, value in parse_qsl(parts.query, keep_blank_values=True))}
    found.discard("")
    return found
