"""Who may do what: roles and scopes (403), credentials and hosts (401/404), identity and the tool catalog."""

from __future__ import annotations

import asyncio
import base64
import itertools
import secrets
import string
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime, timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession

from prism.apps.params import Params
from prism.apps.spare_parts.models import SparePart
from prism.auth import authenticator as authenticator_module
from prism.auth.authenticator import Authenticator
from prism.config import Settings
from prism.errors import CredentialNoLongerValid
from prism.keys.service import lookup_of, revoke_key, touch_keys
from prism.kit.ids import public_organization_id
from prism.kit.timeutil import utcnow
from prism.models import ApiKey, AuditEntry
from prism.registry import HandlerApp, HandlerCall, Registry
from prism.storage import Database
from prism.tenancy.hosts import classify_host
from tests.apps_support import running_app_with
from tests.factories import Factory, Workspace
from tests.ledger_support import seal_waiting

CANONICAL = "/api/mcp/tools/prism_entity_crud/"
_addresses = itertools.count(1)


@pytest.fixture(scope="module")
async def shared(db: Database) -> Workspace:
    factory = Factory(db)
    ws = await factory.workspace(roles=("owner", "viewer", "member"))
    await factory.add_key(ws, "read_only", scopes="mcp:read")
    return ws


@pytest.fixture
async def stranger(app: Any) -> AsyncIterator[httpx.AsyncClient]:
    """A client from an address of its own, so failed attempts never add up across tests."""
    n = next(_addresses)
    transport = httpx.ASGITransport(app=app, client=(f"10.77.{n // 250}.{n % 250 + 1}", 40000))
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as c:
        yield c


def envelope(operation: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"app": "spare_parts", "entity": "spare_part", "operation": operation, "arguments": arguments}


async def crud(client: httpx.AsyncClient, headers: dict[str, str], operation: str,
               arguments: dict[str, Any]) -> httpx.Response:
    return await client.post(CANONICAL, headers=headers, json=envelope(operation, arguments))


async def create_part(client: httpx.AsyncClient, ws: Workspace, sku: str, label: str = "owner") -> dict[str, Any]:
    r = await crud(client, ws.headers(label), "create", {"sku": sku, "name": f"Part {sku}", "quantity": 5})
    assert r.status_code == 200, r.text
    return r.json()["data"]  # type: ignore[no-any-return]


async def stored_part(db: Database, part_id: str) -> dict[str, Any] | None:
    async with db.read() as s:
        row = await s.get(SparePart, part_id)
        return None if row is None else {c.key: getattr(row, c.key) for c in SparePart.__table__.columns}


async def last_entry(db: Database, organization_id: str) -> AuditEntry:
    await seal_waiting(db, organization_id)
    async with db.read() as s:
        return (await s.execute(select(AuditEntry).where(AuditEntry.organization_id == organization_id)
                                .order_by(AuditEntry.seq.desc()).limit(1))).scalar_one()


async def key_id(db: Database, plaintext: str) -> str:
    async with db.read() as s:
        return (await s.execute(select(ApiKey.id).where(ApiKey.lookup == lookup_of(plaintext)))).scalar_one()


