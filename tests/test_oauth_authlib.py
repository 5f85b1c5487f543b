"""Authlib's OAuth 2 client against a running `prism serve`: register → authorize → token → call → refresh →
revoke → refused. The browser part (login and consent) is scripted over plain HTTP."""

from __future__ import annotations

import base64
import re
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from authlib.integrations.httpx_client import AsyncOAuth2Client, OAuthError  # type: ignore[import-untyped]

from tests.oauth_support import error_code, field, offered_organizations
from tests.processes import Server, ServerPool, clean_env, run_cli, scratch_database

EMAIL = "owner@authlib.example.com"
PASSWORD = "authlib owner password"
REDIRECT = "http://127.0.0.1:8976/callback"


@dataclass
class Running:
    server: Server
    base: str


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    log_dir: Path = tmp_path_factory.mktemp("oauth-authlib")
    secret = secrets.token_urlsafe(40)
    with scratch_database(log_dir, "oauth") as url:
        assert run_cli("migrate", database_url=url, cwd=log_dir, PRISM_SECRET_KEY=secret).returncode == 0
        made = run_cli("tenant", "create", "acme", "--name", "Acme", "--admin-email", EMAIL, "--admin-password",
                       PASSWORD, database_url=url, cwd=log_dir, PRISM_SECRET_KEY=secret)
        assert made.returncode == 0, str(made)
        pool = ServerPool(log_dir)
        try:
            server = pool.start(env=clean_env(PRISM_DATABASE_URL=url, PRISM_SEED_DEMO="false", PRISM_SECRET_KEY=secret))
            yield Running(server, server.base_url)
        finally:
            pool.stop_all()


async def _browser_consent(authorization_url: str) -> str:
    """Sign in and allow, as a person would; returns the URL the browser is sent back to."""
    async with httpx.AsyncClient(timeout=30) as browser:
        page = await browser.get(authorization_url)
        assert page.status_code == 303, page.text
        login = await browser.get(str(page.next_request.url) if page.next_request else "")
        signed = await browser.post(str(login.url).split("?")[0], data={
            "csrf_token": field(login.text, "csrf_token"), "next": field(login.text, "next"),
            "email": EMAIL, "password": PASSWORD})
        assert signed.status_code == 303, signed.text
        consent = await browser.get(str(signed.next_request.url) if signed.next_request else "")
        assert consent.status_code == 200, consent.text
        action = re.search(r'<form method="post" action="([^"]+)"', consent.text)
        assert action, consent.text
        answer = await browser.post(str(consent.url.join(action.group(1))), data={
            "csrf_token": field(consent.text, "csrf_token"), "request": field(consent.text, "request"),
            f"organization:{offered_organizations(consent.text)[0]}": "yes", "decision": "allow"})
        assert answer.status_code == 303, answer.text
        return answer.headers["location"]


async def test_authlib_client_runs_the_whole_flow_against_a_running_server(running: Running) -> None:
    async with httpx.AsyncClient(timeout=30) as plain:
        meta = (await plain.get(f"{running.base}/.well-known/oauth-authorization-server")).json()
        registered = (await plain.post(meta["registration_endpoint"], json={
            "client_name": "Authlib test client", "redirect_uris": [REDIRECT],
            "grant_types": ["authorization_code", "refresh_token"], "token_endpoint_auth_method": "none"})).json()

    async with AsyncOAuth2Client(client_id=registered["client_id"], redirect_uri=REDIRECT, scope="mcp:read mcp:write",
                                 code_challenge_method="S256", token_endpoint_auth_method="none",
                                 timeout=30) as client:
        verifier = secrets.token_urlsafe(48)
        url, state = client.create_authorization_url(meta["authorization_endpoint"], code_verifier=verifier)
        back = await _browser_consent(url)
        returned = {k: v[0] for k, v in parse_qs(urlsplit(back).query).items()}
        assert back.startswith(REDIRECT) and returned["state"] == state and returned["iss"] == meta["issuer"]

        token = await client.fetch_token(meta["token_endpoint"], authorization_response=back, code_verifier=verifier)
        assert token["token_type"] == "Bearer" and token["refresh_token"]

        call = await client.post(f"{running.base}/api/mcp/tools/prism_entity_crud/", json={
            "operation": "list", "app": "spare_parts", "entity": "spare_part", "arguments": {}})
        assert call.status_code == 200 and call.json()["success"] is True, call.text

        refreshed = await client.refresh_token(meta["token_endpoint"])
        assert refreshed["access_token"] != token["access_token"]
        me = await client.get(f"{running.base}/api/v1/dev/me/")
        assert me.status_code == 200 and me.json()["user"]["email"] == EMAIL

        revoked = await client.revoke_token(meta["revocation_endpoint"], token=refreshed["refresh_token"],
                                            token_type_hint="refresh_token")
        assert revoked.status_code == 200

        refused = await client.get(f"{running.base}/api/v1/dev/me/")
        assert refused.status_code == 401 and refused.json()["error"] == "invalid_token"
        assert "resource_metadata=" in refused.headers["www-authenticate"]


