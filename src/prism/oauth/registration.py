"""RFC 7592: a client reads, updates and deletes its own registration at its `registration_client_uri`.

`GET|PUT|DELETE /api/mcp/oauth/register/<client_id>` with `Authorization: Bearer <registration_access_token>`,
the token the registration that created the client received (stored as SHA-256 only). A missing or wrong token,
an unknown client and a client registered before registration tokens existed all answer the same 401
`invalid_token`, so the endpoint tells nobody which clients exist. A wrong token counts toward the address's
lockout (prism.edge.lockout); a request that sent no Bearer token does not, and its challenge names no error.
PUT replaces the registration (RFC 7592 2.2): the body carries the `client_id`, may carry the client's secret (which
must then match) and keeps the authentication method; redirect URIs and links are checked as at registration.
DELETE removes the client and revokes every grant it holds: its refresh tokens and access tokens stop working.
"""

from __future__ import annotations

import hmac

from sqlalchemy import delete, select, update
from sqlalchemy.ext.asyncio import AsyncSession
from starlette.requests import Request
from starlette.responses import Response

from prism.edge.lockout import secret_attempt
from prism.errors import PrismError, RateLimited
from prism.kit.timeutil import utcnow
from prism.oauth import repository as repo
from prism.oauth.challenge import bearer_challenge
from prism.oauth.endpoints import EXPOSED_HEADERS, NO_STORE, oauth_error
from prism.oauth.errors import OAuthError
from prism.oauth.issuer import issuer_for
from prism.oauth.models import OAuthClient, OAuthGrant
from prism.oauth.schemas import invalid_metadata, parse_registration
from prism.oauth.service import registration_body
from prism.oauth.tokens import hash_secret
from prism.ratelimit.unavailable import LimiterUnavailable
from prism.web.requests import read_json_object
from prism.web.responses import json_response

MANAGEMENT_CORS = {
    "Access-Control-Allow-Origin": "*",
    "Access-Control-Allow-Methods": "GET, PUT, DELETE, OPTIONS",
    "Access-Control-Allow-Headers": "Authorization, Content-Type",
    "Access-Control-Expose-Headers": EXPOSED_HEADERS,
    "Access-Control-Max-Age": "86400",
}


class InvalidRegistrationToken(OAuthError):
    code, status = "invalid_token", 401


class RegistrationTokenMissing(InvalidRegistrationToken):
    """No Bearer token was sent: no guess, so not counted toward the lockout, and the challenge carries no error
    code (RFC 6750 section 3.1)."""


def _presented(request: Request) -> str:
    scheme, _, value = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not value.strip():
        raise RegistrationTokenMissing("Authorization: Bearer <registration_access_token> is required")
    return value.strip()


def _matches(client: OAuthClient | None, token: str) -> bool:
    stored = client.registration_token_hash if client is not None else None
    return stored is not None and hmac.compare_digest(stored, hash_secret(token))


def _refused(request: Request, exc: PrismError) -> Response:
    answer = oauth_error(request, exc)  # a 401 carries the Bearer challenge with its error
    if isinstance(exc, RegistrationTokenMissing):
        answer.headers["WWW-Authenticate"] = bearer_challenge(request.scope)
    answer.headers.update(MANAGEMENT_CORS)
    return answer


async def preflight(request: Request) -> Response:
    return Response(status_code=204, headers=MANAGEMENT_CORS)


async def manage(request: Request) -> Response:
    client_id = request.path_params["client_id"]
    answer: dict[str, object] = {}
    revoked: list[str] = []
    try:
        token = _presented(request)
        body = await read_json_object(request) if request.method == "PUT" else None
        async with secret_attempt(request.scope) as attempt, request.app.state.db.write() as session:
            client = await repo.client_by_id(session, client_id)
            if client is None or not _matches(client, token):
                await attempt.failed()  # a guessed token: 429 once the address is locked out
                raise InvalidRegistrationToken("invalid registration access token for this client")
            await attempt.succeeded()  # the right token, after guesses locked the address: 429 too
            if request.method == "DELETE":
                revoked = await _delete(session, client)
            else:
                if body is not None:
                    _replace(client, body)
                answer = registration_body(client, issuer=issuer_for(request), registration_token=token)
    except (OAuthError, RateLimited, LimiterUnavailable) as exc:
        return _refused(request, exc)
    except PrismError as exc:  # unreadable JSON and the like
        return _refused(request, OAuthError(exc.message, code="invalid_client_metadata", status=exc.status))
    if request.method == "DELETE":
        for grant_id in revoked:  # this process sees the revocation at once, others within the credential cache
            request.app.state.authenticator.tokens.forget(grant_id)
        return Response(status_code=204, headers={**MANAGEMENT_CORS, **NO_STORE})
    return json_response(answer, 200, {**MANAGEMENT_CORS, **NO_STORE})


async def _delete(session: AsyncSession, client: OAuthClient) -> list[str]:
    """Remove the client and revoke its grants; the ids of the grants revoked."""
    live = (OAuthGrant.client_id == client.client_id) & OAuthGrant.revoked_at.is_(None)
    revoked = list((await session.execute(select(OAuthGrant.id).where(live))).scalars())
    await session.execute(update(OAuthGrant).where(live).values(revoked_at=utcnow()))
    await session.execute(delete(OAuthClient).where(OAuthClient.id == client.id))
    return revoked


def _replace(client: OAuthClient, body: dict[str, object]) -> None:
    """RFC 7592 2.2: the whole registration, replaced; what the server manages stays its own."""
    if body.get("client_id") != client.client_id:
        raise invalid_metadata("the body's client_id must be this client's")
    for managed in ("registration_access_token", "registration_client_uri", "client_id_issued_at",
                    "client_secret_expires_at"):
        body.pop(managed, None)
    secret = body.pop("client_secret", None)
    if secret is not None and (client.secret_hash is None or not isinstance(secret, str)
                               or not hmac.compare_digest(client.secret_hash, hash_secret(secret))):
        raise invalid_metadata("client_secret does not match this client's")
    registration = parse_registration({**body, "client_id": None})
    if registration.token_endpoint_auth_method != client.token_endpoint_auth_method:
        raise invalid_metadata("token_endpoint_auth_method cannot change: register a new client")
    client.client_name = registration.client_name
    client.redirect_uris = registration.redirect_uris
    client.grant_types = registration.grant_types
    client.response_types = registration.response_types
    client.scope = registration.scope
    client.extra = registration.extra
    client.fingerprint = registration.fingerprint
