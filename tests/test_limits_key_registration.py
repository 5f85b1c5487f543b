"""POST /api/mcp/api-keys/register/: email + password for an `mcp_` key (SPEC.md "API-key registration")."""

from __future__ import annotations

import uuid

from sqlalchemy import select, update

from prism.config import Settings
from prism.keys.service import DEFAULT_KEY_NAME, hash_key
from prism.kit.ids import public_organization_id
from prism.models import ApiKey, User
from prism.storage import Database
from tests.factories import PASSWORD, Factory
from tests.limits_support import client_for, limited_app

REGISTER = "/api/mcp/api-keys/register/"


async def test_registration_returns_a_working_mcp_key_once_and_stores_only_its_hash(
        client: object, factory: Factory, db: Database) -> None:
    ws = await factory.workspace(roles=("member",))
    response = await client.post(REGISTER, json={"email": ws.emails["member"].upper(), "password": PASSWORD},  # type: ignore[attr-defined]
                                 headers={"Host": ws.host})
    assert response.status_code == 201, response.text
    body = response.json()
    assert set(body) >= {"api_key", "key_id", "key_prefix", "name", "organization", "organization_name",
                         "expires_at"}
    assert body["api_key"].startswith("mcp_") and body["key_prefix"] == body["api_key"][:16]
    assert body["name"] == DEFAULT_KEY_NAME and body["expires_at"] is None
    assert body["organization"] == public_organization_id(ws.org.id) and body["organization_name"] == ws.org.name
    assert uuid.UUID(body["key_id"]) and response.headers["Cache-Control"] == "no-store"
    me = await client.get("/api/v1/dev/me/", headers={"Authorization": f"Bearer {body['api_key']}",  # type: ignore[attr-defined]
                                                      "Host": ws.host})
    assert me.status_code == 200 and me.json()["key"]["prefix"] == body["key_prefix"]
    async with db.read() as session:
        stored = (await session.execute(select(ApiKey).where(ApiKey.id == body["key_id"]))).scalar_one()
    assert stored.key_hash == hash_key(body["api_key"]) and body["api_key"] not in stored.key_hash


async def test_a_chosen_name_and_organization_are_used(client: object, factory: Factory) -> None:
    ws = await factory.workspace(roles=("member",))
    second = await factory.second_org(ws, "Field ops")
    async with factory.db.write() as s:
        from prism.identity.service import add_to_organization, get_user

        user = await get_user(s, ws.emails["member"])
        assert user is not None
        await add_to_organization(s, user, second, role="viewer")
    body = {"email": ws.emails["member"], "password": PASSWORD, "name": "Claude desktop"}
    default = await client.post(REGISTER, json=body, headers={"Host": ws.host})  # type: ignore[attr-defined]
    assert default.status_code == 201 and default.json()["organization"] == public_organization_id(
        ws.org.id)  # the earliest membership
    chosen = await client.post(REGISTER, json={**body, "organization": second.slug}, headers={"Host": ws.host})  # type: ignore[attr-defined]
    assert chosen.status_code == 201, chosen.text
    assert chosen.json()["organization"] == public_organization_id(second.id)
    assert chosen.json()["name"] == "Claude desktop" and chosen.json()["tool_surface"] is None
    split = await client.post(REGISTER, json={**body, "tool_surface": "split"}, headers={"Host": ws.host})  # type: ignore[attr-defined]
    assert split.status_code == 201 and split.json()["tool_surface"] == "split", split.text
    stranger = await client.post(REGISTER, json={**body, "organization": str(uuid.uuid4())},  # type: ignore[attr-defined]
                                 headers={"Host": ws.host})
    assert stranger.status_code == 404 and stranger.json()["error"] == "organization_not_found"


async def test_another_tenants_host_offers_none_of_the_users_organizations(client: object, factory: Factory) -> None:
    mine, theirs = await factory.workspace(roles=("member",)), await factory.workspace(roles=("member",))
    response = await client.post(REGISTER, json={"email": mine.emails["member"], "password": PASSWORD,  # type: ignore[attr-defined]
                                                 "organization": theirs.org.id}, headers={"Host": theirs.host})
    assert response.status_code == 403 and response.json()["error"] == "no_organization"


async def test_the_platform_host_uses_the_users_organization_in_any_tenant(client: object, factory: Factory) -> None:
    ws = await factory.workspace(roles=("member",))
    response = await client.post(REGISTER, json={"email": ws.emails["member"], "password": PASSWORD})  # type: ignore[attr-defined]
    assert response.status_code == 201 and response.json()["organization"] == public_organization_id(ws.org.id)


async def test_bad_credentials_and_inactive_users_get_401(client: object, factory: Factory, db: Database) -> None:
    ws = await factory.workspace(roles=("member", "viewer"))
    async with db.write() as session:
        await session.execute(update(User).where(User.email == ws.emails["viewer"]).values(is_active=False))
    cases = [({"email": ws.emails["member"], "password": "not the password"}, "invalid_credentials"),
             ({"email": "nobody-at-all@example.com", "password": PASSWORD}, "invalid_credentials"),
             ({"email": ws.emails["viewer"], "password": PASSWORD}, "user_inactive")]
    for body, code in cases:
        response = await client.post(REGISTER, json=body, headers={"Host": ws.host})  # type: ignore[attr-defined]
        assert response.status_code == 401, body
        assert response.json()["error"] == code and "api_key" not in response.json()


async def test_malformed_bodies_get_400_naming_the_field(client: object) -> None:
    cases = [(b"", "missing_body"), (b"{", "invalid_json"), (b"[]", "invalid_body"),
             (b'{"password": "x"}', "invalid_body"), (b'{"email": "a@example.com", "password": 5}', "invalid_body"),
             (b'{"email": "a@example.com", "password": "x", "tool_surface": "tiny"}', "invalid_tool_surface")]
    for raw, code in cases:
        response = await client.post(REGISTER, content=raw, headers={"Content-Type": "application/json"})  # type: ignore[attr-defined]
        assert response.status_code == 400 and response.json()["error"] == code, raw


async def test_registration_allows_5_per_minute_per_address(settings: Settings, app: object,
                                                            factory: Factory) -> None:
    ws = await factory.workspace(roles=("member",))
    async with limited_app(settings, app) as limited, client_for(limited) as client, \
            client_for(limited, "203.0.113.77") as elsewhere:
        body = {"email": ws.emails["member"], "password": PASSWORD}
        statuses = [(await client.post(REGISTER, json=body)).status_code for _ in range(5)]
        assert statuses == [201] * 5
        refused = await client.post(REGISTER, json=body)
        assert refused.status_code == 429 and refused.json()["error"] == "rate_limited"
        assert 1 <= int(refused.headers["Retry-After"]) <= 60
        assert (await elsewhere.post(REGISTER, json=body)).status_code == 201
