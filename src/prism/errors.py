"""Domain errors: a stable machine code, an HTTP status and a human message.

Doors translate these in one small module each (envelope, ``{error, tool_name}``, JSON-RPC ...);
nothing else decides a status code.
"""

from __future__ import annotations

from typing import Any


class PrismError(Exception):
    code = "internal_error"
    status = 500

    def __init__(self, message: str, *, code: str | None = None, status: int | None = None,
                 details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        if status is not None:
            self.status = status
        self.details = details or {}


class BadRequest(PrismError):
    code, status = "bad_request", 400


class InvalidArguments(PrismError):
    code, status = "invalid_arguments", 400


class Unauthenticated(PrismError):
    code, status = "authentication_failed", 401


class CredentialNoLongerValid(Unauthenticated):
    """A credential Prism issued, presented whole and intact, that has expired or was revoked (or whose user
    was deactivated or left the organization). Refused like any bad credential, but it is not a guess, so it
    does not count toward the address lockout."""

    code = "invalid_token"


class PermissionDenied(PrismError):
    code, status = "permission_denied", 403


class NotFound(PrismError):
    code, status = "not_found", 404


class ToolNotFound(PrismError):
    code, status = "tool_not_found", 404


class TenantNotFound(PrismError):
    code, status = "tenant_not_found", 404


class Conflict(PrismError):
    code, status = "conflict", 409


class RateLimited(PrismError):
    """A rate limit or the failed-authentication lockout; `headers` (Retry-After ...) go on the answer."""

    code, status = "rate_limited", 429
    headers: dict[str, str] | None = None


class Blocked(PrismError):
    """A persona policy refuses the call."""

    code, status = "blocked", 403


class OversightRequired(PrismError):
    """The call waits for a human: an oversight request was opened; its id is in `details`."""

    code, status = "oversight_required", 202


class BudgetExceeded(PrismError):
    code, status = "budget_exceeded", 403