def assert_refused(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body: dict[str, Any] = response.json()
    assert body["error"] == code, body
    return body


# --- roles and scopes --------------------------------------------------------------------------------


async def test_viewer_cannot_update_and_the_refusal_is_ledgered_with_nothing_written(
        client: httpx.AsyncClient, shared: Workspace, db: Database) -> None:
    part = await create_part(client, shared, "VIEW-1")
    before = await stored_part(db, part["id"])
    for door in ("canonical", "sandbox"):
        args = {"id": part["id"], "quantity": 999, "location": "Gone"}
        if door == "canonical":
            r = await crud(client, shared.headers("viewer"), "update", args)
        else:
            r = await client.post("/api/v1/dev/call/", headers=shared.headers("viewer"), json={
                "name": "prism_entity_crud", "arguments": envelope("update", args)})
        body = assert_refused(r, 403, "permission_denied")
        assert "spare_parts.change_spare_part" in body["message"]
        entry = await last_entry(db, shared.org.id)
        assert (entry.outcome, entry.error_code, entry.coordinate) == (
            "refused", "permission_denied", "entity_crud/spare_parts/spare_part/update")
        assert entry.credential_id == await key_id(db, shared.keys["viewer"])
        assert entry.detail["status"] == 403
    assert await stored_part(db, part["id"]) == before
    for op, args in (("create", {"sku": "VIEW-2", "name": "x"}), ("delete", {"id": part["id"]})):
        assert_refused(await crud(client, shared.headers("viewer"), op, args), 403, "permission_denied")
    r = await crud(client, shared.headers("viewer"), "read", {"id": part["id"]})
    assert r.status_code == 200 and r.json()["data"]["quantity"] == 5


async def test_read_only_scope_key_cannot_create_and_the_refusal_is_ledgered_with_nothing_written(
        client: httpx.AsyncClient, shared: Workspace, db: Database) -> None:
    # The key's user is an owner: only the key's scope stands in the way.
    r = await crud(client, shared.headers("read_only"), "create", {"sku": "RO-1", "name": "Read-only part"})
    body = assert_refused(r, 403, "permission_denied")
    assert "mcp:write" in body["message"]
    entry = await last_entry(db, shared.org.id)
    assert (entry.outcome, entry.error_code, entry.coordinate) == (
        "refused", "permission_denied", "entity_crud/spare_parts/spare_part/create")
    assert entry.credential_id == await key_id(db, shared.keys["read_only"])
    async with db.read() as s:
        assert (await s.execute(select(SparePart.id).where(SparePart.sku == "RO-1"))).first() is None
    part = await create_part(client, shared, "RO-2")
    for op, args in (("update", {"id": part["id"], "quantity": 1}), ("delete", {"id": part["id"]})):
        assert_refused(await crud(client, shared.headers("read_only"), op, args), 403, "permission_denied")
    assert await stored_part(db, part["id"]) is not None
    r = await crud(client, shared.headers("read_only"), "read", {"id": part["id"]})
    assert r.status_code == 200 and r.json()["data"]["quantity"] == 5


async def test_member_cannot_delete_but_owner_can(client: httpx.AsyncClient, shared: Workspace, db: Database) -> None:
    part = await create_part(client, shared, "MEM-1", label="member")
    r = await crud(client, shared.headers("member"), "update", {"id": part["id"], "reorder_level": 6})
    assert r.status_code == 200 and r.json()["data"]["reorder_level"] == 6
    body = assert_refused(await crud(client, shared.headers("member"), "delete", {"id": part["id"]}), 403,
                          "permission_denied")
    assert "spare_parts.delete_spare_part" in body["message"]
    entry = await last_entry(db, shared.org.id)
    assert (entry.outcome, entry.error_code) == ("refused", "permission_denied")
    assert await stored_part(db, part["id"]) is not None

    r = await crud(client, shared.headers("owner"), "delete", {"id": part["id"]})
    assert r.status_code == 200 and r.json()["data"] == {"id": part["id"], "deleted": True}
    entry = await last_entry(db, shared.org.id)
    assert (entry.outcome, entry.error_code, entry.coordinate) == (
        "allowed", None, "entity_crud/spare_parts/spare_part/delete")
    assert await stored_part(db, part["id"]) is None


# --- 401: every door, every way a credential can be wrong ----------------------------------------------

AUTH_DOORS: list[tuple[str, str, Any]] = [
    ("GET", "/api/v1/dev/me/", None),
    ("GET", "/api/v1/dev/tools/", None),
    ("GET", "/api/v1/dev/introspect/", None),
    ("POST", "/api/v1/dev/introspect", {"dimension": "apps"}),
    ("POST", "/api/v1/dev/call/", {"name": "prism_whoami", "arguments": {}}),
    ("POST", CANONICAL, envelope("list", {})),
    ("POST", "/prism/entity_crud/spare_parts/spare_part/list", {}),
]


async def assert_401_everywhere(client: httpx.AsyncClient, host: str, authorization: str | None) -> None:
    headers = {"Host": host}
    if authorization is not None:
        headers["Authorization"] = authorization
    for method, path, body in AUTH_DOORS:
        r = await client.request(method, path, headers=headers, json=body)
        assert r.status_code == 401, (path, r.status_code, r.text)
        challenge = r.headers.get("www-authenticate", "")
        assert challenge.startswith('Bearer realm="prism", resource_metadata="'), (path, r.headers)
        payload = r.json()
        assert payload["error"] in ("authentication_required", "invalid_token"), payload
        # RFC 6750 3.1: a Bearer credential sent and refused is named `invalid_token` in the challenge too; a
        # request that sent none (or another scheme) gets the challenge without an error code.
        assert ('error="invalid_token"' in challenge) == (payload["error"] == "invalid_token"), (path, challenge)
        assert payload["message"]
        if path.startswith(("/api/mcp/", "/prism/")):
            assert payload["success"] is False and payload["tool_name"] == "prism_entity_crud"


def well_formed_unknown_key() -> str:
    return "ck_" + "".join(secrets.choice(string.ascii_letters + string.digits) for _ in range(40))


@pytest.mark.parametrize("authorization", [
    pytest.param(None, id="missing header"),
    pytest.param("", id="empty header"),
    pytest.param("Bearer", id="scheme without key"),
    pytest.param("Bearer    ", id="scheme with blanks"),
    pytest.param("Basic " + base64.b64encode(b"user:pass").decode(), id="basic scheme"),
    pytest.param("Token {key}", id="token scheme with a valid key"),
    pytest.param("{key}", id="valid key without scheme"),
    pytest.param("Bearer ck_short", id="malformed short key"),
    pytest.param("Bearer xx_" + "a" * 40, id="malformed unknown prefix"),
    pytest.param("Bearer ck_" + "!" * 40, id="malformed characters"),
    pytest.param("Bearer {key}x", id="valid key with extra character"),
    pytest.param("Bearer " + "k" * 5000, id="very long token"),
    pytest.param("Bearer unknown", id="unknown well-formed key"),
    pytest.param("Bearer {key_with_wrong_secret}", id="right prefix wrong secret"),
])
async def test_bad_credentials_get_401_with_bearer_challenge_on_every_door(
        stranger: httpx.AsyncClient, shared: Workspace, authorization: str | None) -> None:
    key = shared.keys["owner"]
    if authorization is not None:
        authorization = authorization.format(key=key, key_with_wrong_secret=key[:-4] + "AAAA")
        if authorization == "Bearer unknown":
            authorization = f"Bearer {well_formed_unknown_key()}"
    await assert_401_everywhere(stranger, shared.host, authorization)


async def test_revoked_key_gets_401_and_other_keys_keep_working(
        stranger: httpx.AsyncClient, factory: Factory, shared: Workspace, db: Database) -> None:
    key = await factory.add_key(shared, "to_revoke")
    r = await stranger.get("/api/v1/dev/me/", headers=shared.headers("to_revoke"))
    assert r.status_code == 200, r.text
    async with db.write() as s:
        revoked = await revoke_key(s, tenant=shared.tenant, key_ref=lookup_of(key) or "")
    assert revoked.revoked_at is not None
    await assert_401_everywhere(stranger, shared.host, f"Bearer {key}")
    assert (await stranger.get("/api/v1/dev/me/", headers=shared.headers("owner"))).status_code == 200


async def test_expired_key_gets_401(stranger: httpx.AsyncClient, factory: Factory, shared: Workspace,
                                    db: Database) -> None:
    key = await factory.add_key(shared, "expiring", expires_days=1)
    r = await stranger.get("/api/v1/dev/me/", headers=shared.headers("expiring"))
    assert r.status_code == 200, r.text
    # Simulates the day passing: the key's expiry is moved into the past rather than waiting for it.
    async with db.write() as s:
        await s.execute(update(ApiKey).where(ApiKey.lookup == lookup_of(key))
                        .values(expires_at=utcnow() - timedelta(minutes=1)))
    await assert_401_everywhere(stranger, shared.host, f"Bearer {key}")


async def test_key_used_on_another_tenants_host_gets_401(
        stranger: httpx.AsyncClient, factory: Factory, shared: Workspace) -> None:
    other = await factory.workspace(roles=("owner",))
    await assert_401_everywhere(stranger, other.host, f"Bearer {shared.keys['owner']}")
    await assert_401_everywhere(stranger, shared.host, f"Bearer {other.keys['owner']}")
    assert (await stranger.get("/api/v1/dev/me/", headers=other.headers())).status_code == 200


@pytest.mark.parametrize("with_key", [True, False])
async def test_unknown_tenant_subdomain_is_404_tenant_not_found(
        stranger: httpx.AsyncClient, shared: Workspace, with_key: bool) -> None:
    headers = {"Host": f"no-such-tenant-{uuid.uuid4().hex[:8]}.localhost"}
    if with_key:
        headers["Authorization"] = f"Bearer {shared.keys['owner']}"
    for method, path, body in AUTH_DOORS:
        r = await stranger.request(method, path, headers=headers, json=body)
        assert r.status_code == 404, (path, r.text)
        assert r.json()["error"] == "tenant_not_found"
        if path.startswith(("/api/mcp/", "/prism/")):
            assert r.json()["success"] is False


@pytest.mark.parametrize("host", ["localhost", "localhost:8000", "127.0.0.1", "127.0.0.1:8000", "[::1]:8000"])
async def test_key_works_on_the_platform_host(client: httpx.AsyncClient, shared: Workspace, host: str) -> None:
    headers = {"Authorization": f"Bearer {shared.keys['owner']}", "Host": host}
    r = await client.get("/api/v1/dev/me/", headers=headers)
    assert r.status_code == 200, r.text
    assert r.json()["tenant"]["subdomain"] == shared.tenant.subdomain
    r = await client.post(CANONICAL, headers=headers, json=envelope("list", {}))
    assert r.status_code == 200 and r.json()["success"] is True


async def test_tenant_host_with_port_and_lowercase_bearer_scheme_are_accepted(
        client: httpx.AsyncClient, shared: Workspace) -> None:
    for host, scheme in ((f"{shared.host}:8000", "Bearer"), (shared.host.upper(), "bearer"), (shared.host, "BEARER")):
        r = await client.get("/api/v1/dev/me/", headers={"Host": host,
                                                         "Authorization": f"{scheme} {shared.keys['owner']}"})
        assert r.status_code == 200, (host, r.text)


async def test_organization_context_header_is_ignored_for_keys(
        client: httpx.AsyncClient, factory: Factory, shared: Workspace) -> None:
    org2 = await factory.second_org(shared, name=f"Side org {uuid.uuid4().hex[:6]}")
    await factory.add_key(shared, "side", org=org2)
    theirs = await create_part(client, shared, "CTX-THEIRS", label="side")
    mine = await create_part(client, shared, "CTX-MINE")
    other_tenant = await factory.workspace(roles=("owner",))
    for context in (org2.id, other_tenant.org.id, "not-an-org"):
        headers = {**shared.headers(), "X-Organization-Context": context}
        me = (await client.get("/api/v1/dev/me/", headers=headers)).json()
        assert me["organization"]["id"] == public_organization_id(shared.org.id)
        listed = (await crud(client, headers, "list", {"search": "CTX-", "page_size": 100})).json()["data"]
        assert [p["id"] for p in listed["items"]] == [mine["id"]] and listed["total"] == 1
        assert_refused(await crud(client, headers, "read", {"id": theirs["id"]}), 404, "not_found")
        r = await crud(client, headers, "read", {"id": mine["id"]})
        assert r.status_code == 200


# --- identity and catalog ------------------------------------------------------------------------------


def parse_time(value: str) -> datetime:
    parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    assert parsed.tzinfo is not None, value
    return parsed


async def test_me_returns_the_caller_identity_fields(client: httpx.AsyncClient, shared: Workspace,
                                                     db: Database) -> None:
    for label, scopes in (("owner", ["mcp:execute", "mcp:read", "mcp:write"]), ("read_only", ["mcp:read"])):
        r = await client.get("/api/v1/dev/me/", headers=shared.headers(label))
        assert r.status_code == 200, r.text
        me = r.json()
        plaintext = shared.keys[label]
        assert plaintext not in r.text
        assert me["authenticated"] is True
        key = me["key"]
        assert set(key) >= {"prefix", "name", "created_at", "last_used_at", "scopes"}
        assert plaintext.startswith(key["prefix"]) and len(key["prefix"]) < len(plaintext) // 2
        assert key["name"] == "Prism agent key"
        assert key["scopes"] == scopes
        created = parse_time(key["created_at"])
        assert abs((utcnow() - created).total_seconds()) < 600
        assert key["last_used_at"] is None or parse_time(key["last_used_at"]) >= created
        assert uuid.UUID(me["user"]["id"]) and me["user"]["email"] == shared.emails[label]
        assert me["tenant"] == {"id": shared.tenant.id, "name": "Test tenant", "subdomain": shared.tenant.subdomain}
        assert uuid.UUID(me["tenant"]["id"])
        async with db.read() as s:
            stored = (await s.execute(select(ApiKey).where(ApiKey.lookup == key["prefix"]))).scalar_one()
        assert stored.user_id == me["user"]["id"] and stored.key_hash not in r.text


async def test_me_reports_when_the_key_was_last_used(
        client: httpx.AsyncClient, factory: Factory, shared: Workspace) -> None:
    await factory.add_key(shared, "fresh_use")
    r = await crud(client, shared.headers("fresh_use"), "list", {})
    assert r.status_code == 200
    me = (await client.get("/api/v1/dev/me/", headers=shared.headers("fresh_use"))).json()
    assert me["key"]["last_used_at"] is not None
    assert parse_time(me["key"]["last_used_at"]) >= parse_time(me["key"]["created_at"])


async def test_a_keys_use_is_recorded_once_a_second_and_written_by_the_flush(
        db: Database, factory: Factory, shared: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    await factory.add_key(shared, "touched")
    authenticator = Authenticator(db, cache_seconds=60)
    host = classify_host(shared.host, "localhost")
    bearer = shared.headers("touched")["Authorization"]
    first = (await authenticator.authenticate(bearer, host)).usage.last_used_at
    assert first is not None
    again = (await authenticator.authenticate(bearer, host)).usage.last_used_at
    assert again is first  # within the second: not recorded again
    monkeypatch.setattr(authenticator_module, "TOUCH_RESOLUTION_SECONDS", 0.0)
    later = (await authenticator.authenticate(bearer, host)).usage.last_used_at
    assert later is not None and later is not first and later >= first
    await authenticator.flush_touches()
    async with db.read() as s:
        stored = (await s.execute(select(ApiKey.last_used_at).where(
            ApiKey.lookup == lookup_of(bearer.removeprefix("Bearer "))))).scalar_one()
    assert stored == later


async def test_flushes_of_two_processes_over_the_same_keys_neither_deadlock_nor_go_back_in_time(
        db: Database, factory: Factory, shared: Workspace) -> None:
    """Every process flushes the uses its own requests saw. Two flushes over the same keys, their uses noted in
    opposite orders, both commit (on PostgreSQL each updating in its own order deadlocked), and a key keeps its
    latest use whichever flush commits last."""
    labels = [f"flushed_{n}" for n in range(20)]
    for label in labels:
        await factory.add_key(shared, label)
    lookups = [lookup_of(shared.keys[label]) for label in labels]
    async with db.read() as s:
        ids = list((await s.execute(select(ApiKey.id).where(ApiKey.lookup.in_(lookups)))).scalars())
    latest = utcnow().replace(microsecond=0)
    later = {key_id: latest for key_id in reversed(ids)}
    earlier = {key_id: latest - timedelta(seconds=5) for key_id in ids}

    async def flush(used: dict[str, datetime]) -> None:
        async with db.write() as s:
            await touch_keys(s, used)

    await asyncio.gather(*(flush(used) for used in (later, earlier) * 3))
    async with db.read() as s:
        stored = set((await s.execute(select(ApiKey.last_used_at).where(ApiKey.id.in_(ids)))).scalars())
    assert stored == {latest}


async def test_tools_catalog_filters_by_category_and_search(client: httpx.AsyncClient, shared: Workspace) -> None:
    everything = (await client.get("/api/v1/dev/tools/", headers=shared.headers())).json()
    assert everything["count"] == len(everything["tools"]) >= 4
    for tool in everything["tools"]:
        assert {"name", "description", "category", "parameters"} <= set(tool)
        assert tool["name"].startswith("prism_") and isinstance(tool["parameters"], dict)
    names = {t["name"] for t in everything["tools"]}
    assert {"prism_entity_crud", "prism_report_query", "prism_whoami", "prism_introspect"} <= names
    categories = {t["category"] for t in everything["tools"]}
    assert len(categories) >= 2
    total = 0
    for category in categories:
        some = (await client.get("/api/v1/dev/tools/", headers=shared.headers(),
                                 params={"category": category})).json()
        assert some["count"] == len(some["tools"]) >= 1
        assert {t["category"] for t in some["tools"]} == {category}
        total += some["count"]
    assert total == everything["count"]
    for search, expected in (("CRUD", {"prism_entity_crud"}), ("whoami", {"prism_whoami"}),
                             ("prism_", names), ("no-such-tool", set())):
        found = (await client.get("/api/v1/dev/tools", headers=shared.headers(), params={"search": search})).json()
        assert {t["name"] for t in found["tools"]} == expected and found["count"] == len(expected)
    both = (await client.get("/api/v1/dev/tools/", headers=shared.headers(),
                             params={"search": "query", "category": "utility"})).json()
    assert both["tools"] == [] and both["count"] == 0


async def test_read_only_catalog_lists_only_what_the_key_can_call(
        client: httpx.AsyncClient, shared: Workspace, app: Any) -> None:
    registry: Registry = app.state.registry
    full = {t["name"]: t for t in (await client.get("/api/v1/dev/tools/", headers=shared.headers())).json()["tools"]}
    for label in ("read_only", "viewer"):
        tools = {t["name"]: t for t in
                 (await client.get("/api/v1/dev/tools/", headers=shared.headers(label))).json()["tools"]}
        crud_tool = tools["prism_entity_crud"]
        read_operations = set(crud_tool["parameters"]["properties"]["operation"]["enum"])
        assert {"list", "read"} <= read_operations and not read_operations & {"create", "update", "delete"}
        reads = [h for h in registry if h.coordinate.mega_tool == "entity_crud" and h.scope == "read"]
        assert crud_tool["handler_count"] == len(reads) < full["prism_entity_crud"]["handler_count"]
        assert set(full["prism_entity_crud"]["parameters"]["properties"]["operation"]["enum"]) >= {
            "create", "update", "delete"}


class Nothing(Params):
    pass


lab = HandlerApp("lab", description="Handlers only the catalog test uses.")


@lab.handler("document_op", "sample", "create", params=Nothing, scope="write", permission=None,
             description="A write-only mega-tool.")
async def lab_create(call: HandlerCall, _: Nothing) -> dict[str, Any]:
    return {"created": True}


@lab.handler("notification_send", "sample", "send", params=Nothing, scope="execute", permission=None,
             description="An execute-only mega-tool.")
async def lab_send(call: HandlerCall, _: Nothing) -> dict[str, Any]:
    return {"sent": True}


async def test_tools_whose_handlers_all_need_another_scope_are_absent_from_the_catalog(
        settings: Settings, shared: Workspace) -> None:
    async with running_app_with(settings, lab) as application, httpx.AsyncClient(
            transport=httpx.ASGITransport(app=application), base_url="http://localhost") as client:

        async def names(label: str) -> set[str]:
            r = await client.get("/api/v1/dev/tools/", headers=shared.headers(label))
            assert r.status_code == 200, r.text
            return {t["name"] for t in r.json()["tools"]}

        assert {"prism_document_op", "prism_notification_send"} <= await names("owner")
        read_only = await names("read_only")
        assert "prism_document_op" not in read_only and "prism_notification_send" not in read_only
        assert "prism_entity_crud" in read_only
        r = await client.post("/api/mcp/tools/prism_document_op/", headers=shared.headers("read_only"), json={
            "app": "lab", "entity": "sample", "operation": "create", "arguments": {}})
        assert_refused(r, 403, "permission_denied")
        r = await client.post("/prism/document_op/lab/sample/create", headers=shared.headers("owner"), json={})
        assert r.status_code == 200 and r.json()["data"] == {"created": True}


class PausedReads(Database):
    """The same database, whose reads, once `armed`, wait after running until the test lets them finish."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.armed = False
        self.read_done = asyncio.Event()
        self.go_on = asyncio.Event()

    @asynccontextmanager
    async def read(self) -> AsyncIterator[AsyncSession]:
        async with super().read() as session:
            yield session
        if self.armed:
            self.read_done.set()
            await self.go_on.wait()


async def test_a_key_forgotten_while_it_was_being_read_is_not_cached_as_it_was(
        db: Database, factory: Factory, shared: Workspace) -> None:
    """A request that read the key just before its revocation committed, and finished after the revoking process
    forgot it, must not put the unrevoked key back in the cache: the key would work there for another
    `cache_seconds` where the console promises it is refused from the next request on."""
    await factory.add_key(shared, "overtaken")
    bearer = shared.headers("overtaken")["Authorization"]
    lookup = lookup_of(bearer.removeprefix("Bearer "))
    paused = PausedReads(db.url)
    try:
        authenticator = Authenticator(paused, cache_seconds=60)
        host = classify_host(shared.host, "localhost")
        await authenticator.require_tenant_host(host)  # the tenant's host known: the next read is the key's
        paused.armed = True
        before = asyncio.create_task(authenticator.authenticate(bearer, host))
        await paused.read_done.wait()  # read as it was: not revoked
        async with db.write() as session:
            await session.execute(update(ApiKey).where(ApiKey.lookup == lookup).values(revoked_at=utcnow()))
        authenticator.forget_key(lookup)  # the revocation committed, as the console's revoke does
        paused.go_on.set()
        assert (await before).credential_kind == "api_key"  # it began before the revocation: it may pass
        with pytest.raises(CredentialNoLongerValid):
            await authenticator.authenticate(bearer, host)
    finally:
        await paused.dispose()
