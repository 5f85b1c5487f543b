"""When a call may be sent again, and after how long.

A gateway in front of Prism (nginx, a cloud load balancer) may answer 502 or 504 after Prism ran the call, and
a connection may break after the request left. Sending such a call again is safe only when running it twice
changes nothing: the method is idempotent, or the call carries an Idempotency-Key, with which Prism answers a
repeat with the first call's stored answer instead of running it again. A repeat that comes while the first call
is still finishing gets 409 idempotency_key_in_progress: sent again, it gets that answer. A 429 is always
retried: Prism refuses a limited call before running it.
"""

from __future__ import annotations

import email.utils
import enum
import random
import time
import uuid
from dataclasses import dataclass
from typing import Final, Literal, TypeAlias

import httpx

IDEMPOTENT_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "PUT", "DELETE"})
KEY_MAX_LENGTH = 255
GATEWAY_STATUSES = frozenset({502, 503, 504})
RATE_LIMITED = 429
KEY_IN_PROGRESS = "idempotency_key_in_progress"


class _Generated(enum.Enum):
    KEY = "generated"


GENERATED_KEY: Final = _Generated.KEY
"""The default idempotency key choice: a random UUID4 for the call, the same on every retry of it."""

IdempotencyKey: TypeAlias = str | Literal[_Generated.KEY] | None
"""What a caller may pass as `idempotency_key`: its own key, None to send none, or GENERATED_KEY."""


def idempotency_key_for(choice: IdempotencyKey) -> str | None:
    """The key one logical call sends on each of its attempts."""
    if choice is GENERATED_KEY:
        return str(uuid.uuid4())
    if choice is None:
        return None
    # Prism's rule (docs/idempotency.md). Checked here because a key outside it fails before it reaches Prism
    # (httpx cannot encode a header beyond ASCII) or is refused there, on every retry alike.
    if not (0 < len(choice) <= KEY_MAX_LENGTH and choice.isascii() and choice.isprintable()):
        raise ValueError(f"an idempotency key is 1 to {KEY_MAX_LENGTH} printable ASCII characters, not {choice!r}; "
                         "pass None to send none")
    return choice


def retry_after_seconds(response: httpx.Response) -> float | None:
    """Retry-After as seconds: delta-seconds or an HTTP date (RFC 9110 10.2.3)."""
    value = response.headers.get("retry-after")
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


@dataclass(frozen=True)
class RetryPolicy:
    """Up to `max_retries` retries. The wait is Retry-After when Prism sends it, else exponential backoff with
    full jitter: random(0, backoff_base * 2^attempt), at most `backoff_max`. A Retry-After longer than
    `max_retry_after` is not waited for: the error is raised at once and carries the wait (`retry_after`)."""

    max_retries: int = 3
    backoff_base: float = 0.5
    backoff_max: float = 30.0
    max_retry_after: float = 120.0

    def wait_after_answer(self, response: httpx.Response, *, attempt: int, repeatable: bool) -> float | None:
        """Seconds to wait before sending the call again, or None when this answer is the caller's."""
        status = response.status_code
        unfinished = status in GATEWAY_STATUSES or _key_in_progress(response)
        transient = status == RATE_LIMITED or (repeatable and unfinished)
        if not transient or attempt >= self.max_retries:
            return None
        retry_after = retry_after_seconds(response)
        if retry_after is None:
            return self.backoff(attempt)
        # Retrying sooner than asked only earns another refusal, and sleeping past the caller's cap would hold
        # it longer than it allowed: the caller decides what to do with the wait.
        return retry_after if retry_after <= self.max_retry_after else None

    def wait_after_broken_connection(self, *, attempt: int, repeatable: bool) -> float | None:
        """Seconds to wait before sending the call again after no answer came, or None to give up."""
        if not repeatable or attempt >= self.max_retries:
            return None
        return self.backoff(attempt)

    def backoff(self, attempt: int) -> float:
        return random.uniform(0, min(self.backoff_max, self.backoff_base * (2 ** attempt)))


def _key_in_progress(response: httpx.Response) -> bool:
    if response.status_code != 409 or "json" not in response.headers.get("content-type", ""):
        return False
    try:
        body = response.json()
    except ValueError:
        return False
    return isinstance(body, dict) and body.get("error") == KEY_IN_PROGRESS