async def test_a_confidential_client_with_basic_auth_offline_access_and_an_app_scope(running: Running) -> None:
    """Authlib as a confidential client through the origin-root endpoints of MCP 2025-03-26: registered with
    client_secret_basic for authorization_code only, it asks `openid profile email offline_access
    spare_parts.view` from a `localhost` redirect with another port than the registered `127.0.0.1` one, reads
    spare parts and nothing else, refreshes, manages its registration (RFC 7592) and revokes with its secret."""
    base = running.base
    async with httpx.AsyncClient(timeout=30) as plain:
        meta = (await plain.get(f"{base}/.well-known/oauth-authorization-server")).json()
        # Published: SPEC.md's list; a registration asking for client_secret_basic is accepted all the same.
        assert meta["token_endpoint_auth_methods_supported"] == ["none", "client_secret_post"]
        assert "offline_access" in meta["scopes_supported"] and meta["client_id_metadata_document_supported"]
        port = base.rsplit(":", 1)[1]
        assert meta["service_documentation"] == f"http://portal.localhost:{port}/"
        made = await plain.post(f"{base}/register", json={
            "client_name": "Authlib confidential", "redirect_uris": ["http://127.0.0.1/callback"],
            "token_endpoint_auth_method": "client_secret_basic", "logo_uri": "https://example.com/logo.png"})
        assert made.status_code == 201, made.text
        registered = made.json()
        assert registered["token_endpoint_auth_method"] == "client_secret_basic"
        manage = {"Authorization": f"Bearer {registered['registration_access_token']}"}
        uri = registered["registration_client_uri"]
        assert uri == f"{base}/api/mcp/oauth/register/{registered['client_id']}"
        assert (await plain.get(uri, headers={"Authorization": "Bearer prat_wrong"})).status_code == 401
        read = await plain.get(uri, headers=manage)
        assert read.status_code == 200 and read.json()["client_name"] == "Authlib confidential"
        body = {k: v for k, v in read.json().items() if k not in ("registration_access_token",)}
        updated = await plain.put(uri, headers=manage, json={**body, "client_name": "Authlib renamed"})
        assert updated.status_code == 200 and updated.json()["client_name"] == "Authlib renamed", updated.text
        bad_logo = await plain.put(uri, headers=manage, json={**body, "logo_uri": "javascript:alert(1)"})
        assert bad_logo.status_code == 400 and bad_logo.json()["error"] == "invalid_client_metadata"

    redirect = "http://localhost:53117/callback"
    async with AsyncOAuth2Client(client_id=registered["client_id"], client_secret=registered["client_secret"],
                                 redirect_uri=redirect, scope="openid profile email offline_access spare_parts.view",
                                 code_challenge_method="S256", token_endpoint_auth_method="client_secret_basic",
                                 timeout=30) as client:
        verifier = secrets.token_urlsafe(48)
        url, _ = client.create_authorization_url(f"{base}/authorize", code_verifier=verifier)
        back = await _browser_consent(url)
        assert back.startswith(redirect)
        token = await client.fetch_token(f"{base}/token", authorization_response=back, code_verifier=verifier)
        assert token["scope"] == "offline_access spare_parts.view" and token["refresh_token"]

        listed = await client.post(f"{base}/api/mcp/tools/prism_entity_crud/", json={
            "operation": "list", "app": "spare_parts", "entity": "spare_part", "arguments": {}})
        assert listed.status_code == 200 and listed.json()["success"] is True, listed.text
        created = await client.post(f"{base}/api/mcp/tools/prism_entity_crud/", json={
            "operation": "create", "app": "spare_parts", "entity": "spare_part",
            "arguments": {"name": "Gasket", "sku": "G-1", "quantity": 1}})
        assert created.status_code == 403, created.text

        refreshed = await client.refresh_token(f"{base}/token")
        assert refreshed["access_token"] != token["access_token"]

        async with httpx.AsyncClient(timeout=30) as plain:
            wrong = base64.b64encode(f"{registered['client_id']}:pcs_wrong".encode()).decode()
            refused = await plain.post(meta["revocation_endpoint"], data={"token": refreshed["refresh_token"]},
                                       headers={"Authorization": f"Basic {wrong}"})
            assert refused.status_code == 401 and refused.json()["error"] == "invalid_client"
            anonymous = await plain.post(meta["revocation_endpoint"], data={"token": refreshed["refresh_token"]})
            assert anonymous.status_code == 401 and anonymous.json()["error"] == "invalid_client"
            repeated = await plain.post(
                f"{base}/token", content=b"grant_type=refresh_token&refresh_token=a&refresh_token=b",
                headers={"Authorization": f"Basic {wrong}", "Content-Type": "application/x-www-form-urlencoded"})
            assert repeated.status_code == 400 and repeated.json()["error"] == "invalid_request"
        still = await client.get(f"{base}/api/v1/dev/me/")
        assert still.status_code == 200, still.text

        revoked = await client.revoke_token(meta["revocation_endpoint"], token=refreshed["refresh_token"],
                                            token_type_hint="refresh_token")
        assert revoked.status_code == 200
        assert (await client.get(f"{base}/api/v1/dev/me/")).status_code == 401

    async with httpx.AsyncClient(timeout=30) as plain:
        assert (await plain.delete(uri, headers=manage)).status_code == 204
        assert (await plain.get(uri, headers=manage)).status_code == 401
        gone = await plain.post(f"{base}/token", data={"grant_type": "refresh_token", "refresh_token": "prt_x"},
                                auth=(registered["client_id"], registered["client_secret"]))
        assert gone.status_code == 401 and gone.json()["error"] == "invalid_client"


