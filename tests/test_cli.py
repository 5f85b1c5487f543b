"""The `prism` command line, run as a real process against a real database (SQLite file or PostgreSQL)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from prism.app import create_app
from prism.config import Settings
from prism.identity.service import create_user
from prism.kit.ids import public_organization_id
from prism.storage import Database
from tests.factories import Factory, Workspace, password_hash, unique
from tests.oauth_support import sign_in
from tests.processes import TRACEBACK, CliResult, cli_json, free_port, query, run_cli, scratch_database

PASSWORD = "correct horse battery staple"


@pytest.fixture(scope="module")
def cli_db(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One migrated database for the whole module; every test makes its own tenants."""
    with scratch_database(tmp_path_factory.mktemp("cli"), "cli") as url:
        cli_json("migrate", database_url=url)
        yield url


@pytest.fixture
def fresh_db(tmp_path: Path) -> Iterator[str]:
    with scratch_database(tmp_path, "fresh") as url:
        yield url


@pytest.fixture(scope="module")
async def cli_factory(cli_db: str) -> AsyncIterator[Factory]:
    """Data the command under test needs is built in-process through the services: each CLI start costs
    most of a second, so only the command being tested runs as a process."""
    db = Database(cli_db)
    try:
        yield Factory(db)
    finally:
        await db.dispose()


async def lone_user(factory: Factory) -> str:
    """A user who belongs to no organization."""
    email = f"{unique('loner')}@example.com"
    async with factory.db.write() as s:
        await create_user(s, email, password_hash())
    return email


def error_json(result: CliResult) -> dict[str, Any]:
    body: dict[str, Any] = result.error
    return body


def assert_clean_failure(result: CliResult, code: str) -> None:
    """Exit 1, one JSON {error, message} line on stderr, and no traceback anywhere."""
    assert result.returncode == 1, str(result)
    assert TRACEBACK not in result.stdout + result.stderr, str(result)
    body = error_json(result)
    assert set(body) == {"error", "message"}, body
    assert body["error"] == code, body
    assert isinstance(body["message"], str) and body["message"], body


def test_migrate_builds_the_schema_on_an_empty_database_and_can_run_again(fresh_db: str) -> None:
    assert cli_json("migrate", database_url=fresh_db) == {"migrated": True, "sealed": 0}
    versions = query(fresh_db, "SELECT version_num FROM alembic_version")
    assert len(versions) == 1 and versions[0]["version_num"]
    for table in ("tenants", "organizations", "users", "memberships", "roles", "api_keys", "audit_entries",
                  "audit_heads"):
        assert query(fresh_db, f"SELECT COUNT(*) AS n FROM {table}") == [{"n": 0}]  # noqa: S608
    assert cli_json("migrate", database_url=fresh_db) == {"migrated": True, "sealed": 0}
    assert query(fresh_db, "SELECT version_num FROM alembic_version") == versions


def test_tenant_create_makes_the_tenant_its_first_organization_and_owner(cli_db: str) -> None:
    sub, email = unique("acme"), f"{unique('owner')}@example.com"
    out = cli_json("tenant", "create", sub, "--name", "Acme Corp", "--admin-email", email,
                   "--admin-password", PASSWORD, database_url=cli_db)
    assert out["tenant"]["subdomain"] == sub and out["tenant"]["name"] == "Acme Corp"
    assert out["organization"]["name"] == "Acme Corp" and out["organization"]["slug"] == "acme-corp"
    assert out["admin"]["email"] == email and out["admin"]["role"] == "owner"
    rows = query(cli_db, "SELECT r.name AS role, o.id AS org FROM memberships m "
                 "JOIN roles r ON r.id = m.role_id JOIN organizations o ON o.id = m.organization_id "
                 "WHERE m.user_id = :uid", uid=out["admin"]["id"])
    assert [{**r, "org": public_organization_id(r["org"])} for r in rows] == [
        {"role": "owner", "org": out["organization"]["id"]}]
    listed = cli_json("org", "list", "--tenant", sub, database_url=cli_db)
    assert listed == {"organizations": [out["organization"]]}
    tenants = cli_json("tenant", "list", database_url=cli_db)["tenants"]
    assert {"id": out["tenant"]["id"], "subdomain": sub, "name": "Acme Corp"}.items() <= next(
        t for t in tenants if t["subdomain"] == sub).items()
    assert [t["subdomain"] for t in tenants] == sorted(t["subdomain"] for t in tenants)
    assert f"{sub}\tAcme Corp\n" in run_cli("tenant", "list", database_url=cli_db).stdout


