"""A mission id is an id: at most 36 characters, as missions' and oversight requests' ids are (docs/governance.md)."""

from __future__ import annotations

import httpx

from tests.factories import Factory
from tests.governance_support import governed_key, post

GATED = {"name": "gated", "default": "allow", "oversight": ["entity_crud/finance/vendor/create"]}
CREATE = "entity_crud/finance/vendor/create"


async def test_a_mission_id_longer_than_any_id_is_refused_at_the_door_not_a_500_on_escalation(
        client: httpx.AsyncClient, factory: Factory) -> None:
    """An escalated call keeps the mission it named in a column of an id's width: on PostgreSQL a longer value
    failed that insert, a 500 with no oversight request opened."""
    ws = await factory.workspace(roles=("owner",))
    await governed_key(factory, client, ws, "agent", persona=GATED)
    for where in ({"headers": {"X-Prism-Mission": "m" * 37}}, {"envelope": {"mission_id": "m" * 37}}):
        response = await post(client, ws, CREATE, {"name": "Acme"}, label="agent", **where)
        assert response.status_code == 400, (where, response.status_code, response.text)
        assert response.json()["error"] == "invalid_arguments" and "mission_id" in response.json()["message"]
    held = await post(client, ws, CREATE, {"name": "Acme"}, label="agent", headers={"X-Prism-Mission": "m" * 36})
    assert held.status_code == 202, held.text  # an id's length: escalated, the request naming it
