"""`prism persona update|delete|attach <ref>` find a persona by id, else by name: a persona may be named like another
one's id and the commands still name one persona each. `none` (any case) is no persona's name: `attach none`
detaches, on every door."""

from __future__ import annotations

import httpx
import pytest

from prism.keys.service import lookup_of
from tests.factories import Factory
from tests.governance_support import ok, post
from tests.processes import TRACEBACK, cli_json, run_cli

PERSONA = "config_manage/governance/persona"


async def test_a_persona_named_like_another_ones_id_leaves_the_id_naming_the_other(
        client: httpx.AsyncClient, factory: Factory, database_url: str) -> None:
    ws = await factory.workspace(roles=("owner",))
    tenant = ws.tenant.subdomain
    strict = await ok(client, ws, f"{PERSONA}/create", {"name": "strict", "deny": ["*/*/*/delete"]})
    namesake = await ok(client, ws, f"{PERSONA}/create", {"name": strict["id"], "default": "allow"})

    updated = cli_json("persona", "update", strict["id"], "--tenant", tenant, "--deny", "*/*/*/create",
                       database_url=database_url)
    assert (updated["id"], updated["deny"], updated["version"]) == (strict["id"], ["*/*/*/create"], 2)
    by_name = cli_json("persona", "update", "strict", "--tenant", tenant, "--default", "allow",
                       database_url=database_url)
    assert (by_name["id"], by_name["version"]) == (strict["id"], 3)
    untouched = await ok(client, ws, f"{PERSONA}/read", {"id": namesake["id"]})
    assert (untouched["version"], untouched["deny"]) == (1, [])

    key = lookup_of(ws.keys["owner"])
    attached = cli_json("persona", "attach", strict["id"], "--key", key, "--tenant", tenant,
                        database_url=database_url)
    assert attached["persona_id"] == strict["id"]
    cli_json("persona", "attach", "none", "--key", key, "--tenant", tenant, database_url=database_url)
    deleted = cli_json("persona", "delete", strict["id"], "--tenant", tenant, database_url=database_url)
    assert deleted["id"] == strict["id"]
    left = {p["id"] for p in (await ok(client, ws, f"{PERSONA}/list", {}))["items"]}
    assert left == {namesake["id"]}


async def test_a_persona_of_another_tenant_is_not_found_by_its_id(
        client: httpx.AsyncClient, factory: Factory, database_url: str) -> None:
    ws, other = await factory.workspace(roles=("owner",)), await factory.workspace(roles=("owner",))
    theirs = await ok(client, other, f"{PERSONA}/create", {"name": "theirs"})
    await ok(client, ws, f"{PERSONA}/create", {"name": "mine"})
    for command in (("update", "--deny", "*/*/*/create"), ("delete",)):
        done = run_cli("persona", command[0], theirs["id"], *command[1:], "--tenant", ws.tenant.subdomain, "--json",
                       database_url=database_url)
        assert done.returncode == 1 and TRACEBACK not in done.stderr, str(done)
        assert done.error["error"] == "not_found", str(done)
    kept = await ok(client, other, f"{PERSONA}/read", {"id": theirs["id"]})
    assert (kept["version"], kept["deny"]) == (1, [])


@pytest.mark.parametrize("name", ["none", "None", "NONE"])
async def test_none_is_no_personas_name(client: httpx.AsyncClient, factory: Factory, database_url: str,
                                        name: str) -> None:
    ws = await factory.workspace(roles=("owner",))
    created = await post(client, ws, f"{PERSONA}/create", {"name": name})
    assert created.status_code == 400 and created.json()["error"] == "invalid_arguments", created.text
    assert "reserved" in created.json()["message"]
    made = await ok(client, ws, f"{PERSONA}/create", {"name": "none-shall-pass"})  # only the word itself is
    renamed = await post(client, ws, f"{PERSONA}/update", {"id": made["id"], "name": name})
    assert renamed.status_code == 400 and renamed.json()["error"] == "invalid_arguments", renamed.text
    assert (await ok(client, ws, f"{PERSONA}/read", {"id": made["id"]}))["name"] == "none-shall-pass"

    done = run_cli("persona", "create", name, "--tenant", ws.tenant.subdomain, "--json", database_url=database_url)
    assert done.returncode == 1 and done.error["error"] == "invalid_arguments", str(done)
    assert [p["name"] for p in (await ok(client, ws, f"{PERSONA}/list", {}))["items"]] == ["none-shall-pass"]


async def test_attach_none_detaches(client: httpx.AsyncClient, factory: Factory, database_url: str) -> None:
    ws = await factory.workspace(roles=("owner",))
    tenant, key = ws.tenant.subdomain, lookup_of(ws.keys["owner"])
    cli_json("persona", "create", "strict", "--tenant", tenant, "--default", "deny", database_url=database_url)
    assert cli_json("persona", "attach", "strict", "--key", key, "--tenant", tenant,
                    database_url=database_url)["persona_id"] is not None
    assert cli_json("persona", "attach", "none", "--key", key, "--tenant", tenant,
                    database_url=database_url)["persona_id"] is None
