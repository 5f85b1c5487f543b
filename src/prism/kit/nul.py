"""NUL (U+0000) in client input: refused where input enters, with a 400 naming the field.

PostgreSQL's text types cannot hold NUL: a statement carrying one fails, and in a batch (the ledger's group
commit, a webhook worker's results) it takes every other row of the batch down with it. SQLite stores it, so
without a rule the two engines would disagree about what a client may send. Prism's rule: no string a client
sends (JSON body, form, path, query string) may contain NUL, on either engine. HTTP servers already refuse NUL
in header values (uvicorn with httptools or h11 answer 400 before Prism sees the request).

Text Prism receives from elsewhere and keeps (a webhook receiver's answer) is stored with NUL removed
(`without_nul`): refusing it is not an option, the receiver is not Prism's client.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import parse_qsl

from prism.errors import BadRequest

NUL = "\x00"
# JSON can carry NUL only as this escape (a raw NUL byte is invalid JSON, and the `u` of an escape is lower case
# by the grammar): a body without these six bytes needs no walk.
_NUL_IN_JSON = b"\\u0000"
# A URL carries NUL percent-encoded (servers refuse a raw NUL in the request line; checked too, for safety).
_NUL_IN_URL = (b"%00", b"\x00")
NUL_REFUSED = "nul_character"


def nul_refused(field: str) -> BadRequest:
    return BadRequest(f"{field}: must not contain NUL (U+0000)", code=NUL_REFUSED, field=field)


def _shown(name: str) -> str:
    """A field name fit for an error message: its own NULs written as the JSON escape, never sent back raw."""
    return name.replace(NUL, "\\u0000")


def first_nul_field(value: Any) -> str | None:
    """Where the first NUL is in parsed JSON, in document order, keys included: a path such as
    `arguments.items[2].name` ("" when `value` itself is a string holding NUL), or None.

    Iterative: orjson accepts nesting deeper than Python's recursion limit."""
    pending: list[tuple[Any, str]] = [(value, "")]
    while pending:
        current, path = pending.pop()
        if isinstance(current, str):
            if NUL in current:
                return path
        elif isinstance(current, dict):
            children: list[tuple[Any, str]] = []
            for key, item in current.items():
                field = f"{path}.{_shown(key)}" if path else _shown(key)
                if NUL in key:
                    return field
                children.append((item, field))
            pending.extend(reversed(children))
        elif isinstance(current, list):
            pending.extend((item, f"{path}[{index}]") for index, item in reversed(list(enumerate(current))))
    return None


def refuse_nul_in_json(body: bytes, value: Any) -> None:
    """Raise the 400 for a parsed JSON body (`value`, parsed from `body`) that holds NUL anywhere."""
    if _NUL_IN_JSON not in body:  # the usual case: one scan of the bytes, no walk
        return
    field = first_nul_field(value)
    if field is not None:
        raise nul_refused(field or "body")


def refuse_nul_in_form(fields: Iterable[tuple[str, str]]) -> None:
    """Raise the 400 for the first form field whose name or value holds NUL."""
    for name, value in fields:
        if NUL in name or NUL in value:
            raise nul_refused(_shown(name))


def nul_refusal(scope: Mapping[str, Any]) -> BadRequest | None:
    """The 400 for a request whose path or query string (as decoded) holds NUL, else None.

    The field is the query parameter's name, or "path" (a path parameter is not known before routing). The
    query is decoded as Starlette's `request.query_params` decodes it, so the name is the one a handler reads."""
    if NUL in scope["path"]:
        return nul_refused("path")
    query: bytes = scope.get("query_string", b"")
    if not any(marker in query for marker in _NUL_IN_URL):
        return None
    for name, value in parse_qsl(query.decode("latin-1"), keep_blank_values=True):
        if NUL in name or NUL in value:
            return nul_refused(_shown(name) or "query")
    return None


def without_nul(text: str) -> str:
    return text.replace(NUL, "") if NUL in text else text