async def test_org_create_and_list(cli_db: str, cli_factory: Factory) -> None:
    ws = await cli_factory.workspace(roles=("owner",))
    sub = ws.tenant.subdomain
    field = cli_json("org", "create", "Field Service", "--tenant", sub, database_url=cli_db)
    assert field["slug"] == "field-service" and field["name"] == "Field Service" and field["tenant"] == sub
    custom = cli_json("org", "create", "Back Office", "--tenant", sub, "--slug", "bo", database_url=cli_db)
    assert custom["slug"] == "bo" and custom["name"] == "Back Office"
    listed = cli_json("org", "list", "--tenant", sub, database_url=cli_db)["organizations"]
    assert sorted(listed, key=lambda o: o["slug"]) == [
        {"id": custom["id"], "slug": "bo", "name": "Back Office"},
        {"id": field["id"], "slug": "field-service", "name": "Field Service"},
        {"id": public_organization_id(ws.org.id), "slug": ws.org.slug, "name": ws.org.name}]
    # Another tenant's list does not show them.
    other = await cli_factory.workspace(roles=("owner",))
    assert cli_json("org", "list", "--tenant", other.tenant.subdomain, database_url=cli_db) == {
        "organizations": [{"id": public_organization_id(other.org.id), "slug": other.org.slug, "name": other.org.name}]}


async def test_user_create_and_add_to_org_as_viewer_then_change_role(cli_db: str, cli_factory: Factory) -> None:
    ws = await cli_factory.workspace(roles=("owner",))
    sub = ws.tenant.subdomain
    email = f"{unique('Viewer')}@Example.com"
    user = cli_json("user", "create", email, "--password", PASSWORD, database_url=cli_db)
    assert user["email"] == email.lower() and user["id"]
    stored = query(cli_db, "SELECT email, password_hash FROM users WHERE id = :id", id=user["id"])
    assert stored[0]["email"] == email.lower() and PASSWORD not in stored[0]["password_hash"]
    out = cli_json("user", "add-to-org", email, "--tenant", sub, "--org", ws.org.slug, "--role", "viewer",
                   database_url=cli_db)
    assert out == {"user": email.lower(), "organization": ws.org.slug, "role": "viewer", "tenant": sub}

    def roles() -> list[dict[str, Any]]:
        return query(cli_db, "SELECT r.name AS role FROM memberships m JOIN roles r ON r.id = m.role_id "
                     "WHERE m.user_id = :uid AND m.organization_id = :org", uid=user["id"], org=ws.org.id)

    assert roles() == [{"role": "viewer"}]
    # By organization id as well as slug; a second add changes the role instead of duplicating.
    cli_json("user", "add-to-org", email, "--tenant", sub, "--org", ws.org.id, "--role", "admin", database_url=cli_db)
    assert roles() == [{"role": "admin"}]

    second = await cli_factory.second_org(ws)
    cli_json("user", "add-to-org", email, "--tenant", sub, "--org", second.slug, "--role", "member",
             database_url=cli_db)
    members = cli_json("user", "list", "--tenant", sub, database_url=cli_db)["members"]
    main, later = public_organization_id(ws.org.id), public_organization_id(second.id)  # by organization, then email
    assert [(m["email"], m["organization"], m["role"]) for m in members] == [
        *sorted([(ws.emails["owner"], main, "owner"), (email.lower(), main, "admin")]),
        (email.lower(), later, "member")]
    assert [(m["email"], m["role"]) for m in cli_json("user", "list", "--tenant", sub, "--org", second.slug,
                                                      database_url=cli_db)["members"]] == [(email.lower(), "member")]
    assert f"{email.lower()}\t{second.slug}\tmember" in run_cli("user", "list", "--tenant", sub,
                                                                database_url=cli_db).stdout
    # Another tenant's members are its own.
    other = await cli_factory.workspace(roles=("owner",))
    assert [m["email"] for m in cli_json("user", "list", "--tenant", other.tenant.subdomain,
                                         database_url=cli_db)["members"]] == [other.emails["owner"]]


