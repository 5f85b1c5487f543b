"""Register, token, revoke and userinfo endpoints. Errors answer in the RFC 6749 shape.

Register, token and revoke (and the discovery documents) allow cross-origin calls from browser-based
clients: they take no cookies, so `Access-Control-Allow-Origin: *` exposes nothing. Preflights need no auth.
"""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import unquote

from sqlalchemy.ext.asyncio import AsyncSession
from starlette.requests import Request
from starlette.responses import Response

from prism.edge.lockout import SecretAttempt, secret_attempt, settle_unreserved
from prism.errors import CredentialNoLongerValid, PrismError, RateLimited, Unauthenticated
from prism.kit.nul import refuse_nul_in_form
from prism.kit.timeutil import utcnow
from prism.oauth.challenge import INVALID_TOKEN, bearer_challenge
from prism.oauth.client_documents import client_documents, is_document_url
from prism.oauth.errors import (
    ClientCredentialMissing,
    CodeRefused,
    GrantReplayed,
    InvalidClient,
    InvalidGrant,
    OAuthError,
)
from prism.oauth.issuer import issuer_for
from prism.oauth.models import OAuthClient
from prism.oauth.refresh import refresh_tokens
from prism.oauth.repository import claim_code, revoke_grant
from prism.oauth.resource import AccessTokens
from prism.oauth.schemas import parse_registration
from prism.oauth.service import (
    TokenContext,
    authenticate_client,
    exchange_code,
    register_client,
    registration_body,
    revoke_token,
)
from prism.oauth.tokens import AccessClaims
from prism.ratelimit.unavailable import LimiterUnavailable
from prism.storage import DatabaseUnavailable
from prism.web.browser import read_form
from prism.web.requests import host_of, read_json_object
from prism.web.responses import json_response

# A page's script reads only the answer headers CORS exposes (beyond a handful): the challenge of a 401, the
# methods of a 405 and the wait of a 429 or 503 are what a client running in a browser acts on.
EXPOSED_HEADERS = "WWW-Authenticate, Allow, Retry-After, RateLimit-Limit, RateLimit-Remaining, RateLimit-Reset"
CORS_HEADERS = {
    "Access-Control-Allow-Origin": "*",
    "Access-Control-Allow-Methods": "GET, POST, OPTIONS",
    "Access-Control-Allow-Headers": "Authorization, Content-Type, MCP-Protocol-Version",
    "Access-Control-Expose-Headers": EXPOSED_HEADERS,
    "Access-Control-Max-Age": "86400",
}
NO_STORE = {"Cache-Control": "no-store", "Pragma": "no-cache"}


def oauth_error(request: Request, exc: PrismError) -> Response:
    headers = {**CORS_HEADERS, **NO_STORE, **(getattr(exc, "headers", None) or {})}  # Retry-After of a 503
    if exc.status == 401:
        headers["WWW-Authenticate"] = 'Basic realm="prism"' if exc.code == "invalid_client" else \
            bearer_challenge(request.scope, exc)
    return json_response({"error": exc.code, "error_description": exc.message}, exc.status, headers)


async def preflight(request: Request) -> Response:
    return Response(status_code=204, headers=CORS_HEADERS)


async def register(request: Request) -> Response:
    try:
        body = await read_json_object(request)
        registration = parse_registration(body)
        async with request.app.state.db.write() as session:
            registered = await register_client(session, registration)
            answer = registration_body(registered.client, registered.secret, issuer=issuer_for(request),
                                       registration_token=registered.registration_token)
    except OAuthError as exc:
        return oauth_error(request, exc)
    except PrismError as exc:  # unreadable JSON and the like
        return oauth_error(request, OAuthError(exc.message, code="invalid_client_metadata", status=exc.status))
    return json_response(answer, 201 if registered.created else 200, {**CORS_HEADERS, **NO_STORE})


FORM_TYPE = "application/x-www-form-urlencoded"


async def _oauth_form(request: Request) -> dict[str, str]:
    """The form of a token or revocation request: a parameter sent more than once is refused (RFC 6749 3.2), one
    sent without a value counts as omitted (RFC 6749 3.2: an empty redirect_uri is one never sent).

    Only a form is read as one (RFC 6749 4.1.3, RFC 7009 2.1): a JSON body read as a form would be answered
    "grant_type is required", and text/plain parsed as urlencoded would accept what the client never meant as a
    form. The media type is compared without case, and parameters (a charset) are allowed."""
    media_type = request.headers.get("content-type", "").partition(";")[0].strip().lower()
    if media_type != FORM_TYPE:
        sent = f"Content-Type {media_type!r}" if media_type else "no Content-Type"
        raise OAuthError(f"this endpoint reads a form: send Content-Type {FORM_TYPE} (the request sent {sent})")
    form = await read_form(request, check_csrf=False, single_valued=True)
    return {name: value for name, value in form.items() if value}


