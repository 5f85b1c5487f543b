"""AI systems as governance records: read, reclassify, delete (refused while a key is tied), per organization."""

from __future__ import annotations

import httpx

from prism.keys.service import lookup_of
from prism.storage import Database
from tests.factories import Factory
from tests.governance_support import events, governed_key, ok, post

SYSTEM = "config_manage/governance/ai_system/"


async def test_an_ai_system_is_read_reclassified_and_deleted_only_once_no_key_is_tied(
        client: httpx.AsyncClient, factory: Factory, db: Database) -> None:
    ws = await factory.workspace(roles=("owner",))
    made = await governed_key(factory, client, ws, "agent", risk_level="limited")
    system_id = made["ai_system"]["id"]
    read = await ok(client, ws, SYSTEM + "read", {"id": system_id})
    assert (read["name"], read["risk_level"], read["keys_tied"]) == ("agent agent", "limited", 1)

    changed = await ok(client, ws, SYSTEM + "update", {"id": system_id, "risk_level": "high"})
    assert changed["risk_level"] == "high" and changed["name"] == "agent agent"
    await ok(client, ws, "entity_crud/spare_parts/spare_part/list", {}, label="agent")
    [decision] = await events(db, ws.org.id, "governance.decision.allow")
    assert decision["data"]["risk_level"] == "high"  # decisions from then on carry the new level

    in_use = await post(client, ws, SYSTEM + "delete", {"id": system_id})
    assert in_use.status_code == 409 and in_use.json()["error"] == "ai_system_in_use"
    await ok(client, ws, SYSTEM + "attach", {"key": lookup_of(ws.keys["agent"]), "ai_system_id": None})
    assert await ok(client, ws, SYSTEM + "delete", {"id": system_id}) == {"id": system_id, "deleted": True}
    gone = await post(client, ws, SYSTEM + "read", {"id": system_id})
    assert gone.status_code == 404
    # Its past decision stays, with the system's id.
    listed = await ok(client, ws, "audit_query/governance/decision/list", {"ai_system_id": system_id})
    assert listed["total"] == 1


async def test_bad_changes_are_400_and_members_cannot_reclassify(client: httpx.AsyncClient,
                                                                 factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner", "member"))
    system = await ok(client, ws, SYSTEM + "create", {"name": "triage bot", "risk_level": "minimal"})
    bad = await post(client, ws, SYSTEM + "update", {"id": system["id"], "risk_level": "extreme"})
    assert bad.status_code == 400 and "risk_level" in bad.json()["message"]
    refused = await post(client, ws, SYSTEM + "update", {"id": system["id"], "risk_level": "high"}, label="member")
    assert refused.status_code == 403 and refused.json()["error"] == "permission_denied"
    assert (await ok(client, ws, SYSTEM + "read", {"id": system["id"]}, label="member"))["risk_level"] == "minimal"


async def test_another_organizations_ai_system_cannot_be_read_changed_or_deleted(
        client: httpx.AsyncClient, factory: Factory) -> None:
    mine = await factory.workspace(roles=("owner",))
    theirs = await factory.workspace(roles=("owner",))
    system = await ok(client, theirs, SYSTEM + "create", {"name": "their bot", "risk_level": "high"})
    for operation, arguments in (("read", {}), ("update", {"risk_level": "minimal"}), ("delete", {})):
        answer = await post(client, mine, SYSTEM + operation, {"id": system["id"], **arguments})
        assert answer.status_code == 404, (operation, answer.text)
    assert (await ok(client, theirs, SYSTEM + "read", {"id": system["id"]}))["risk_level"] == "high"
    assert (await ok(client, mine, SYSTEM + "list", {}))["total"] == 0


async def test_a_name_beginning_or_ending_with_white_space_is_refused_on_create_and_update(
        client: httpx.AsyncClient, factory: Factory) -> None:
    """As a persona's: refused rather than stripped, since a name kept other than it was sent is not found by it
    (and " bot" beside "bot" would be two systems a person cannot tell apart)."""
    ws = await factory.workspace(roles=("owner",))
    system = await ok(client, ws, SYSTEM + "create", {"name": "triage bot", "risk_level": "minimal"})
    for padded in (" triage bot", "triage bot ", "\ttriage bot", "triage bot\n", "  "):
        for operation, arguments in (("create", {"risk_level": "minimal"}), ("update", {"id": system["id"]})):
            answer = await post(client, ws, SYSTEM + operation, {"name": padded, **arguments})
            assert answer.status_code == 400 and answer.json()["error"] == "invalid_arguments", answer.text
            assert [e["field"] for e in answer.json()["details"]["errors"]] == ["name"], answer.text
    listed = await ok(client, ws, SYSTEM + "list", {})
    assert [s["name"] for s in listed["items"]] == ["triage bot"], listed
    assert (await ok(client, ws, SYSTEM + "update", {"id": system["id"], "name": "triage  bot 2"}))["name"] == \
        "triage  bot 2"  # spaces inside a name are kept