@pytest.mark.parametrize("prefix", ["ck", "mcp"])
async def test_key_create_prints_the_key_once_and_stores_only_its_hash(cli_db: str, cli_factory: Factory,
                                                                       prefix: str) -> None:
    ws = await cli_factory.workspace(roles=("owner", "viewer"))
    before = datetime.now(UTC)
    out = cli_json("key", "create", "--tenant", ws.tenant.subdomain, "--email", ws.emails["viewer"],
                   "--org", ws.org.slug, "--scopes", "mcp:read", "--name", "Reporting agent", "--expires-days", "7",
                   "--prefix", prefix, database_url=cli_db)
    after = datetime.now(UTC)
    plaintext = out["api_key"]
    assert plaintext.startswith(f"{prefix}_") and len(plaintext) > len(prefix) + 30
    assert out["key_prefix"].startswith(f"{prefix}_") and plaintext.startswith(out["key_prefix"])
    assert len(out["key_prefix"]) < len(plaintext)
    assert out["scopes"] == ["mcp:read"]
    assert out["name"] == "Reporting agent"
    assert out["organization"] == public_organization_id(ws.org.id) and out["organization_name"] == ws.org.name
    expires = datetime.fromisoformat(out["expires_at"].replace("Z", "+00:00"))
    assert before + timedelta(days=7) - timedelta(seconds=5) <= expires <= after + timedelta(days=7)

    rows = query(cli_db, "SELECT * FROM api_keys WHERE id = :id", id=out["key_id"])
    assert len(rows) == 1
    secret = plaintext.partition("_")[2]
    for column, value in rows[0].items():
        assert plaintext not in str(value), f"plaintext key stored in api_keys.{column}"
        assert secret not in str(value), f"key secret stored in api_keys.{column}"
    assert rows[0]["scopes"] == "mcp:read"


async def test_key_create_defaults_to_the_users_first_organization_and_all_scopes(cli_db: str,
                                                                                  cli_factory: Factory) -> None:
    ws = await cli_factory.workspace(roles=("owner",))
    out = cli_json("key", "create", "--tenant", ws.tenant.subdomain, "--email", ws.emails["owner"],
                   database_url=cli_db)
    assert out["organization"] == public_organization_id(ws.org.id)
    assert sorted(out["scopes"]) == ["mcp:execute", "mcp:read", "mcp:write"]
    assert out["expires_at"] is None and out["tool_surface"] is None  # the deployment's MCP tool surface
    assert out["api_key"].startswith("mcp_") and out["api_key"].startswith(out["key_prefix"])
    split = cli_json("key", "create", "--tenant", ws.tenant.subdomain, "--email", ws.emails["owner"],
                     "--tool-surface", "split", database_url=cli_db)
    assert split["tool_surface"] == "split"
    rows = query(cli_db, "SELECT tool_surface FROM api_keys WHERE lookup IN (:a, :b) ORDER BY tool_surface",
                 a=out["key_prefix"], b=split["key_prefix"])
    assert {r["tool_surface"] for r in rows} == {None, "split"}


@pytest.fixture
async def app_on(cli_db: str) -> AsyncIterator[httpx.AsyncClient]:
    """The real app on the CLI's database, to check that keys work (and stop working)."""
    application = create_app(Settings(database_url=cli_db, credential_cache_seconds=0, seed_demo=False,
                                      key_touch_interval_seconds=3600))
    async with application.router.lifespan_context(application):
        transport = httpx.ASGITransport(app=application)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
            yield client


async def test_key_created_by_the_cli_authenticates_with_its_scopes(cli_db: str, cli_factory: Factory,
                                                                    app_on: httpx.AsyncClient) -> None:
    ws = await cli_factory.workspace(roles=("owner",))
    out = cli_json("key", "create", "--tenant", ws.tenant.subdomain, "--email", ws.emails["owner"], "--scopes",
                   "mcp:read", "--prefix", "ck", database_url=cli_db)
    headers = {"Authorization": f"Bearer {out['api_key']}"}
    me = await app_on.get("/api/v1/dev/me/", headers=headers)
    assert me.status_code == 200, me.text
    assert me.json()["key"]["prefix"] == out["key_prefix"] and me.json()["key"]["scopes"] == ["mcp:read"]
    assert me.json()["tenant"]["subdomain"] == ws.tenant.subdomain
    envelope = {"app": "spare_parts", "entity": "spare_part", "arguments": {}}
    r = await app_on.post("/api/mcp/tools/prism_entity_crud/", headers=headers, json={**envelope, "operation": "list"})
    assert r.status_code == 200 and r.json()["success"] is True, r.text
    r = await app_on.post("/api/mcp/tools/prism_entity_crud/", headers=headers, json={
        **envelope, "operation": "create", "arguments": {"sku": "S-1", "name": "Seal"}})
    assert r.status_code == 403 and r.json()["error"] == "permission_denied", r.text


