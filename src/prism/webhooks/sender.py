"""One delivery attempt: POST the recorded bytes, signed, and describe what came back.

Nothing here touches the database; the worker decides what the outcome means for the delivery.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from http import HTTPStatus

from prism.kit.nul import without_nul
from prism.kit.numbers import whole_number
from prism.kit.outbound import LookupBusy, OutboundAnswer, OutboundClient, OutboundFailed, OutboundTimeout
from prism.webhooks.signing import SIGNATURE_HEADER, USER_AGENT, signature_header

STORED_BODY_CHARS = 1000  # SPEC.md "Limits": stored response body
_READ_AT_MOST = 64 * 1024  # a receiver answering gigabytes must not fill Prism's memory


@dataclass(frozen=True, slots=True)
class Attempt:
    ok: bool
    status_code: int | None  # None: no HTTP answer (connection refused, timed out, TLS failure)
    body: str
    error: str | None
    retry_after: float | None  # seconds the receiver asked us to wait (429/503 only)
    timed_out: bool = False  # no complete answer within the timeout: the send held its slot that long
    # It held its slot for SLOW_SHARE_OF_TIMEOUT of the timeout or more (a timeout included): a receiver that answers
    # just before its timeout holds the workers' slots nearly as long as one that never answers.
    slow: bool = False
    # Nothing was sent: no lookup thread was free to resolve the receiver's host (LookupBusy). It says nothing of the
    # receiver, so it is no attempt: the worker puts the delivery off instead.
    lookup_busy: bool = False


# The share of its timeout after which an answer counts as slow (Attempt.slow).
SLOW_SHARE_OF_TIMEOUT = 0.5


def delivery_headers(*, secrets: list[str], body: bytes, event_type: str, delivery_id: str,
                     custom: dict[str, str], timestamp: int | None = None) -> dict[str, str]:
    # Custom headers first: Prism's own headers are set last, so nothing can replace them (the API also
    # refuses such names at save time).
    headers = dict(custom)
    headers.update({
        "Content-Type": "application/json",
        "User-Agent": USER_AGENT,
        "X-Governance-Event": event_type,
        "X-Governance-Delivery": delivery_id,
        SIGNATURE_HEADER: signature_header(secrets, body, int(time.time()) if timestamp is None else timestamp),
    })
    return headers


def _retry_after(answer: OutboundAnswer) -> float | None:
    if answer.status not in (429, 503):
        return None
    value = answer.headers.get("retry-after", "").strip()
    seconds = whole_number(value)
    if seconds is not None:
        return float(seconds)
    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError, IndexError, OverflowError):
        return None


def _reason(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Unknown status"


async def attempt(client: OutboundClient, *, url: str, body: bytes, headers: dict[str, str],
                  timeout_seconds: float, organization_id: str | None = None) -> Attempt:
    """2xx within `timeout_seconds` (connect, send and answer together) is success; redirects are failures.
    `organization_id`: whose share of the client's lookup threads resolving the receiver's host takes."""
    started = time.monotonic()
    try:
        answer = await client.send("POST", url, headers=headers, body=body, timeout_seconds=timeout_seconds,
                                   read_at_most=_READ_AT_MOST, lookup_owner=organization_id)
    except LookupBusy as exc:
        return Attempt(False, None, "", str(exc), None, lookup_busy=True)
    except OutboundTimeout as exc:
        return Attempt(False, None, "", str(exc), None, timed_out=True, slow=True)
    except OutboundFailed as exc:  # the message may quote what the receiver sent
        return Attempt(False, None, "", without_nul(str(exc)), None,
                       slow=_slow(started, timeout_seconds))
    slow = _slow(started, timeout_seconds)
    status = answer.status
    # The receiver's text is stored; PostgreSQL cannot store NUL, and refusing the answer is not ours to do.
    text = without_nul(answer.body.decode("utf-8", errors="replace"))[:STORED_BODY_CHARS]
    if 200 <= status < 300:
        return Attempt(True, status, text, None, None, slow=slow)
    error = f"HTTP {status}: {_reason(status)}"
    if 300 <= status < 400:
        error += " (redirects are not followed)"
    return Attempt(False, status, text, error, _retry_after(answer), slow=slow)


def _slow(started: float, timeout_seconds: float) -> bool:
    return time.monotonic() - started >= SLOW_SHARE_OF_TIMEOUT * timeout_seconds
