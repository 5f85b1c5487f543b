"""Dynamic Client Registration (RFC 7591) at POST /api/mcp/oauth/register/."""

from __future__ import annotations

import hashlib
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from prism.app import create_app
from prism.config import Settings
from prism.oauth.models import OAuthClient
from prism.storage import Database
from tests.factories import Factory, unique
from tests.oauth_support import CLIENT_BODIES, OAUTH, bearer, browser, register, tokens_for
from tests.test_mcp_protocol import JSON_AND_SSE, PATH, rpc

REGISTER = f"{OAUTH}/register/"


def body(**changes: Any) -> dict[str, Any]:
    return {"client_name": unique("client"), "redirect_uris": ["https://app.example.com/callback"], **changes}


@pytest.mark.parametrize("name", sorted(CLIENT_BODIES))
async def test_the_bodies_real_clients_send_register_with_201(client: httpx.AsyncClient, name: str) -> None:
    sent = {**CLIENT_BODIES[name], "client_name": unique(name)}
    answer = await client.post(REGISTER, json=sent)
    assert answer.status_code == 201, answer.text
    data = answer.json()
    assert data["client_id"] and data["client_name"] == sent["client_name"]
    assert data["redirect_uris"] == sent["redirect_uris"]
    assert data["grant_types"] == sent["grant_types"]
    assert ("client_secret" in data) == (sent["token_endpoint_auth_method"] == "client_secret_post")
    assert answer.headers["cache-control"] == "no-store"


async def test_registering_the_same_client_again_answers_200_with_the_same_client_id(
        client: httpx.AsyncClient) -> None:
    sent = body()
    first = await client.post(REGISTER, json=sent)
    again = await client.post(REGISTER, json=sent)
    assert (first.status_code, again.status_code) == (201, 200)
    assert again.json()["client_id"] == first.json()["client_id"]


async def test_a_requested_client_id_is_honoured_and_idempotent(client: httpx.AsyncClient) -> None:
    wanted = unique("known-client")
    first = await client.post(REGISTER, json=body(client_id=wanted, client_name="Known"))
    again = await client.post(REGISTER, json=body(client_id=wanted, client_name="Known"))
    assert (first.status_code, again.status_code) == (201, 200)
    assert first.json()["client_id"] == again.json()["client_id"] == wanted


async def test_a_known_client_id_with_other_redirect_uris_is_refused(client: httpx.AsyncClient) -> None:
    wanted = unique("known-client")
    assert (await client.post(REGISTER, json=body(client_id=wanted, client_name="Known"))).status_code == 201
    hijack = await client.post(REGISTER, json=body(client_id=wanted, client_name="Known",
                                                   redirect_uris=["https://attacker.example/cb"]))
    assert hijack.status_code == 400
    assert hijack.json()["error"] == "invalid_client_metadata"


@pytest.mark.parametrize("uri", [
    "javascript:alert(1)", "data:text/html,hi", "file:///etc/passwd", "http://app.example.com/callback",
    "http://10.0.0.5/callback", "https://app.example.com/cb#fragment", "not a uri", "/relative/path",
    "https://[::1/cb", "http://[::1/cb", "https://[app.example.com]/cb",
    # A port that is not one (a URI no redirect could follow): refused like an unparseable URI.
    "https://app.example.com:abc/cb", "https://app.example.com:99999/cb", "http://127.0.0.1:65536/cb",
])
async def test_dangerous_or_insecure_redirect_uris_are_refused(client: httpx.AsyncClient, uri: str) -> None:
    answer = await client.post(REGISTER, json=body(redirect_uris=[uri]))
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"] == "invalid_redirect_uri"
    assert answer.json()["error_description"]


@pytest.mark.parametrize("uri", [
    "http://127.0.0.1:8976/callback", "http://localhost:3000/cb", "http://[::1]:9000/cb", "cursor://x/cb",
    "vscode://vscode.github-authentication/did-authenticate", "com.example.app:/oauth2redirect",
    "urn:ietf:wg:oauth:2.0:oob",
])
async def test_loopback_private_use_and_oob_redirect_uris_are_accepted(client: httpx.AsyncClient, uri: str) -> None:
    answer = await client.post(REGISTER, json=body(redirect_uris=[uri]))
    assert answer.status_code == 201, answer.text


