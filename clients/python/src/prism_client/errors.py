"""Exceptions raised by the client; every API refusal carries Prism's machine code."""

from __future__ import annotations

from typing import Any


class PrismError(Exception):
    """Base class of everything this package raises."""


class PrismAPIError(PrismError):
    """Prism answered with an error status (or the envelope said `success: false`)."""

    def __init__(self, status: int, code: str, message: str, *, tool_name: str | None = None,
                 details: dict[str, Any] | None = None, retry_after: float | None = None,
                 body: Any = None) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.tool_name = tool_name
        self.details = details or {}
        self.retry_after = retry_after
        self.body = body


class OversightRequiredError(PrismAPIError):
    """202 (400 on the sandbox's /api/v1/dev/call/, code `oversight_required`): a governance rule holds the
    call for human review; `details["oversight_request_id"]` names the request. Once approved, repeat the
    call with the header X-Prism-Oversight-Request set to that id."""


class BadRequestError(PrismAPIError):
    """400: unreadable body or arguments that fail the handler's schema (see `details`)."""


class AuthenticationError(PrismAPIError):
    """401: missing, invalid, expired or revoked credential."""


class PermissionDeniedError(PrismAPIError):
    """403: missing scope or permission, or a governance refusal."""


class NotFoundError(PrismAPIError):
    """404: unknown tool, coordinate or record."""


class ConflictError(PrismAPIError):
    """409: conflict or invalid state transition."""


class PayloadTooLargeError(PrismAPIError):
    """413 `payload_too_large`: the body is over Prism's ceiling (1 MiB); send less (split a batch, upload a
    document in parts)."""


class RateLimitError(PrismAPIError):
    """429 after every retry was spent, or at once when Prism asks for a longer wait than `max_retry_after`;
    `retry_after` says how long Prism asked to wait."""


class ServerError(PrismAPIError):
    """5xx. A 502/503/504 comes after every retry was spent, at once when Prism asks for a longer wait than
    `max_retry_after` (`retry_after`), or at once for a call sent without an idempotency key: a gateway's
    502/504 does not say whether Prism ran it."""


class PrismTimeoutError(PrismError):
    """No answer within the configured timeout."""


class PrismConnectionError(PrismError):
    """Prism could not be reached, or the connection broke before the answer came (for a call sent without an
    idempotency key, Prism may have run it)."""


class WebhookSignatureError(PrismError):
    """A webhook delivery whose X-Governance-Signature does not verify."""


_BY_STATUS: dict[int, type[PrismAPIError]] = {
    202: OversightRequiredError, 400: BadRequestError, 401: AuthenticationError, 403: PermissionDeniedError,
    404: NotFoundError, 409: ConflictError, 413: PayloadTooLargeError, 429: RateLimitError,
}


def error_for(status: int, body: Any, retry_after: float | None) -> PrismAPIError:
    """The exception for an error answer, whatever its shape (envelope, sandbox, OAuth or not JSON).

    A class per status a caller can act on. Any other status is a PrismAPIError with Prism's code: a 405
    (`method_not_allowed`) means the base URL reaches something other than this Prism's API, since the client
    only sends the methods Prism routes; every 5xx (501 `federation_not_installed` included) is a ServerError."""
    payload = body if isinstance(body, dict) else {}
    code = payload.get("error")
    code = code if isinstance(code, str) else f"http_{status}"
    message = payload.get("message") or payload.get("error_description") or (
        body if isinstance(body, str) and body else f"HTTP {status}")
    details = payload.get("details") if isinstance(payload.get("details"), dict) else None
    tool_name = payload.get("tool_name") if isinstance(payload.get("tool_name"), str) else None
    kind = (OversightRequiredError if code == "oversight_required"
            else _BY_STATUS.get(status, ServerError if status >= 500 else PrismAPIError))
    return kind(status, code, str(message), tool_name=tool_name, details=details, retry_after=retry_after,
                body=body)
