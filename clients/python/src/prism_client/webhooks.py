"""Verifying a webhook delivery: `X-Governance-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256>`.

v1 is the lower-case hex HMAC-SHA256, keyed with the UTF-8 bytes of the whole `whk_secret_…` string, of
`<t>.<body>` where body is the exact bytes received. Verify before parsing, with the raw body.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import time
from typing import Any

from prism_client.errors import WebhookSignatureError

SIGNATURE_HEADER = "X-Governance-Signature"
DEFAULT_TOLERANCE_SECONDS = 300
# ASCII digits only (str.isdigit also takes "²" and other Unicode digits, which int() refuses), and few enough
# that int() and the float arithmetic of the tolerance check cannot overflow: any header is refused, never raised on.
_TIMESTAMP = re.compile(r"[0-9]{1,15}")


def sign(payload: bytes | str, secret: str, timestamp: int | None = None) -> str:
    """The header value Prism would send for `payload` (for tests of your own receiver)."""
    t = int(time.time()) if timestamp is None else timestamp
    body = payload.encode() if isinstance(payload, str) else payload
    digest = hmac.new(secret.encode(), f"{t}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={t},v1={digest}"


def verify_signature(payload: bytes | str, header: str | None, secret: str, *,
                     tolerance: int = DEFAULT_TOLERANCE_SECONDS, now: float | None = None) -> None:
    """Raise WebhookSignatureError unless `header` signs `payload` with `secret` within `tolerance` seconds."""
    if not header:
        raise WebhookSignatureError(f"missing {SIGNATURE_HEADER} header")
    timestamp: int | None = None
    signatures: list[str] = []
    for part in header.split(","):
        key, _, value = part.strip().partition("=")
        if key == "t" and _TIMESTAMP.fullmatch(value):
            timestamp = int(value)
        elif key == "v1" and value and value.isascii():  # hex is ASCII; compare_digest raises on other text
            signatures.append(value)
    if timestamp is None or not signatures:
        raise WebhookSignatureError("malformed signature header: expected t=<unix seconds>,v1=<hex>")
    current = time.time() if now is None else now
    if abs(current - timestamp) > tolerance:
        raise WebhookSignatureError(f"timestamp {timestamp} is outside the tolerance of {tolerance} s")
    expected = sign(payload, secret, timestamp).split("v1=", 1)[1]
    # compare_digest with every candidate: constant time, and secrets rotating through two values work.
    if not any(hmac.compare_digest(expected, candidate) for candidate in signatures):
        raise WebhookSignatureError("signature does not match the payload")


def construct_event(payload: bytes | str, header: str | None, secret: str, *,
                    tolerance: int = DEFAULT_TOLERANCE_SECONDS) -> dict[str, Any]:
    """The verified event envelope ({event_id, event_type, timestamp, organization_id, api_version, data})."""
    verify_signature(payload, header, secret, tolerance=tolerance)
    event = json.loads(payload)
    if not isinstance(event, dict):
        raise WebhookSignatureError("the payload is not a JSON object")
    return event