@pytest.mark.parametrize("changes", [
    {"grant_types": ["password"]}, {"grant_types": ["client_credentials"]}, {"response_types": ["token"]},
    {"token_endpoint_auth_method": "private_key_jwt"}, {"grant_types": "authorization_code"},
    {"client_name": 42}, {"client_id": "a b"}, {"scope": "admin:everything"}, {"prism_tool_surface": "tiny"},
    {"contacts": ["ops@example.com", 42]}, {"contacts": [{"email": "ops@example.com"}]},
    {"contacts": "ops@example.com"},
])
async def test_bad_metadata_is_refused_with_invalid_client_metadata(client: httpx.AsyncClient,
                                                                   changes: dict[str, Any]) -> None:
    answer = await client.post(REGISTER, json=body(**changes))
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"] == "invalid_client_metadata"


@pytest.mark.parametrize("payload", [b"", b"{not json", b"[1, 2]"])
async def test_unreadable_bodies_are_400_not_500(client: httpx.AsyncClient, payload: bytes) -> None:
    answer = await client.post(REGISTER, content=payload, headers={"Content-Type": "application/json"})
    assert answer.status_code == 400
    assert answer.json()["error"] == "invalid_client_metadata"


async def test_missing_redirect_uris_is_invalid_redirect_uri(client: httpx.AsyncClient) -> None:
    answer = await client.post(REGISTER, json={"client_name": "x"})
    assert answer.status_code == 400
    assert answer.json()["error"] == "invalid_redirect_uri"


async def test_unknown_fields_are_tolerated_and_known_extras_echoed(client: httpx.AsyncClient) -> None:
    answer = await client.post(REGISTER, json=body(logo_uri="https://app.example.com/logo.png",
                                                   jwks={"keys": []}, frobnicate=True, software_id="abc"))
    assert answer.status_code == 201, answer.text
    assert answer.json()["logo_uri"] == "https://app.example.com/logo.png"
    assert answer.json()["software_id"] == "abc"
    assert "frobnicate" not in answer.json()


async def test_client_secret_is_returned_once_and_stored_only_as_a_hash(client: httpx.AsyncClient,
                                                                       db: Database) -> None:
    sent = body(token_endpoint_auth_method="client_secret_post")
    first = await client.post(REGISTER, json=sent)
    secret = first.json()["client_secret"]
    manage = bearer(first.json()["registration_access_token"])
    read_back = await client.get(first.json()["registration_client_uri"], headers=manage)
    assert read_back.status_code == 200 and "client_secret" not in read_back.json()
    async with db.read() as session:
        row = (await session.execute(select(OAuthClient).where(
            OAuthClient.client_id == first.json()["client_id"]))).scalar_one()
    assert row.secret_hash == hashlib.sha256(secret.encode()).hexdigest()
    assert secret not in str([getattr(row, c.key) for c in OAuthClient.__table__.columns])


async def test_two_installations_of_a_confidential_client_each_get_a_secret_and_complete_the_flow(
        app: object, factory: Factory) -> None:
    """Every installation of a confidential client (ChatGPT's connector sends one fixed body) registers the same
    metadata. Each needs a secret of its own to authenticate at the token endpoint, and a secret is shown only
    when made: so each registration is a client of its own (201), never the first installation's (a 200 without
    its secret would leave the second unable to get a token)."""
    ws = await factory.workspace(roles=("owner",))
    sent = {**CLIENT_BODIES["chatgpt"], "client_name": unique("ChatGPT")}
    async with browser(app, ws.host) as c:
        answers = [await c.post(REGISTER, json=sent) for _ in range(2)]
        assert [a.status_code for a in answers] == [201, 201], [a.text for a in answers]
        first, second = (a.json() for a in answers)
        assert first["client_id"] != second["client_id"] and first["client_secret"] != second["client_secret"]
        assert second["registration_access_token"] != first["registration_access_token"]
        for installation in (first, second):
            tokens = await tokens_for(c, ws, client=installation)
            assert (await c.get("/api/v1/dev/me/", headers=bearer(tokens["access_token"]))).status_code == 200
        # The first installation's secret is not the second's.
        refused = await c.post(f"{OAUTH}/token/", data={"grant_type": "refresh_token", "refresh_token":
                                                        tokens["refresh_token"], "client_id": second["client_id"],
                                                        "client_secret": first["client_secret"]})
        assert refused.status_code == 400 and refused.json()["error"] == "invalid_client"


