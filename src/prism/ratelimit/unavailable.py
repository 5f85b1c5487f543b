"""The limiter's storage cannot be reached: what the edge does then (PRISM_RATE_LIMIT_ON_REDIS_FAILURE).

`closed` (the default): a request that carries a secret to check (a Bearer credential on a path the edge
authenticates, or any request to an authentication endpoint) is refused with 503 `rate_limit_unavailable`
before its result can reach the caller, because without the counters nobody can tell whether its address is
locked out, and answering would let guesses run unbounded. Requests without a secret pass uncounted.
`open`: every request passes uncounted, secrets included. Either way a WARNING is logged once per interval.
"""

from __future__ import annotations

from typing import Literal

from prism.errors import PrismError

OnFailure = Literal["open", "closed"]
# Short: the counters usually come back within seconds (a Redis restart, a failover).
RETRY_AFTER_SECONDS = 5


class LimiterUnavailable(PrismError):
    code, status = "rate_limit_unavailable", 503

    def __init__(self, message: str = "rate limits cannot be checked right now; try again shortly") -> None:
        super().__init__(message)
        self.headers = {"Retry-After": str(RETRY_AFTER_SECONDS)}
