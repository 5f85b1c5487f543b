"""Domain errors: a stable machine code, an HTTP status and a human message.

Doors translate these in one small module each (envelope, ``{error, tool_name}``, JSON-RPC ...);
nothing else decides a status code.
"""

from __future__ import annotations

from typing import Any

# The field a 400 names when its cause is not one field of the input (docs/architecture.md "Refusals").
WHOLE_INPUT = "arguments"


class PrismError(Exception):
    code = "internal_error"
    status = 500
    # What a 400 of this class names when its raiser names no field.
    whole_input = WHOLE_INPUT
    # A rule said no to the call (a role or scope, a persona, human oversight, a mission): a governed call refused
    # this way is a BLOCK decision. Any other refusal (the call's input, a record that does not exist, a handler's
    # own failure) leaves the decision ALLOW. The refusal says which it is, so no list of codes can miss one.
    policy_refusal = False

    def __init__(self, message: str, *, code: str | None = None, status: int | None = None,
                 details: dict[str, Any] | None = None, field: str | None = None,
                 policy_refusal: bool | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        if status is not None:
            self.status = status
        if policy_refusal is not None:
            self.policy_refusal = policy_refusal
        self.details = details or {}
        if self.status == 400:
            self.details = problem_details(message, self.details, field or self.whole_input)
        elif field is not None:
            self.details = {"field": field, **self.details}


def problem_details(message: str, details: dict[str, Any], field: str) -> dict[str, Any]:
    """The one shape of every 400's details: `errors`, a list of `{field, message}`, one per problem.

    A raiser gives the list itself (every problem of a validation), or names one field (`field=`, or the
    `field` key older raisers put in `details`); the rest of `details` (candidates, suggestions) stays beside it."""
    errors = details.get("errors")
    if isinstance(errors, list) and errors and all(_is_problem(e) for e in errors):
        return details
    rest = {k: v for k, v in details.items() if k not in ("field", "errors")}
    named = details.get("field")
    field = named if isinstance(named, str) and named else field
    text = message[len(field) + 2:] if message.startswith(f"{field}: ") else message
    return {"errors": [{"field": field, "message": text}], **rest}


def _is_problem(value: Any) -> bool:
    return (isinstance(value, dict) and set(value) == {"field", "message"}
            and isinstance(value["field"], str) and isinstance(value["message"], str))


class BadRequest(PrismError):
    """A request Prism cannot read (body, header, form): its problems name `body` unless they name a field."""

    code, status = "bad_request", 400
    whole_input = "body"


class InvalidArguments(PrismError):
    code, status = "invalid_arguments", 400


class Unauthenticated(PrismError):
    code, status = "authentication_failed", 401


class CredentialNoLongerValid(Unauthenticated):
    """A credential Prism issued, presented whole and intact, that has expired or was revoked (or whose user
    was deactivated or left the organization). Refused like any bad credential, but it is not a guess, so it
    does not count toward the address lockout."""

    code = "invalid_token"


class CredentialOfAnotherTenant(CredentialNoLongerValid):
    """A credential Prism issued, whole and intact, presented on another tenant's host. Refused there as any
    credential of another tenant is (401 invalid_token), but its holder guessed nothing: it does not count toward
    the address lockout, which would otherwise shut the address out of its own tenant too."""


class PermissionDenied(PrismError):
    """The caller may not do this: every 403 of this class is a policy refusal (a role, a scope, a person-only
    handler, a governed credential, a self-approval)."""

    code, status = "permission_denied", 403
    policy_refusal = True


class MissingScope(PermissionDenied):
    """Refused only for want of a platform scope the role would allow: the same refusal on every door (code,
    status, message), which an OAuth client may cure by asking for `scope` (MCP's scope step-up)."""

    def __init__(self, message: str, *, scope: str) -> None:
        super().__init__(message)
        self.scope = scope


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
    policy_refusal = True


class OversightRequired(PrismError):
    """The call waits for a human: an oversight request was opened; its id is in `details`."""

    code, status = "oversight_required", 202
    policy_refusal = True


class BudgetExceeded(PrismError):
    code, status = "budget_exceeded", 403
    policy_refusal = True