def _basic_credentials(request: Request) -> tuple[str | None, str | None]:
    header = request.headers.get("authorization", "")
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "basic" or not value:
        return None, None
    try:
        decoded = base64.b64decode(value.strip(), validate=True).decode()
    except ValueError:  # not base64 (binascii.Error), not ASCII to begin with, or not UTF-8 once decoded
        raise OAuthError("malformed Basic credentials", code="invalid_client", status=401) from None
    client_id, _, secret = decoded.partition(":")
    client_id, secret = unquote(client_id), unquote(secret)
    # Credentials are client input like a form's fields, and reach the database the same way.
    refuse_nul_in_form([("client_id", client_id), ("client_secret", secret)])
    return client_id, secret


async def token(request: Request) -> Response:
    state = request.app.state
    try:
        form = await _oauth_form(request)
        basic_id, basic_secret = _basic_credentials(request)
        client_id = form.get("client_id") or basic_id
        if basic_id is not None and form.get("client_id") not in (None, basic_id):
            raise OAuthError("client_id differs from the Basic credentials")
        grant_type = form.get("grant_type")
        if grant_type is None:  # RFC 6749 5.2: a missing parameter is an invalid request
            raise OAuthError("grant_type is required: authorization_code or refresh_token")
        if grant_type not in ("authorization_code", "refresh_token"):
            raise OAuthError(f"grant_type {grant_type!r} is not supported: use authorization_code or refresh_token",
                             code="unsupported_grant_type")
        ctx = TokenContext(state.authenticator.tokens.ring, state.settings, issuer_for(request))
        # Load (or create) the signing key before the transaction: creating one takes its own write. A client
        # named by URL is fetched before it too: no transaction waits on another server.
        await ctx.ring.signer()
        described = await _described(request, client_id)
        secret = form.get("client_secret") or basic_secret
        async with _client_attempt(request, client_id, secret, described) as attempt, state.db.write() as session:
            client = await _authenticated_client(request, session, attempt, client_id, secret, described=described,
                                                 by_header=basic_id is not None)
            if grant_type == "authorization_code":
                answer = await exchange_code(session, ctx, client, code=form.get("code"),
                                             verifier=form.get("code_verifier"), redirect_uri=form.get("redirect_uri"),
                                             resource=form.get("resource"))
            else:
                answer = await refresh_tokens(session, ctx, client, refresh_token=form.get("refresh_token"),
                                              scope=form.get("scope"), resource=form.get("resource"))
    except GrantReplayed as exc:
        if exc.grant_id is not None:
            await _revoke(request, exc.grant_id)
        return oauth_error(request, InvalidGrant(exc.message))
    except CodeRefused as exc:
        try:
            async with state.db.write() as session:
                await claim_code(session, exc.code_id, utcnow())
        except DatabaseUnavailable as unavailable:
            return oauth_error(request, unavailable)
        return oauth_error(request, exc.refusal)
    except (OAuthError, DatabaseUnavailable, RateLimited, LimiterUnavailable) as exc:
        return oauth_error(request, exc)
    except PrismError as exc:
        return oauth_error(request, OAuthError(exc.message, status=exc.status))
    return json_response(answer, 200, {**CORS_HEADERS, **NO_STORE})


@asynccontextmanager
async def _client_attempt(request: Request, client_id: str | None, secret: str | None,
                          described: OAuthClient | None) -> AsyncIterator[SecretAttempt | None]:
    """The attempt a client's secret is checked in (prism.edge.lockout), reserved before the transaction (a wait
    for a place must not hold the database's writer turn); None when no secret is presented: a public client's
    id is no secret, so its requests take none of the address's places (a hosted connector's users share a few
    addresses, and its refreshes would queue behind others' guesses), and a client described by its URL
    document has none."""
    if not client_id or not secret or (described is not None and described.client_id == client_id):
        yield None
        return
    async with secret_attempt(request.scope) as attempt:
        yield attempt