async def test_key_revoke_by_id_or_prefix_stops_the_key(cli_db: str, cli_factory: Factory,
                                                        app_on: httpx.AsyncClient) -> None:
    ws = await cli_factory.workspace(roles=("owner",))
    sub = ws.tenant.subdomain
    keys = {label: await cli_factory.add_key(ws, label) for label in ("by_id", "by_prefix", "kept")}
    rows = {label: query(cli_db, "SELECT id, lookup FROM api_keys WHERE user_id = "
                         "(SELECT id FROM users WHERE email = :e)", e=ws.emails[label])[0] for label in keys}
    for plaintext in keys.values():
        r = await app_on.get("/api/v1/dev/me/", headers={"Authorization": f"Bearer {plaintext}"})
        assert r.status_code == 200, r.text

    by_id = cli_json("key", "revoke", rows["by_id"]["id"], "--tenant", sub, database_url=cli_db)
    assert by_id["key_id"] == rows["by_id"]["id"] and by_id["revoked_at"]
    by_prefix = cli_json("key", "revoke", rows["by_prefix"]["lookup"], "--tenant", sub, database_url=cli_db)
    assert by_prefix["key_id"] == rows["by_prefix"]["id"] and by_prefix["key_prefix"] == rows["by_prefix"]["lookup"]
    assert keys["by_prefix"].startswith(by_prefix["key_prefix"])
    for label in ("by_id", "by_prefix"):
        r = await app_on.get("/api/v1/dev/me/", headers={"Authorization": f"Bearer {keys[label]}"})
        assert r.status_code == 401, r.text
        assert query(cli_db, "SELECT revoked_at FROM api_keys WHERE id = :id", id=rows[label]["id"])[0]["revoked_at"]

    # Another tenant cannot revoke (or even see) this tenant's keys.
    other = await cli_factory.workspace(roles=("owner",))
    result = run_cli("key", "revoke", rows["kept"]["id"], "--tenant", other.tenant.subdomain, "--json",
                     database_url=cli_db)
    assert_clean_failure(result, "key_not_found")
    r = await app_on.get("/api/v1/dev/me/", headers={"Authorization": f"Bearer {keys['kept']}"})
    assert r.status_code == 200, r.text


