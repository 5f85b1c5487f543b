"""GET/POST /api/mcp/oauth/authorize/: validate the request, sign in, consent (choose organizations), redirect.

Every error found in the request itself is shown on Prism's own page (400), never redirected, even once the
client and its redirect URI are known to belong together: registration is anonymous, so a known client may be
anyone's, and sending its errors to its redirect URI would make Prism an open redirector (RFC 9700 4.11.2) for
whoever registers one. Prism redirects only after the person has signed in and answered the consent page: with
a `code` when they allow, with `error=access_denied` when they deny (both with `state` and `iss`, RFC 9207). The
validated request travels from the consent page to its POST sealed with a key derived from the master secret
and bound to the signed-in user.

The user consents the client to one or more of their organizations (those of the host's tenant on a tenant
host, those of every tenant on the platform host): its tokens act in those only, and in the first of them
(in the page's order) when a request names none.
"""

from __future__ import annotations

import re
import time
from dataclasses import asdict, dataclass
from typing import Any
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import Response

from prism.edge.context import request_context
from prism.errors import PrismError
from prism.kit.secret import seal, unseal
from prism.kit.urls import split_url
from prism.models import User
from prism.oauth import repository as repo
from prism.oauth.client_documents import client_documents, is_document_url
from prism.oauth.errors import AuthorizeError, OAuthError
from prism.oauth.issuer import audience_of, issuer_for
from prism.oauth.models import OAuthClient
from prism.oauth.schemas import (
    DEFAULT_SCOPE,
    OOB_REDIRECT,
    granted_scope,
    normalize_scope,
    redirect_matches,
    require_registered_scope,
)
from prism.oauth.service import create_code
from prism.ratelimit.unavailable import LimiterUnavailable
from prism.ratelimit.verdict import Locked
from prism.web.browser import login_url as browser_login_url
from prism.web.browser import read_form, redirect, render, signed_in_user
from prism.web.requests import host_of

CHALLENGE = re.compile(r"^[A-Za-z0-9_-]{43}\Z")
SEAL_PURPOSE = "oauth-authorize-request"
CONSENT_SECONDS = 600
ORGANIZATION_FIELD = "organization:"  # + an organization id: the name of its checkbox on the consent page


@dataclass(frozen=True)
class AuthorizeRequest:
    client_id: str
    client_name: str
    redirect_uri: str
    redirect_uri_sent: bool
    code_challenge: str
    scope: str
    state: str | None
    issuer: str
    audience: str


@dataclass(frozen=True)
class NamedClient:
    """The client of a request whose client_id and redirect_uri checked out, as its error page names it."""

    name: str
    redirect_uri: str

    @property
    def redirect_host(self) -> str:
        """The host a redirect would go to (with its port); for a URI without one (a private-use scheme such as
        `com.example.app:/cb`, the out-of-band URN) its scheme."""
        if self.redirect_uri == OOB_REDIRECT:
            return "none (the code is shown on a Prism page)"
        parts = split_url(self.redirect_uri)
        if parts is None:  # cannot happen for a URI that matched a registered one; shown as is then
            return self.redirect_uri
        return parts.netloc or f"{parts.scheme}:"


async def _client(request: Request, client_id: str) -> OAuthClient | None:
    """The client as registered now (its metadata document, for a client id that is one's URL), or None."""
    if is_document_url(client_id):
        documents = client_documents(request.app.state)
        if not documents.is_fresh(client_id):
            await _count_fetch(request)
        try:
            return await documents.client(client_id)
        except OAuthError as exc:
            raise AuthorizeError("invalid_client", exc.message) from None
    async with request.app.state.db.read() as session:
        return await repo.client_by_id(session, client_id)