async def _authenticated_client(request: Request, session: AsyncSession, attempt: SecretAttempt | None,
                                client_id: str | None, secret: str | None, *, described: OAuthClient | None,
                                by_header: bool = True) -> OAuthClient:
    """`authenticate_client`, obeying the lockout (prism.edge.lockout): a wrong secret, or an unknown client_id,
    is counted (429 once the address is locked out), and a right one refused 429 if guesses locked the address
    meanwhile, a public client's requests too. A request that presented no credential is refused without
    counting, and an unusable client document is no guess."""
    unreserved = attempt is None and described is None  # a registered client named without a secret
    try:
        client = await authenticate_client(session, client_id, secret, described=described, by_header=by_header)
    except InvalidClient as exc:
        if not isinstance(exc, ClientCredentialMissing):
            if attempt is not None:
                await attempt.failed()
            elif unreserved:
                await settle_unreserved(request.scope, failed=True)
        raise
    if attempt is not None:
        await attempt.succeeded()
    elif unreserved:
        await settle_unreserved(request.scope, failed=False)
    return client


async def _described(request: Request, client_id: str | None) -> OAuthClient | None:
    """The client a URL client_id's metadata document describes; None for a registered client_id."""
    if client_id is None or not is_document_url(client_id):
        return None
    return await client_documents(request.app.state).client(client_id)


async def _revoke(request: Request, grant_id: str) -> None:
    async with request.app.state.db.write() as session:
        await revoke_grant(session, grant_id, utcnow())
    request.app.state.authenticator.tokens.forget(grant_id)


async def revoke(request: Request) -> Response:
    """RFC 7009: 200 whatever the token was (unknown, expired, already revoked), so nothing leaks."""
    state = request.app.state
    try:
        form = await _oauth_form(request)
        basic_id, basic_secret = _basic_credentials(request)
        value = form.get("token")
        if not value:
            raise OAuthError("token is required")
        client_id = form.get("client_id") or basic_id
        await state.authenticator.tokens.ring.signer()  # loads the keys outside the transaction (see token)
        described = await _described(request, client_id)
        secret = form.get("client_secret") or basic_secret
        async with _client_attempt(request, client_id, secret, described) as attempt, state.db.write() as session:
            # A confidential client authenticates (RFC 7009 2.1): a wrong secret revokes nothing.
            client = None if client_id is None else await _authenticated_client(
                request, session, attempt, client_id, secret, described=described)
            grant_id = await revoke_token(session, state.authenticator.tokens.ring, state.settings, value,
                                          client=client, hostname=host_of(request).hostname,
                                          issuer=issuer_for(request))
    except (OAuthError, DatabaseUnavailable, RateLimited, LimiterUnavailable) as exc:
        return oauth_error(request, exc)
    except PrismError as exc:
        return oauth_error(request, OAuthError(exc.message, status=exc.status))
    if grant_id is not None:
        state.authenticator.tokens.forget(grant_id)
    return Response(status_code=200, headers={**CORS_HEADERS, **NO_STORE})


async def userinfo(request: Request) -> Response:
    header = request.headers.get("authorization", "")
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "bearer" or not value.strip():
        return json_response({"error": "invalid_token", "error_description": "Bearer access token required"}, 401,
                             {"WWW-Authenticate": bearer_challenge(request.scope), **CORS_HEADERS})
    try:
        claims, row = await _userinfo_claims(request, value.strip())
    except PrismError as exc:
        return oauth_error(request, exc)
    body: dict[str, Any] = {"sub": claims.subject, "email": row.email, "client_id": claims.client_id,
                            "scope": claims.scope, "org": claims.organization_id}
    if row.organization_id is not None:
        body.update(organization_name=row.org_name, tenant=row.subdomain)
    return json_response(body, 200, {**CORS_HEADERS, **NO_STORE})


async def _userinfo_claims(request: Request, token: str) -> tuple[AccessClaims, Any]:
    """The access token's claims and its row, obeying the lockout as the edge does for a token: it takes no place
    among the attempts in flight (a hosted connector's users share its egress address), and is counted after its
    check."""
    try:
        tokens: AccessTokens = request.app.state.authenticator.tokens
        found = await tokens.claims(token, host_of(request))
    except DatabaseUnavailable:
        raise
    except PrismError as exc:
        # An expired or revoked token is not a guess: refused, not counted.
        if not isinstance(exc, CredentialNoLongerValid):
            await settle_unreserved(request.scope, failed=True)
        raise Unauthenticated(exc.message, code=INVALID_TOKEN) from None
    await settle_unreserved(request.scope, failed=False)
    return found