async def test_authlib_meets_the_registered_scope_ceiling_and_the_bound_resource(running: Running) -> None:
    """A client registered for `mcp:read` that asks more gets Prism's `invalid_scope` page; within it, its
    authorization bound to the MCP endpoint (RFC 8707) cannot be refreshed for the origin (`invalid_target`);
    its refused token gets `error="invalid_token"` on a REST door; a wrong method on the token endpoint is
    the RFC 6749 shape with CORS."""
    base = running.base
    mcp = f"{base}/api/mcp/sse"
    async with httpx.AsyncClient(timeout=30) as plain:
        meta = (await plain.get(f"{base}/.well-known/oauth-authorization-server")).json()
        registered = (await plain.post(meta["registration_endpoint"], json={
            "client_name": "Authlib read-only client", "redirect_uris": [REDIRECT], "scope": "mcp:read",
            "grant_types": ["authorization_code", "refresh_token"], "token_endpoint_auth_method": "none"})).json()

    async with AsyncOAuth2Client(client_id=registered["client_id"], redirect_uri=REDIRECT, scope="mcp:read mcp:write",
                                 code_challenge_method="S256", token_endpoint_auth_method="none",
                                 timeout=30) as greedy:
        url, state = greedy.create_authorization_url(meta["authorization_endpoint"],
                                                     code_verifier=secrets.token_urlsafe(48))
        async with httpx.AsyncClient(timeout=30) as browser:
            refused = await browser.get(url)
        # Prism's error page, not a redirect (RFC 9700 4.11.2): the client's developer reads it there.
        assert refused.status_code == 400 and "location" not in refused.headers, refused.headers.get("location")
        assert error_code(refused.text) == "invalid_scope" and state not in refused.text

    async with AsyncOAuth2Client(client_id=registered["client_id"], redirect_uri=REDIRECT, scope="mcp:read",
                                 code_challenge_method="S256", token_endpoint_auth_method="none",
                                 timeout=30) as client:
        verifier = secrets.token_urlsafe(48)
        url, _ = client.create_authorization_url(meta["authorization_endpoint"], code_verifier=verifier, resource=mcp)
        back = await _browser_consent(url)
        token = await client.fetch_token(meta["token_endpoint"], authorization_response=back, code_verifier=verifier,
                                         resource=mcp)
        assert token["scope"] == "mcp:read"
        with pytest.raises(OAuthError) as widened:
            await client.refresh_token(meta["token_endpoint"], resource=base)
        assert widened.value.error == "invalid_target"
        with pytest.raises(OAuthError) as more:
            await client.refresh_token(meta["token_endpoint"], scope="mcp:write")
        assert more.value.error == "invalid_scope"
        refreshed = await client.refresh_token(meta["token_endpoint"], resource=mcp)
        assert refreshed["scope"] == "mcp:read"
        me = await client.get(f"{base}/api/v1/dev/me/")
        assert me.status_code == 200, me.text

        wrong_method = await client.get(meta["token_endpoint"])
        assert wrong_method.status_code == 405 and wrong_method.json()["error"] == "invalid_request"
        assert wrong_method.headers["access-control-allow-origin"] == "*" and "POST" in wrong_method.headers["allow"]

        await client.revoke_token(meta["revocation_endpoint"], token=refreshed["refresh_token"],
                                  token_type_hint="refresh_token")
        refused = await client.get(f"{base}/api/v1/dev/me/")
        assert refused.status_code == 401
        assert refused.headers["www-authenticate"].endswith(', error="invalid_token"'), refused.headers