async def validate(request: Request, params: dict[str, str]) -> AuthorizeRequest:
    issuer = issuer_for(request)
    client_id = params.get("client_id")
    if not client_id:
        raise AuthorizeError("invalid_request", "client_id is required")
    client = await _client(request, client_id)
    if client is None:
        raise AuthorizeError("invalid_client", "unknown client_id: register the client first")
    sent = params.get("redirect_uri")
    if sent is None:
        if len(client.redirect_uris) != 1:
            raise AuthorizeError("invalid_request", "redirect_uri is required: this client registered several")
        redirect_uri = client.redirect_uris[0]
    elif any(redirect_matches(r, sent) for r in client.redirect_uris):
        redirect_uri = sent
    else:
        raise AuthorizeError("invalid_request", "redirect_uri does not match any URI registered by this client")
    state = params.get("state")
    # Named on the error page from here on, so a developer sees which client sent a bad request and where to.
    request.state.authorize_client = NamedClient(client.client_name, redirect_uri)
    response_type = params.get("response_type")
    if response_type is None:  # RFC 6749 4.1.2.1: a missing parameter is an invalid request
        raise AuthorizeError("invalid_request", "response_type is required: code")
    if response_type != "code":
        raise AuthorizeError("unsupported_response_type", "response_type must be code")
    challenge = params.get("code_challenge")
    method = params.get("code_challenge_method")
    if not challenge:
        raise AuthorizeError("invalid_request", "PKCE is required: send code_challenge with "
                             "code_challenge_method=S256")
    if method != "S256":
        raise AuthorizeError("invalid_request", "code_challenge_method must be S256 (plain is not allowed)")
    if not CHALLENGE.match(challenge):
        raise AuthorizeError("invalid_request", "code_challenge must be the base64url SHA-256 of the verifier "
                             "(43 characters)")
    try:
        scope = granted_scope(normalize_scope(params.get("scope")), client.scope or DEFAULT_SCOPE)
        require_registered_scope(scope, client.scope)
    except OAuthError as exc:
        raise AuthorizeError("invalid_scope", exc.message) from None
    try:
        audience = audience_of(params.get("resource"), issuer)
    except OAuthError as exc:
        raise AuthorizeError(exc.code, exc.message) from None
    return AuthorizeRequest(client.client_id, client.client_name, redirect_uri, sent is not None, challenge, scope,
                            state, issuer, audience)


async def _count_fetch(request: Request) -> None:
    """The authorize endpoint is exempt from the rate tiers (a person signs in there), but a client metadata
    document it has to fetch counts in the address's `anonymous_discovery` tier, as the token endpoint's
    requests do: a stream of made-up URL client_ids cannot make Prism fetch without limit."""
    state = request.app.state
    try:
        verdict = await state.rate_limiter.hit("anonymous_discovery", request_context(request.scope).address)
    except LimiterUnavailable:
        if state.rate_limiter.fails_closed:
            raise AuthorizeError("temporarily_unavailable", "client metadata documents cannot be fetched right "
                                 "now; try again shortly") from None
        return
    if isinstance(verdict, Locked) or not verdict.allowed:
        raise AuthorizeError("temporarily_unavailable", "too many client metadata documents fetched from this "
                             "address; try again in a minute")


def _back_to_client(request: Request, target: AuthorizeRequest, values: dict[str, str]) -> Response:
    query = {**values, **({"state": target.state} if target.state is not None else {}), "iss": target.issuer}
    if target.redirect_uri == OOB_REDIRECT:
        if "code" in values:
            return render(request, "message.html", {
                "heading": "Authorization code", "message": f"{target.client_name} was authorized.",
                "code": values["code"], "code_seconds": request.app.state.settings.oauth_code_seconds})
        return render(request, "message.html", {"heading": "Authorization failed", "error": values.get("error"),
                                                "message": values.get("error_description", "")}, status=400)
    # Only the consent form's POST goes back to the client: a 303, which never resends the form (RFC 9700 4.12).
    return redirect(request, with_query(target.redirect_uri, query), status=303)


def with_query(uri: str, values: dict[str, str]) -> str:
    """`uri` with `values` added to its query, the registered URI kept character for character (RFC 6749
    3.1.2: its query is retained): `&` after a query, nothing after a bare trailing `?` or a trailing `&`."""
    _, mark, query = uri.partition("?")
    if not mark:
        joiner = "?"
    elif query and not query.endswith("&"):
        joiner = "&"
    else:
        joiner = ""
    return uri + joiner + urlencode(values)


def _error_page(request: Request, exc: AuthorizeError) -> Response:
    """The request's error on Prism's page, with the client and where it would have gone back to as text: no
    redirect and no link there (anyone can register a client, so that address is nobody Prism vouches for)."""
    client: NamedClient | None = getattr(request.state, "authorize_client", None)
    return render(request, "authorize_error.html", {
        "error": exc.code, "message": exc.message, "client_name": client.name if client else None,
        "redirect_host": client.redirect_host if client else None}, status=exc.status)


def _single_valued(request: Request) -> dict[str, str]:
    """The query's parameters; one sent more than once is refused (RFC 6749 4.1.2.1), on the error page as every
    request error is. One sent without a value counts as omitted (RFC 6749 3.1): an empty redirect_uri is the
    client's only one, an empty resource the default audience."""
    items = request.query_params.multi_items()
    params = dict(items)
    if len(params) != len(items):
        repeated = sorted({name for name, _ in items if sum(1 for other, _ in items if other == name) > 1})
        raise AuthorizeError("invalid_request", f"parameters sent more than once: {', '.join(repeated)}")
    return {name: value for name, value in params.items() if value}


@dataclass(frozen=True)
class OfferedOrganization:
    id: str
    name: str
    tenant_subdomain: str
    tenant_name: str


