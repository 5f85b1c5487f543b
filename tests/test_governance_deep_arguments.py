"""Arguments nested deeper than JSON is stored (254 levels; a body may nest 1,024) sent to a call its persona puts
under oversight: refused as bad input (nobody could read what they would approve), never a failure of the ledger
batch that would refuse every other call in it, another tenant's included, with a 503 clients retry."""

from __future__ import annotations

import asyncio

import httpx

from tests.factories import Factory
from tests.governance_support import governed_key, post

GATED = {"name": "gated-outbound", "default": "allow", "oversight": ["integration_call/*/*/*"]}
CALL = "integration_call/integrations/endpoint/call"


def _deep(depth: int = 300) -> object:
    body: object = 1
    for _ in range(depth):
        body = [body]
    return body


async def test_deeply_nested_arguments_to_a_gated_call_are_not_a_503(client: httpx.AsyncClient,
                                                                    factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    await governed_key(factory, client, ws, "agent", persona=GATED)
    response = await post(client, ws, CALL, {"id": "end_x", "body": _deep()}, label="agent")
    # Either it is escalated like any other call (202 oversight_required) or refused as bad input (400);
    # never a transient 5xx that the official clients retry.
    assert response.status_code in (202, 400), (response.status_code, response.text)


async def test_one_poisoned_gated_call_does_not_fail_other_tenants_calls(client: httpx.AsyncClient,
                                                                         factory: Factory) -> None:
    attacker = await factory.workspace(roles=("owner",))
    await governed_key(factory, client, attacker, "agent", persona=GATED)
    victim = await factory.workspace(roles=("owner",))
    innocent = [post(client, victim, "entity_crud/spare_parts/spare_part/create",
                     {"sku": f"V-{i}", "name": f"victim part {i}"}) for i in range(6)]
    poisoned = post(client, attacker, CALL, {"id": "end_x", "body": _deep()}, label="agent")
    responses = await asyncio.gather(poisoned, *innocent)
    victim_statuses = [r.status_code for r in responses[1:]]
    assert victim_statuses == [200] * 6, [(r.status_code, r.json().get("error")) for r in responses]
