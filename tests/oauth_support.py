"""Helpers for the OAuth tests: PKCE pairs, registration, and a scripted browser (login + consent) over HTTP."""

from __future__ import annotations

import base64
import hashlib
import html
import re
import secrets
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx

from tests.factories import PASSWORD, Workspace

CLAUDE_REDIRECT = "https://claude.ai/api/mcp/auth_callback"
OAUTH = "/api/mcp/oauth"

# What the four clients send to a registration endpoint (their real bodies, trimmed of nothing).
CLIENT_BODIES: dict[str, dict[str, Any]] = {
    "claude": {"client_name": "Claude", "redirect_uris": [CLAUDE_REDIRECT],
               "grant_types": ["authorization_code", "refresh_token"], "response_types": ["code"],
               "token_endpoint_auth_method": "none", "scope": "mcp:read mcp:write mcp:execute"},
    "chatgpt": {"client_name": "ChatGPT", "redirect_uris": ["https://chatgpt.com/connector_platform_oauth_redirect"],
                "grant_types": ["authorization_code", "refresh_token"], "response_types": ["code"],
                "token_endpoint_auth_method": "client_secret_post", "application_type": "web"},
    "cursor": {"client_name": "Cursor", "redirect_uris": ["cursor://anysphere.cursor-retrieval/oauth/user-prism/callback"],
               "grant_types": ["authorization_code", "refresh_token"], "response_types": ["code"],
               "token_endpoint_auth_method": "none"},
    "vscode": {"client_name": "Visual Studio Code", "redirect_uris": ["http://127.0.0.1:33418/", "https://vscode.dev/redirect"],
               "grant_types": ["authorization_code", "refresh_token"], "token_endpoint_auth_method": "none",
               "software_id": "vscode", "software_version": "1.99"},
}


def pkce() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    return verifier, challenge


def field(page: str, name: str) -> str:
    found = re.search(rf'name="{name}" value="([^"]*)"', page)
    assert found, f"no field {name} in page:\n{page}"
    return html.unescape(found.group(1))


def error_code(page: str) -> str:
    """The OAuth error code an error page shows."""
    found = re.search(r'id="error-code">([^<]*)<', page)
    assert found, f"no error code in page:\n{page}"
    return html.unescape(found.group(1))


def query_of(location: str) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(urlsplit(location).query).items()}


@asynccontextmanager
async def browser(app: object, host: str) -> AsyncIterator[httpx.AsyncClient]:
    """A client with a cookie jar, talking to the in-process app as `host`."""
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),  # type: ignore[arg-type]
                                 base_url=f"http://{host}") as c:
        yield c


async def register(c: httpx.AsyncClient, body: dict[str, Any] | None = None) -> dict[str, Any]:
    answer = await c.post(f"{OAUTH}/register/", json=body or CLIENT_BODIES["claude"])
    assert answer.status_code in (200, 201), answer.text
    data: dict[str, Any] = answer.json()
    return data


async def sign_in(c: httpx.AsyncClient, email: str, password: str = PASSWORD, next_path: str = "/") -> httpx.Response:
    page = await c.get("/login/", params={"next": next_path})
    return await c.post("/login/", data={"csrf_token": field(page.text, "csrf_token"), "next": next_path,
                                         "email": email, "password": password})


def authorize_params(client_id: str, challenge: str, *, redirect_uri: str = CLAUDE_REDIRECT,
                     **extra: str) -> dict[str, str]:
    return {"response_type": "code", "client_id": client_id, "redirect_uri": redirect_uri, "code_challenge": challenge,
            "code_challenge_method": "S256", "state": "state-123", **extra}


def offered_organizations(page: str) -> list[str]:
    """The ids of the organizations a consent page offers, in its order (one checkbox each)."""
    return re.findall(r'name="organization:([^"]+)"', page)


async def consent(c: httpx.AsyncClient, params: dict[str, str], *, email: str, decision: str = "allow",
                  organizations: Sequence[str] | None = None) -> httpx.Response:
    """GET authorize (signing in first when asked), then answer the consent page, choosing `organizations`
    (by default the first one offered)."""
    page = await c.get(f"{OAUTH}/authorize/", params=params)
    if page.status_code == 303 and page.headers["location"].startswith("/login/"):
        next_path = query_of(page.headers["location"])["next"]
        signed = await sign_in(c, email, next_path=next_path)
        assert signed.status_code == 303, signed.text
        page = await c.get(signed.headers["location"])
    assert page.status_code == 200, page.text
    form = {"csrf_token": field(page.text, "csrf_token"), "request": field(page.text, "request"), "decision": decision}
    chosen = offered_organizations(page.text)[:1] if organizations is None else organizations
    form.update({f"organization:{organization_id}": "yes" for organization_id in chosen})
    return await c.post(f"{OAUTH}/authorize/", data=form)


async def get_code(c: httpx.AsyncClient, client_id: str, challenge: str, *, email: str,
                   redirect_uri: str = CLAUDE_REDIRECT, organizations: Sequence[str] | None = None,
                   **extra: str) -> str:
    answer = await consent(c, authorize_params(client_id, challenge, redirect_uri=redirect_uri, **extra), email=email,
                           organizations=organizations)
    assert answer.status_code == 303, answer.text
    return query_of(answer.headers["location"])["code"]


async def tokens_for(c: httpx.AsyncClient, ws: Workspace, *, label: str = "owner",
                     client: dict[str, Any] | None = None, organizations: Sequence[str] | None = None,
                     **extra: str) -> dict[str, Any]:
    """Register (unless given a client), authorize as the workspace user for `organizations` (by default the
    first one the consent page offers), exchange the code."""
    client = client or await register(c)
    verifier, challenge = pkce()
    redirect_uri = client["redirect_uris"][0]
    code = await get_code(c, client["client_id"], challenge, email=ws.emails[label], redirect_uri=redirect_uri,
                          organizations=organizations, **extra)
    form = {"grant_type": "authorization_code", "code": code, "code_verifier": verifier,
            "client_id": client["client_id"], "redirect_uri": redirect_uri}
    if "client_secret" in client:
        form["client_secret"] = client["client_secret"]
    answer = await c.post(f"{OAUTH}/token/", data=form)
    assert answer.status_code == 200, answer.text
    data: dict[str, Any] = answer.json()
    return {**data, "client": client}


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}