async def _offered(request: Request, user_id: str) -> list[OfferedOrganization]:
    """The organizations the consent page offers, by tenant then name: the order that picks the default."""
    host = host_of(request)
    async with request.app.state.db.read() as session:
        rows = await repo.organizations_of(session, user_id, host.subdomain if host.kind == "tenant" else None)
    return [OfferedOrganization(org.id, org.name, tenant.subdomain, tenant.name or tenant.subdomain)
            for org, tenant in rows]


def _by_tenant(offered: list[OfferedOrganization]) -> list[dict[str, Any]]:
    groups: list[dict[str, Any]] = []
    for org in offered:
        if not groups or groups[-1]["subdomain"] != org.tenant_subdomain:
            groups.append({"subdomain": org.tenant_subdomain, "name": org.tenant_name, "organizations": []})
        groups[-1]["organizations"].append(org)
    return groups


def _chosen(form: dict[str, str]) -> set[str]:
    # One checkbox per organization, each its own field: a form is read as one value per name.
    return {name.removeprefix(ORGANIZATION_FIELD) for name in form if name.startswith(ORGANIZATION_FIELD)}


async def _consent_page(request: Request, target: AuthorizeRequest, user: User, here: str, *,
                        error: str | None = None) -> Response:
    offered = await _offered(request, user.id)
    sealed = seal(request.app.state.settings, SEAL_PURPOSE,
                  {"r": asdict(target), "u": user.id, "h": here, "exp": int(time.time()) + CONSENT_SECONDS})
    host = host_of(request)
    return render(request, "consent.html", {
        "client_name": target.client_name, "email": user.email, "redirect_display": target.redirect_uri,
        "scopes": target.scope.split(), "groups": _by_tenant(offered), "only_one": len(offered) == 1,
        "on_platform": host.kind != "tenant", "field_prefix": ORGANIZATION_FIELD, "error": error,
        "request_token": sealed, "here": here, "tenant_name": host.subdomain}, status=400 if error else 200,
        # The form's answer redirects to the client: its origin must be allowed by the page's form-action.
        forms_end_at=None if target.redirect_uri == OOB_REDIRECT else target.redirect_uri)


async def authorize_page(request: Request) -> Response:
    try:
        target = await validate(request, _single_valued(request))
    except AuthorizeError as exc:
        return _error_page(request, exc)
    user = await signed_in_user(request)
    if user is None:
        return redirect(request, browser_login_url(request))
    return await _consent_page(request, target, user, request.url.path + "?" + request.url.query)


async def authorize_decision(request: Request) -> Response:
    try:
        form = await read_form(request)
    except PrismError as exc:
        return render(request, "message.html", {"heading": "Authorization refused", "error": exc.code,
                                                "message": exc.message}, status=exc.status)
    user = await signed_in_user(request)
    data: dict[str, Any] | None = unseal(request.app.state.settings, SEAL_PURPOSE, form.get("request", ""))
    if user is None or data is None or data.get("u") != user.id or int(data.get("exp", 0)) < time.time():
        return render(request, "message.html", {
            "heading": "This authorization request expired", "error": "invalid_request",
            "message": "Start again from the application that sent you here."}, status=400)
    target = AuthorizeRequest(**data["r"])
    if target.issuer != issuer_for(request):
        return render(request, "message.html", {"heading": "Wrong host", "error": "invalid_request",
                                                "message": "This request was started on another host."}, status=400)
    # The client's registration as it is now: one deleted, or whose redirect URI was taken off it, since the page
    # was shown (its management endpoint, RFC 7592) must get neither a code nor the user's answer at that URI.
    try:
        client = await _client(request, target.client_id)
    except AuthorizeError as exc:  # its metadata document cannot be read again now: not a changed registration
        return _error_page(request, exc)
    if client is None or not any(redirect_matches(r, target.redirect_uri) for r in client.redirect_uris):
        return render(request, "message.html", {
            "heading": "This application's registration changed", "error": "invalid_request",
            "message": "It was removed, or no longer lists where this page would send you. Start again from the "
                       "application."}, status=400)
    if form.get("decision") != "allow":
        return _back_to_client(request, target, {"error": "access_denied",
                                                 "error_description": "the user denied the request"})
    offered = [org.id for org in await _offered(request, user.id)]
    chosen = _chosen(form)
    if not chosen <= set(offered):
        return render(request, "message.html", {"heading": "Unknown organization", "error": "invalid_request",
                                                "message": "Choose among the organizations the page offers."},
                      status=400)
    if offered and not chosen:
        return await _consent_page(request, target, user, str(data.get("h", "")),
                                   error="Choose at least one organization.")
    async with request.app.state.db.write() as session:
        code = await create_code(
            session, request.app.state.settings, client_id=target.client_id, user_id=user.id,
            organization_ids=[org for org in offered if org in chosen], redirect_uri=target.redirect_uri,
            redirect_uri_sent=target.redirect_uri_sent, code_challenge=target.code_challenge, scope=target.scope,
            issuer=target.issuer, audience=target.audience)
    return _back_to_client(request, target, {"code": code})