async def test_a_requested_client_id_of_a_confidential_client_stays_one_client(client: httpx.AsyncClient) -> None:
    """A requested client_id names one known client: the same registration again is that client (200, its
    secret not shown again), as for a public client."""
    sent = body(client_id=unique("known-confidential"), token_endpoint_auth_method="client_secret_post")
    first, again = await client.post(REGISTER, json=sent), await client.post(REGISTER, json=sent)
    assert (first.status_code, again.status_code) == (201, 200)
    assert again.json()["client_id"] == first.json()["client_id"] and "client_secret" not in again.json()


@pytest.mark.parametrize("field", ["logo_uri", "client_uri", "tos_uri", "policy_uri"])
@pytest.mark.parametrize("value", ["javascript:alert(1)", "http://app.example.com/x", "data:image/png;base64,AA",
                                   "https://user:pw@app.example.com/x", "https://[::1/x",
                                   "https://app.example.com:abc/x", "https://app.example.com:70000/x"])
async def test_links_the_consent_page_may_show_must_be_https(client: httpx.AsyncClient, field: str,
                                                             value: str) -> None:
    answer = await client.post(REGISTER, json=body(**{field: value}))
    assert answer.status_code == 400 and answer.json()["error"] == "invalid_client_metadata", answer.text


async def test_replacing_a_registration_with_a_url_that_cannot_be_parsed_is_refused(client: httpx.AsyncClient) -> None:
    created = (await client.post(REGISTER, json=body())).json()
    manage = bearer(created["registration_access_token"])
    sent = {"client_id": created["client_id"], "client_name": created["client_name"]}
    bad_redirect = await client.put(created["registration_client_uri"], headers=manage,
                                    json={**sent, "redirect_uris": ["https://[::1/cb"]})
    bad_logo = await client.put(created["registration_client_uri"], headers=manage,
                                json={**sent, "redirect_uris": created["redirect_uris"], "logo_uri": "https://[::1/"})
    assert bad_redirect.status_code == 400 and bad_redirect.json()["error"] == "invalid_redirect_uri", bad_redirect.text
    assert bad_logo.status_code == 400 and bad_logo.json()["error"] == "invalid_client_metadata", bad_logo.text


async def test_the_registration_access_token_is_shown_once_and_stored_only_as_a_hash(client: httpx.AsyncClient,
                                                                                      db: Database) -> None:
    sent = body()
    first = (await client.post(REGISTER, json=sent)).json()
    token = first["registration_access_token"]
    assert first["registration_client_uri"] == f"http://localhost{REGISTER}{first['client_id']}"
    again = (await client.post(REGISTER, json=sent)).json()
    assert "registration_access_token" not in again and again["registration_client_uri"]
    async with db.read() as session:
        row = (await session.execute(select(OAuthClient).where(
            OAuthClient.client_id == first["client_id"]))).scalar_one()
    assert row.registration_token_hash == hashlib.sha256(token.encode()).hexdigest()
    assert token not in str([getattr(row, c.key) for c in OAuthClient.__table__.columns])
    uri = REGISTER + first["client_id"]
    other = (await client.post(REGISTER, json=body())).json()
    # One client's token does not open another's registration.
    assert (await client.get(REGISTER + other["client_id"],
                             headers={"Authorization": f"Bearer {token}"})).status_code == 401
    assert (await client.get(uri)).status_code == 401
    assert (await client.get(uri, headers={"Authorization": f"Bearer {token}"})).status_code == 200


async def test_registration_allows_browser_clients_with_a_cors_preflight(client: httpx.AsyncClient) -> None:
    answer = await client.options(REGISTER, headers={"Origin": "https://inspector.example",
                                                     "Access-Control-Request-Method": "POST"})
    assert answer.status_code == 204
    assert answer.headers["access-control-allow-origin"] == "*"
    assert "POST" in answer.headers["access-control-allow-methods"]


