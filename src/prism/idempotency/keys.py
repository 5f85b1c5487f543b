"""The Idempotency-Key a client sends, and the refusals that are about it.

HTTP doors take the `Idempotency-Key` header; the MCP door takes `params._meta.idempotencyKey` of a
`tools/call` (one JSON-RPC message may be one of a batch, so a header could not say which call it keys).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from prism.errors import BadRequest, PrismError

HEADER = "idempotency-key"
HEADER_FIELD = "Idempotency-Key"
META_NAME = "idempotencyKey"
MAX_LENGTH = 255
REPLAYED_HEADER = "Idempotent-Replayed"


class InvalidIdempotencyKey(BadRequest):
    code = "invalid_idempotency_key"


class IdempotencyKeyReused(PrismError):
    """The key was first used for another request (another body, coordinate, door or organization)."""

    code, status = "idempotency_key_reused", 409


class IdempotencyKeyInProgress(PrismError):
    """The call that first used the key has committed but not finished (its outbound part is running)."""

    code, status = "idempotency_key_in_progress", 409
    headers = {"Retry-After": "1"}


class IdempotencyKeyExpired(PrismError):
    """The key's earlier call was found, so this repeat skipped its preparation, and expired before the repeat's
    turn came: the repeat now runs the call, unprepared. Prism's failure (5xx, not kept as the key's answer):
    sending it again runs the call."""

    code, status = "idempotency_key_expired", 503
    headers = {"Retry-After": "1"}


def checked_key(value: Any, field: str) -> str:
    """`value` if it is a usable key: 1-255 printable ASCII characters (U+0020-U+007E), as Stripe accepts."""
    if isinstance(value, str) and 0 < len(value) <= MAX_LENGTH and value.isascii() and value.isprintable():
        return value
    raise InvalidIdempotencyKey(f"{field}: must be 1 to {MAX_LENGTH} printable ASCII characters (a UUID, say)",
                                field=field)


def key_from_headers(headers: Mapping[str, str]) -> str | None:
    """The request's key, or None without the header: one lookup, the only cost of a call without it."""
    value = headers.get(HEADER)
    # A field value does not include the whitespace around it (RFC 9110, 5.5); Uvicorn's parser keeps the trailing.
    return None if value is None else checked_key(value.strip(" \t"), HEADER_FIELD)


def key_from_meta(params: Mapping[str, Any]) -> str | None:
    """The key of an MCP `tools/call`, from `params._meta.idempotencyKey`; None when it names none."""
    meta = params.get("_meta")
    if meta is None:
        return None
    if not isinstance(meta, dict):
        return None  # _meta belongs to the protocol; a shape Prism does not read is not a key
    value = meta.get(META_NAME)
    return None if value is None else checked_key(value, f"_meta.{META_NAME}")
