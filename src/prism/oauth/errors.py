"""OAuth errors: the RFC 6749 `error` code is the PrismError code; rendered as {error, error_description}."""

from __future__ import annotations

from prism.errors import PrismError


class OAuthError(PrismError):
    """A token, registration or revocation endpoint error (RFC 6749 section 5.2, RFC 7591 section 3.2.2)."""

    code, status = "invalid_request", 400


class InvalidClient(OAuthError):
    """The client presented a wrong credential (an unknown client_id, a wrong secret): a failed authentication
    that counts toward the address's lockout."""

    code, status = "invalid_client", 401


class ClientCredentialMissing(InvalidClient):
    """The client presented no credential (no client_id; no secret for a confidential client): refused the same
    way, but no guess, so not counted toward the lockout."""


class InvalidGrant(OAuthError):
    code, status = "invalid_grant", 400


class GrantReplayed(InvalidGrant):
    """A used code or refresh token came back: its grant must be revoked (in its own transaction)."""

    def __init__(self, message: str, *, grant_id: str | None) -> None:
        super().__init__(message)
        self.grant_id = grant_id


class CodeRefused(OAuthError):
    """An exchange refused after its code was claimed: the refusal to answer, and the code to mark used in a
    transaction of its own (the exchange's, refused, is rolled back with the claim in it)."""

    def __init__(self, refusal: OAuthError, *, code_id: str) -> None:
        super().__init__(refusal.message, code=refusal.code, status=refusal.status)
        self.refusal, self.code_id = refusal, code_id


class AuthorizeError(PrismError):
    """An authorize request error: shown on Prism's error page, never redirected to the client."""

    code, status = "invalid_request", 400

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message, code=code)


class SessionIncomplete(PrismError):
    code, status = "session_incomplete", 403