async def test_a_client_registered_with_the_split_tool_surface_gets_it_on_the_mcp_door(
        app: object, factory: Factory) -> None:
    ws, other = await factory.workspace(roles=("owner",)), await factory.workspace(roles=("owner",))

    async def tool_names(host: str, token: str, query: str = "") -> set[str]:
        async with browser(app, host) as c:
            headers = {**bearer(token), **JSON_AND_SSE}
            opened = await c.post(PATH + query, json=rpc("initialize", {}), headers=headers)
            listed = await c.post(PATH + query, json=rpc("tools/list"),
                                  headers={**headers, "Mcp-Session-Id": opened.headers["mcp-session-id"]})
            return {t["name"] for t in listed.json()["result"]["tools"]}

    async with browser(app, ws.host) as c:
        split_client = await register(c, {**CLIENT_BODIES["claude"], "prism_tool_surface": "split"})
        plain_client = await register(c, CLIENT_BODIES["claude"])
        assert split_client["prism_tool_surface"] == "split" and "prism_tool_surface" not in plain_client
        assert split_client["client_id"] != plain_client["client_id"]  # another registration, another client
        split_token = (await tokens_for(c, ws, client=split_client))["access_token"]
        plain_token = (await tokens_for(c, ws, client=plain_client))["access_token"]
    async with browser(app, other.host) as c:
        other_token = (await tokens_for(c, other, client=split_client))["access_token"]
    assert "prism_entity_crud_read" in await tool_names(ws.host, split_token)
    assert "prism_entity_crud_read" in await tool_names(other.host, other_token)  # the client's, in every tenant
    assert "prism_entity_crud" in await tool_names(ws.host, plain_token)
    assert "prism_entity_crud" in await tool_names(ws.host, split_token, "?tools=mega")


async def test_deleting_a_registration_stops_its_access_and_refresh_tokens_at_once(
        app: Any, settings: Settings, factory: Factory) -> None:
    """RFC 7592 2.3: once a client deletes its registration, nothing it was granted works any longer, even a token
    this process has just seen (an app with the credential cache of a deployment)."""
    cached = create_app(settings.model_copy(update={"credential_cache_seconds": 60.0}), registry=app.state.registry)
    ws = await factory.workspace(roles=("owner",))
    async with cached.router.lifespan_context(cached), browser(cached, ws.host) as c:
        registered = await register(c, {**CLIENT_BODIES["claude"], "client_name": unique("leaving")})
        tokens = await tokens_for(c, ws, client=registered)
        assert tokens["refresh_token"]
        headers = {**bearer(tokens["access_token"]), **JSON_AND_SSE}
        opened = await c.post(PATH, json=rpc("initialize", {}), headers=headers)
        assert opened.status_code == 200
        session = {**headers, "Mcp-Session-Id": opened.headers["mcp-session-id"]}
        assert (await c.post(PATH, json=rpc("tools/list"), headers=session)).status_code == 200
        assert (await c.get("/api/v1/dev/me/", headers=bearer(tokens["access_token"]))).status_code == 200

        manage = bearer(registered["registration_access_token"])
        assert (await c.delete(registered["registration_client_uri"], headers=manage)).status_code == 204

        for refused in (await c.post(PATH, json=rpc("tools/list"), headers=session),
                        await c.post(PATH, json=rpc("initialize", {}), headers=headers)):
            assert refused.status_code == 401 and refused.json()["error"]["data"]["error"] == "invalid_token"
        assert (await c.get("/api/v1/dev/me/", headers=bearer(tokens["access_token"]))).status_code == 401
        refreshed = await c.post(f"{OAUTH}/token/", data={"grant_type": "refresh_token", "client_id":
                                                          registered["client_id"],
                                                          "refresh_token": tokens["refresh_token"]})
        assert refreshed.status_code in (400, 401) and "access_token" not in refreshed.json()
        assert refreshed.json()["error"] in ("invalid_client", "invalid_grant")
