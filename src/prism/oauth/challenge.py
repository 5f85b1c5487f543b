"""The `WWW-Authenticate: Bearer` challenge of every 401 (and the MCP door's 429), built in one place.

It names the protected-resource metadata (RFC 9728 section 5.1), so an OAuth client that met a 401 finds the
authorization server. It carries `error="invalid_token"` only when a Bearer credential was sent and refused
(unknown, malformed, expired, revoked, another host's): a request that sent none, or sent another scheme,
gets the bare challenge (RFC 6750 section 3.1: no error code when the request lacks authentication
information).
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.types import Scope

from prism.auth.context import AuthContext
from prism.errors import MissingScope, PrismError
from prism.oauth.issuer import issuer_for

METADATA_PATH = "/.well-known/oauth-protected-resource"
INVALID_TOKEN = "invalid_token"  # noqa: S105 (an RFC 6750 error code, not a secret)


def bearer_challenge(scope: Scope, error: PrismError | None = None, *, resource_path: str = "") -> str:
    """The challenge for a refusal of this request; `resource_path` names the protected resource whose metadata
    applies (the MCP endpoint has its own document)."""
    challenge = f'Bearer realm="prism", resource_metadata="{metadata_url(scope, resource_path)}"'
    if error is not None and error.status == 401 and error.code == INVALID_TOKEN:
        challenge += f', error="{INVALID_TOKEN}"'
    return challenge


def insufficient_scope_challenge(scope: Scope, scopes: list[str], *, resource_path: str = "") -> str:
    """The challenge of a step-up refusal (RFC 6750 section 3.1, MCP 2025-11-25 "Scope Challenge Handling"): the
    scopes to ask for, and the same protected-resource metadata as the 401's."""
    return (f'Bearer error="insufficient_scope", scope="{" ".join(scopes)}", '
            f'resource_metadata="{metadata_url(scope, resource_path)}"')


def metadata_url(scope: Scope, resource_path: str) -> str:
    """The protected-resource metadata of `resource_path` on the host this request came to."""
    return f"{issuer_for(Request(scope))}{METADATA_PATH}{resource_path}"


def step_up_scopes(auth: AuthContext | None, refusal: PrismError) -> list[str] | None:
    """The scopes an OAuth token refused only for want of a platform scope should ask for: those it holds and the
    one it lacks, so that re-authorizing loses none. None for any other refusal or credential (an API key's scopes
    are fixed when it is minted)."""
    if not isinstance(refusal, MissingScope) or auth is None or auth.credential_kind != "oauth":
        return None
    return sorted(auth.scopes | {refusal.scope})