async def test_key_list_shows_each_key_with_its_holder_and_status_never_a_secret(cli_db: str,
                                                                                 cli_factory: Factory) -> None:
    ws = await cli_factory.workspace(roles=("owner",))
    sub = ws.tenant.subdomain
    second = await cli_factory.second_org(ws)
    keys = {"main": await cli_factory.add_key(ws, "main"), "elsewhere": await cli_factory.add_key(ws, "away",
                                                                                                 org=second),
            "revoked": await cli_factory.add_key(ws, "gone")}
    prefixes = {label: plaintext[:len("ck_") + 12] for label, plaintext in keys.items()}
    cli_json("key", "revoke", prefixes["revoked"], "--tenant", sub, database_url=cli_db)
    other = await cli_factory.workspace(roles=("owner",))  # another tenant's keys are never listed

    listed = cli_json("key", "list", "--tenant", sub, database_url=cli_db)["keys"]
    by_prefix = {k["prefix"]: k for k in listed}
    assert set(by_prefix) == {*prefixes.values(), ws.keys["owner"][:len("ck_") + 12]}
    assert lookup_in(other, by_prefix) == []
    assert by_prefix[prefixes["revoked"]]["status"] == "revoked" and by_prefix[prefixes["revoked"]]["revoked_at"]
    assert by_prefix[prefixes["main"]]["status"] == "active"
    assert by_prefix[prefixes["elsewhere"]]["organization"] == public_organization_id(second.id)
    assert by_prefix[prefixes["elsewhere"]]["organization_slug"] == second.slug
    assert by_prefix[prefixes["main"]]["user"] == ws.emails["main"]
    assert [k["created_at"] for k in listed] == sorted((k["created_at"] for k in listed), reverse=True)
    text = run_cli("key", "list", "--tenant", sub, database_url=cli_db).stdout
    for plaintext in keys.values():
        assert plaintext not in text and plaintext[len("ck_") + 12:] not in str(listed)
    for prefix in prefixes.values():
        assert prefix in text

    assert [k["prefix"] for k in cli_json("key", "list", "--tenant", sub, "--org", second.slug,
                                          database_url=cli_db)["keys"]] == [prefixes["elsewhere"]]
    assert [k["prefix"] for k in cli_json("key", "list", "--tenant", sub, "--email", ws.emails["gone"],
                                          database_url=cli_db)["keys"]] == [prefixes["revoked"]]
    active = cli_json("key", "list", "--tenant", sub, "--active", database_url=cli_db)["keys"]
    assert prefixes["revoked"] not in {k["prefix"] for k in active} and len(active) == 3
    # Another tenant's organization is not found, and a user without keys here has none listed.
    foreign_org = public_organization_id(other.org.id)
    assert_clean_failure(run_cli("key", "list", "--tenant", sub, "--org", foreign_org, "--json", database_url=cli_db),
                         "organization_not_found")
    assert cli_json("key", "list", "--tenant", sub, "--email", other.emails["owner"],
                    database_url=cli_db)["keys"] == []
    assert run_cli("key", "list", "--tenant", sub, "--email", other.emails["owner"],
                   database_url=cli_db).stdout == "no keys\n"

    # A deactivated holder's key authenticates nobody: listed suspended, and not among the active ones.
    cli_json("user", "deactivate", ws.emails["main"], database_url=cli_db)
    listed = {k["prefix"]: k for k in cli_json("key", "list", "--tenant", sub, database_url=cli_db)["keys"]}
    assert listed[prefixes["main"]]["status"] == "suspended"
    active = cli_json("key", "list", "--tenant", sub, "--active", database_url=cli_db)["keys"]
    assert prefixes["main"] not in {k["prefix"] for k in active} and len(active) == 2


def lookup_in(ws: Workspace, listed: dict[str, Any]) -> list[str]:
    return [prefix for prefix in listed if ws.keys["owner"].startswith(prefix)]


async def test_a_member_removed_from_an_organization_loses_its_keys_there_and_the_last_owner_stays(
        cli_db: str, cli_factory: Factory, app_on: httpx.AsyncClient) -> None:
    ws = await cli_factory.workspace(roles=("owner",))
    sub, owner = ws.tenant.subdomain, ws.emails["owner"]
    leaving = await cli_factory.add_key(ws, "leaving", role="member")
    second = await cli_factory.second_org(ws)
    kept = await cli_factory.add_key(ws, "elsewhere", org=second)
    cli_json("user", "add-to-org", ws.emails["elsewhere"], "--tenant", sub, "--org", ws.org.slug, "--role", "member",
             database_url=cli_db)

    def me(key: str) -> Any:
        return app_on.get("/api/v1/dev/me/", headers={"Authorization": f"Bearer {key}"})

    assert (await me(leaving)).status_code == 200
    out = cli_json("user", "remove-from-org", ws.emails["leaving"], "--tenant", sub, "--org", ws.org.slug,
                   database_url=cli_db)
    assert out == {"user": ws.emails["leaving"], "organization": ws.org.slug, "removed_role": "member",
                   "tenant": sub}
    refused = await me(leaving)
    assert refused.status_code == 401 and refused.json()["error"] == "invalid_token", refused.text
    # A membership elsewhere is untouched: the same user's key for the second organization still works.
    cli_json("user", "remove-from-org", ws.emails["elsewhere"], "--tenant", sub, "--org", ws.org.slug,
             database_url=cli_db)
    assert (await me(kept)).status_code == 200
    assert_clean_failure(run_cli("user", "remove-from-org", ws.emails["leaving"], "--tenant", sub, "--org",
                                 ws.org.slug, "--json", database_url=cli_db), "not_a_member")
    # The last owner cannot leave: nobody could manage the organization again.
    assert_clean_failure(run_cli("user", "remove-from-org", owner, "--tenant", sub, "--org", ws.org.slug, "--json",
                                 database_url=cli_db), "last_owner")
    # Nor can they be made anything else first (then removed): the same rule.
    assert_clean_failure(run_cli("user", "add-to-org", owner, "--tenant", sub, "--org", ws.org.slug, "--role",
                                 "viewer", "--json", database_url=cli_db), "last_owner")
    assert run_cli("user", "add-to-org", owner, "--tenant", sub, "--org", ws.org.slug, "--role", "owner", "--json",
                   database_url=cli_db).returncode == 0  # staying owner changes nothing
    assert (await me(ws.keys["owner"])).status_code == 200
    # Another tenant cannot name this tenant's organization.
    other = await cli_factory.workspace(roles=("owner",))
    foreign_org = public_organization_id(ws.org.id)
    assert_clean_failure(run_cli("user", "remove-from-org", owner, "--tenant", other.tenant.subdomain, "--org",
                                 foreign_org, "--json", database_url=cli_db), "organization_not_found")


