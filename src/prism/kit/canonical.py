"""Canonical JSON: the one serialisation used for hashing and signing."""

from __future__ import annotations

import hashlib
from typing import Any

import orjson

CANONICAL = orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS


def canonical_json(value: Any) -> bytes:
    """Keys sorted, no whitespace, UTF-8: stable across processes and engines."""
    return orjson.dumps(value, option=CANONICAL)


def digest(value: Any) -> str:
    """The SHA-256 (hex) of `canonical_json(value)`, in one call: every dispatch digests its arguments."""
    return hashlib.sha256(orjson.dumps(value, option=CANONICAL)).hexdigest()


def stable_digest(value: Any) -> str:
    """`digest` of a call's arguments, whatever a client sent: when orjson cannot encode them (a value that is not
    JSON, or nesting deeper than its 254 levels; a body may nest 1,024), the SHA-256 of `_spelled_out(value)`, so
    that hashing them never fails a call, nor the ledger batch it is in, and two different values never share a
    digest (an idempotency key's fingerprint: a different body under the same key must be told apart)."""
    try:
        return digest(value)
    except TypeError:
        return hashlib.sha256(_spelled_out(value).encode("utf-8", "surrogatepass")).hexdigest()


class _Literal(str):
    """Punctuation `_spelled_out` emits as it is (a value's own strings are never of this class)."""

    __slots__ = ()


def _spelled_out(value: Any) -> str:
    """A JSON-like text of `value`, keys sorted, written with a loop rather than recursion (a value may nest deeper
    than Python's recursion limit); what is not JSON is written as its type and repr, so it differs from any JSON
    text."""
    out: list[str] = []
    pending: list[Any] = [value]
    while pending:
        item = pending.pop()
        if type(item) is _Literal:
            out.append(item)
        elif isinstance(item, dict):
            entries = sorted(((_scalar(k), v) for k, v in item.items()), key=lambda entry: entry[0])
            pending.append(_Literal("}"))
            for place, (key, entry) in enumerate(reversed(entries)):
                pending.extend((entry, _Literal(key + ":")))
                if place < len(entries) - 1:
                    pending.append(_Literal(","))
            pending.append(_Literal("{"))
        elif isinstance(item, list | tuple):
            pending.append(_Literal("]"))
            for place, entry in enumerate(reversed(item)):
                pending.append(entry)
                if place < len(item) - 1:
                    pending.append(_Literal(","))
            pending.append(_Literal("["))
        else:
            out.append(_scalar(item))
    return "".join(out)


def _scalar(value: Any) -> str:
    try:
        return orjson.dumps(value).decode()
    except TypeError:  # not JSON (or an integer past 64 bits): never the text of a JSON value
        return f"<{type(value).__name__} {value!r}>"
