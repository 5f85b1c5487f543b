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
    """`digest` of a call's arguments, whatever a client sent: of the value's text when it is not JSON, or nested
    deeper than orjson encodes (254 levels; a body may nest 1,024), so that hashing them never fails a call, nor
    the ledger batch it is in."""
    try:
        return digest(value)
    except TypeError:
        try:
            return digest(repr(value))
        except RecursionError:  # nested deeper than repr() can go; the entry must still be written
            return digest("<arguments nested too deeply>")
