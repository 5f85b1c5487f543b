"""Idempotency keys: a POST that carries one runs once per credential and key; its repeats replay its answer.

The semantics Stripe documents, for every door that dispatches (docs/idempotency.md). A call without a key
pays one header lookup; everything else happens only for calls that carry one.
"""

from prism.idempotency.answers import REPLAYED_HEADERS, Replay, ReplayedRefusal
from prism.idempotency.keys import (
    IdempotencyKeyExpired,
    IdempotencyKeyInProgress,
    IdempotencyKeyReused,
    InvalidIdempotencyKey,
    key_from_headers,
    key_from_meta,
)
from prism.idempotency.ticket import IdempotencyKeys, Ticket

__all__ = ["REPLAYED_HEADERS", "IdempotencyKeyExpired", "IdempotencyKeyInProgress", "IdempotencyKeyReused",
           "IdempotencyKeys", "InvalidIdempotencyKey", "Replay", "ReplayedRefusal", "Ticket", "key_from_headers",
           "key_from_meta"]
