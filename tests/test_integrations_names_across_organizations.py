"""Another organization's integration does not exist for a caller (docs/integrations.md, "Where imported
integrations live"): managing it answers what managing a name nobody holds answers, and importing under its
name (names are coordinates, so unique across the deployment) is refused exactly as under any other name that
is taken, saying no more than that."""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx
import pytest

from prism.config import Settings
from prism.integrations import service
from prism.storage import Database
from tests.factories import Factory, Workspace
from tests.governance_support import ok, post

pytestmark = pytest.mark.usefixtures("imports_removed_after_the_module")

INTEGRATION = "config_manage/integrations/integration/"
CONNECTION = "config_manage/integrations/connection/"


def document(title: str) -> str:
    return json.dumps({
        "openapi": "3.0.3", "info": {"title": title, "version": "1"},
        "servers": [{"url": "https://warehouse.example.com"}],
        "paths": {"/items": {"get": {"operationId": "listItems", "responses": {"200": {"description": "ok"}}}}}})


def unique(prefix: str) -> str:
    return prefix + uuid.uuid4().hex[:10]


async def answer(client: httpx.AsyncClient, ws: Workspace, path: str, arguments: dict[str, Any]) -> tuple[Any, ...]:
    """Status, error code, message and details, the name the call gave written as NAME: what would tell two
    names apart."""
    response = await post(client, ws, path, arguments)
    body = response.json()
    return response.status_code, *(json.dumps(body.get(k)).replace(arguments["name"], "NAME")
                                    for k in ("error", "message", "details"))


async def test_managing_another_organizations_integration_answers_as_for_a_name_nobody_holds(
        client: httpx.AsyncClient, factory: Factory) -> None:
    owner = await factory.workspace(roles=("owner",))
    other_tenant = await factory.workspace(roles=("owner",))
    same_tenant = await factory.second_org(owner, "Sibling org")
    await factory.add_key(owner, "sibling", org=same_tenant)
    held = unique("held_")
    await ok(client, owner, INTEGRATION + "importOpenapi", {"name": held, "spec": document("Held")})

    management = [(INTEGRATION + "read", {}), (INTEGRATION + "remove", {}), (CONNECTION + "remove", {}),
                  (CONNECTION + "set", {"base_url": "https://warehouse.example.com"})]
    for ws, label in ((other_tenant, "owner"), (owner, "sibling")):
        for path, extra in management:
            asked = await post(client, ws, path, {"name": held, **extra}, label=label)
            nobody = await post(client, ws, path, {"name": unique("none_"), **extra}, label=label)
            assert asked.status_code == nobody.status_code == 404, (path, asked.text)
            assert asked.json()["error"] == nobody.json()["error"] == "not_found"
            assert (asked.json()["message"].replace(held, "NAME")
                    == nobody.json()["message"].replace(nobody.json()["message"].split("'")[1], "NAME"))
    # Still there, still the owner's.
    assert (await ok(client, owner, INTEGRATION + "read", {"name": held}))["owner"] == "organization"


async def test_a_taken_name_is_refused_alike_whoever_holds_it(
        client: httpx.AsyncClient, factory: Factory, db: Database, settings: Settings) -> None:
    """Another organization's private integration, the deployment's (which every organization sees) and an
    installed app: one refusal, which says the name is taken and nothing of who holds it."""
    owner = await factory.workspace(roles=("owner",))
    importer = await factory.workspace(roles=("owner",))
    private, deployments = unique("priv_"), unique("dep_")
    await ok(client, owner, INTEGRATION + "importOpenapi", {"name": private, "spec": document("Private")})
    async with db.write() as session:
        await service.store_openapi(session, settings, deployments, service.compile_openapi(document("Shared")),
                                    source="(inline)", owner_organization_id=None, installed=frozenset())

    refusals = {name: await answer(client, importer, INTEGRATION + "importOpenapi",
                                   {"name": name, "spec": document("Mine")})
                for name in (private, deployments, "core")}
    assert len(set(refusals.values())) == 1, refusals
    status, error, message, _ = refusals[private]
    assert (status, error) == (409, '"conflict"')
    assert "exists" not in message and "yours" not in message, message


async def test_adding_an_mcp_server_under_a_taken_name_is_refused_alike_before_anything_is_read(
        client: httpx.AsyncClient, factory: Factory, monkeypatch: pytest.MonkeyPatch, app: Any) -> None:
    """Refused before the upstream is asked for its tools (nothing answers at 127.0.0.1:9), whoever holds it."""
    monkeypatch.setattr(app.state.settings, "webhook_allow_private_networks", True)
    owner = await factory.workspace(roles=("owner",))
    importer = await factory.workspace(roles=("owner",))
    private = unique("priv_")
    await ok(client, owner, INTEGRATION + "importOpenapi", {"name": private, "spec": document("Private")})
    imported = await answer(client, importer, INTEGRATION + "importOpenapi",
                            {"name": private, "spec": document("Mine")})
    for name in (private, "core"):
        added = await answer(client, importer, INTEGRATION + "addMcp",
                             {"name": name, "url": "https://127.0.0.1:9/mcp"})
        assert added == imported, (name, added)
