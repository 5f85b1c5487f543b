"""How an integration's URLs are shown: never with a credential written into them. The operator may have put a
token in a URL's query string or `user:password@` before its host; an organization may have done the same in
its own. docs/integrations.md, "What each organization sees of an integration"."""

from __future__ import annotations

from pathlib import PurePath
from urllib.parse import urlsplit, urlunsplit


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