async def test_a_deactivated_user_is_refused_everywhere_until_activated(cli_db: str, cli_factory: Factory,
                                                                       app_on: httpx.AsyncClient) -> None:
    ws = await cli_factory.workspace(roles=("owner",))
    key = await cli_factory.add_key(ws, "gone")
    email = ws.emails["gone"]

    def me() -> Any:
        return app_on.get("/api/v1/dev/me/", headers={"Authorization": f"Bearer {key}"})

    assert (await me()).status_code == 200
    assert cli_json("user", "deactivate", email, database_url=cli_db) == {"user": email, "active": False}
    refused = await me()
    assert refused.status_code == 401 and refused.json()["error"] == "invalid_token", refused.text
    assert query(cli_db, "SELECT sessions_ended_at FROM users WHERE email = :e", e=email)[0]["sessions_ended_at"]
    assert (await sign_in(app_on, email)).status_code == 401
    # The owner of the same organization is not touched.
    assert (await app_on.get("/api/v1/dev/me/", headers={"Authorization": f"Bearer {ws.keys['owner']}"})
            ).status_code == 200
    assert cli_json("user", "activate", email, database_url=cli_db) == {"user": email, "active": True}
    assert (await me()).status_code == 200
    assert (await sign_in(app_on, email)).status_code == 303
    assert_clean_failure(run_cli("user", "deactivate", "nobody-at-all@example.com", "--json", database_url=cli_db),
                         "user_not_found")


@pytest.fixture(scope="module")
async def world(cli_factory: Factory) -> dict[str, str]:
    """Two tenants; the first has a second organization its owner is not in, plus a user in no organization."""
    ws: Workspace = await cli_factory.workspace(roles=("owner",))
    second = await cli_factory.second_org(ws, name="Second")
    other = await cli_factory.workspace(roles=("owner",))
    return {"sub": ws.tenant.subdomain, "org": ws.org.slug, "org_id": ws.org.id, "second": second.slug,
            "admin": ws.emails["owner"], "loner": await lone_user(cli_factory), "other_sub": other.tenant.subdomain}


