"""Every ledger entry of a governed call names its AI system, persona and mission, whatever its outcome: a call
refused before governance was consulted (permission, unknown operation, arguments) or by the persona is found by
the ledger's `ai_system_id` and `persona_id` filters like the calls that ran."""

from __future__ import annotations

import httpx

from tests.factories import Factory
from tests.governance_support import governed_key, ok, post

PARTS = "entity_crud/spare_parts/spare_part/"
LEDGER = "audit_query/ledger/entry/list"


async def test_every_outcome_of_an_ai_systems_key_is_found_by_its_ai_system(client: httpx.AsyncClient,
                                                                            factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    made = await governed_key(factory, client, ws, "agent", persona={"name": "p", "default": "allow"},
                              risk_level="high", role="viewer")
    system_id, persona_id = made["ai_system"]["id"], made["persona"]["id"]
    calls = [(PARTS + "create", {"name": "x"}, 403), ("entity_crud/spare_parts/nope/list", {}, 404),
             (PARTS + "list", {"page": 0}, 400), (PARTS + "list", {}, 200)]
    for path, arguments, status in calls:
        answer = await post(client, ws, path, arguments, label="agent")
        assert answer.status_code == status, (path, answer.text)
    listed = await ok(client, ws, LEDGER, {"ai_system_id": system_id, "page_size": 50})
    assert sorted((i["outcome"], i["error_code"]) for i in listed["items"]) == [
        ("allowed", None), ("refused", "invalid_arguments"), ("refused", "operation_not_found"),
        ("refused", "permission_denied")]
    by_persona = await ok(client, ws, LEDGER, {"persona_id": persona_id, "page_size": 50})
    assert by_persona["total"] == 4
    for item in listed["items"]:
        assert item["detail"]["ai_system_id"] == system_id and item["detail"]["persona"]["id"] == persona_id
    # Another organization's ledger does not list them, even by the same AI system's id.
    other = await factory.workspace(roles=("owner",))
    assert (await ok(client, other, LEDGER, {"ai_system_id": system_id}))["total"] == 0


async def test_a_call_the_persona_denies_under_a_mission_names_its_mission(client: httpx.AsyncClient,
                                                                           factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    made = await governed_key(factory, client, ws, "agent",
                              persona={"name": "p", "default": "allow", "deny": [PARTS + "list"]})
    mission = await ok(client, ws, "mission_control/missions/mission/create", {"name": "m", "budget_ceiling": 5})
    await ok(client, ws, "mission_control/missions/mission/start", {"id": mission["id"]})
    denied = await post(client, ws, PARTS + "list", {}, label="agent", headers={"X-Prism-Mission": mission["id"]})
    assert denied.status_code == 403 and denied.json()["error"] == "blocked"
    [entry] = (await ok(client, ws, LEDGER, {"coordinate": PARTS + "list"}))["items"]
    assert entry["error_code"] == "blocked"
    assert entry["detail"]["mission_id"] == mission["id"]
    assert entry["detail"]["persona"]["id"] == made["persona"]["id"]
    assert entry["detail"]["persona"]["rule"] == "deny"  # what the persona evaluated stays


async def test_a_call_refused_before_its_mission_was_charged_names_the_mission(client: httpx.AsyncClient,
                                                                               factory: Factory) -> None:
    """An ungoverned key under a mission: refused for permission, before the mission was charged."""
    ws = await factory.workspace(roles=("owner", "viewer"))
    mission = await ok(client, ws, "mission_control/missions/mission/create", {"name": "m", "budget_ceiling": 5})
    await ok(client, ws, "mission_control/missions/mission/start", {"id": mission["id"]})
    refused = await post(client, ws, PARTS + "create", {"name": "x"}, label="viewer",
                         headers={"X-Prism-Mission": mission["id"]})
    assert refused.status_code == 403
    [entry] = (await ok(client, ws, LEDGER, {"coordinate": PARTS + "create"}))["items"]
    assert entry["detail"]["mission_id"] == mission["id"]
    assert "ai_system_id" not in entry["detail"] and "persona" not in entry["detail"]