BAD_INPUTS: dict[str, tuple[str, list[str]]] = {
    "duplicate tenant": ("tenant_exists", ["tenant", "create", "{sub}", "--name", "N", "--admin-email",
                                           "{new_email}", "--admin-password", PASSWORD]),
    "invalid subdomain": ("invalid_subdomain", ["tenant", "create", "Bad_Sub!", "--name", "N", "--admin-email",
                                                "{new_email}", "--admin-password", PASSWORD]),
    "short admin password": ("weak_password", ["tenant", "create", "{new_sub}", "--name", "N", "--admin-email",
                                               "{new_email}", "--admin-password", "short"]),
    "short user password": ("weak_password", ["user", "create", "{new_email}", "--password", "1234567"]),
    "unknown tenant (org list)": ("tenant_not_found", ["org", "list", "--tenant", "{new_sub}"]),
    "organization of another tenant": ("organization_not_found", ["user", "add-to-org", "{admin}", "--tenant",
                                                                  "{other_sub}", "--org", "{org_id}"]),
    "unknown user (key create)": ("user_not_found", ["key", "create", "--tenant", "{sub}", "--email", "{new_email}"]),
    "unknown role": ("role_not_found", ["user", "add-to-org", "{loner}", "--tenant", "{sub}", "--org", "{org}",
                                        "--role", "emperor"]),
    "bad scopes": ("invalid_scope", ["key", "create", "--tenant", "{sub}", "--email", "{admin}", "--scopes",
                                     "mcp:read mcp:everything"]),
    "bad prefix": ("invalid_prefix", ["key", "create", "--tenant", "{sub}", "--email", "{admin}", "--prefix", "sk"]),
    "unknown tool surface": ("invalid_tool_surface", ["key", "create", "--tenant", "{sub}", "--email", "{admin}",
                                                      "--tool-surface", "tiny"]),
    "expiry of zero days": ("invalid_expiry", ["key", "create", "--tenant", "{sub}", "--email", "{admin}",
                                               "--expires-days", "0"]),
    "non-member, no --org": ("not_a_member", ["key", "create", "--tenant", "{sub}", "--email", "{loner}"]),
    "non-member of the named org": ("not_a_member", ["key", "create", "--tenant", "{sub}", "--email", "{admin}",
                                                     "--org", "{second}"]),
    "unknown key": ("key_not_found", ["key", "revoke", "mcp_doesnotexist", "--tenant", "{sub}"]),
}


@pytest.fixture(scope="module")
def refusals(cli_db: str, world: dict[str, str]) -> dict[str, tuple[list[str], dict[str, str], CliResult]]:
    """Every bad input of BAD_INPUTS, run at once (they are independent; each process start is slow)."""

    def run(case: str) -> tuple[list[str], dict[str, str], CliResult]:
        values = {**world, "new_sub": unique("nobody"), "new_email": f"{unique('nobody')}@example.com"}
        args = [a.format(**values) for a in BAD_INPUTS[case][1]]
        return args, values, run_cli(*args, "--json", database_url=cli_db)

    with ThreadPoolExecutor(max_workers=4) as pool:
        return dict(zip(BAD_INPUTS, pool.map(run, BAD_INPUTS), strict=True))


@pytest.mark.parametrize("case", list(BAD_INPUTS))
def test_bad_input_exits_1_with_a_json_error_and_no_traceback(
        cli_db: str, refusals: dict[str, tuple[list[str], dict[str, str], CliResult]], case: str) -> None:
    args, values, result = refusals[case]
    assert_clean_failure(result, BAD_INPUTS[case][0])
    if args[:2] == ["tenant", "create"]:
        # Nothing of a refused tenant is left behind: the command is one transaction.
        rows = query(cli_db, "SELECT COUNT(*) AS n FROM tenants WHERE subdomain = :s", s=args[2].lower())
        assert rows == [{"n": 1 if case == "duplicate tenant" else 0}]
        assert query(cli_db, "SELECT id FROM users WHERE email = :e", e=values["new_email"]) == []


def test_bad_input_without_json_prints_one_error_line_on_stderr(cli_db: str) -> None:
    result = run_cli("org", "list", "--tenant", unique("nobody"), database_url=cli_db)
    assert result.returncode == 1, str(result)
    assert result.stdout == ""
    assert TRACEBACK not in result.stderr
    assert result.stderr.startswith("error: ") and "tenant_not_found" in result.stderr, str(result)


def test_a_command_on_a_database_that_was_never_migrated_fails_cleanly(fresh_db: str) -> None:
    result = run_cli("org", "list", "--tenant", "acme", "--json", database_url=fresh_db)
    assert result.returncode == 1, str(result)
    assert TRACEBACK not in result.stdout + result.stderr, str(result)
    body = error_json(result)
    assert set(body) == {"error", "message"} and "migrate" in body["message"], str(result)


def test_a_command_on_an_unreachable_database_server_fails_cleanly() -> None:
    closed = free_port()  # nothing listens there
    result = run_cli("org", "list", "--tenant", "acme", "--json",
                     database_url=f"postgresql://postgres@127.0.0.1:{closed}/prism")
    assert result.returncode == 1, str(result)
    assert TRACEBACK not in result.stdout + result.stderr, str(result)
    assert set(error_json(result)) == {"error", "message"}, str(result)
