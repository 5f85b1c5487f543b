"""The reference topology (deploy/), brought up for real: nginx terminating TLS with a local CA, round robin over
two `prism serve --workers 2` nodes, one `prism worker`, PostgreSQL and Redis. Every request goes through nginx
over HTTPS; nginx names the node that answered, so each check proves its steps were spread over both nodes."""

from __future__ import annotations

import asyncio
import base64
import json
import socket
import uuid
from typing import Any

import httpx
import pytest
from deploy.topology import Topology

from tests.deploy_support import (
    DEMO_ORG,
    MEMBER_EMAIL,
    OWNER_EMAIL,
    USER_CEILING,
    cli,
    demo_key,
    https_client,
    node_of,
    nodes,
    topology,
)
from tests.factories import PASSWORD
from tests.oauth_support import OAUTH, bearer, get_code, pkce, register, sign_in
from tests.processes import query
from tests.test_mcp_protocol import JSON_AND_SSE, PATH, rpc
from tests.webhooks_receiver import Receiver

__all__ = ["topology"]  # the fixture, used by name

TOOL = "/api/mcp/tools/prism_entity_crud/"
MISSIONS = "/api/mcp/tools/prism_mission_control/"
WEBHOOKS = "/api/v1/risk-assessment/governance/webhooks/"
ME = "/api/v1/dev/me/"


def crud(app: str, entity: str, operation: str, **arguments: Any) -> dict[str, Any]:
    return {"app": app, "entity": entity, "operation": operation, "arguments": arguments}


async def test_a_streamable_http_mcp_session_spans_both_nodes(topology: Topology) -> None:
    headers = {**bearer(demo_key(topology)), **JSON_AND_SSE}
    seen: list[str] = []
    async with https_client(topology) as http:
        opened = await http.post(PATH, headers=headers, json=rpc("initialize", {
            "protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "topology", "version": "1"}}))
        assert opened.status_code == 200, opened.text
        seen.append(node_of(opened))
        session = {**headers, "Mcp-Session-Id": opened.headers["mcp-session-id"]}
        initialized = await http.post(PATH, headers=session, json=rpc("notifications/initialized", request_id=None))
        assert initialized.status_code == 202, initialized.text
        seen.append(node_of(initialized))
        for turn in range(2):
            listed = await http.post(PATH, headers=session, json=rpc("tools/list", request_id=10 + turn))
            assert listed.status_code == 200, listed.text
            assert "prism_entity_crud" in {t["name"] for t in listed.json()["result"]["tools"]}
            seen.append(node_of(listed))
            called = await http.post(PATH, headers=session, json=rpc("tools/call", {
                "name": "prism_entity_crud", "arguments": crud("spare_parts", "spare_part", "list", page_size=2)},
                request_id=20 + turn))
            assert called.status_code == 200, called.text
            assert called.json()["result"]["isError"] is False, called.text
            seen.append(node_of(called))
    assert set(seen) == nodes(topology), seen


async def _next_event(lines: Any) -> list[str]:
    event: list[str] = []
    async for line in lines:
        if line == "":
            if event and not all(part.startswith(":") for part in event):  # keep-alive comments
                return event
            event = []
            continue
        event.append(line)
    raise AssertionError("the stream ended")


async def test_a_legacy_sse_stream_on_one_node_answers_messages_posted_to_the_other(topology: Topology) -> None:
    auth = bearer(demo_key(topology))
    async with https_client(topology) as http, asyncio.timeout(60):
        async with http.stream("GET", PATH, headers={**auth, "Accept": "text/event-stream"}) as stream:
            assert stream.status_code == 200
            stream_node = node_of(stream)
            lines = stream.aiter_lines()
            announced = await _next_event(lines)
            assert announced[0] == "event: endpoint", announced
            endpoint = announced[1].removeprefix("data: ")
            posted_to: list[str] = []
            for turn in range(4):
                accepted = await http.post(endpoint, json=rpc("ping", request_id=100 + turn),
                                           headers={**auth, "Content-Type": "application/json"})
                assert accepted.status_code == 202, accepted.text
                posted_to.append(node_of(accepted))
                # The answer comes back on the stream, nginx passing it on at once (no buffering).
                assert await _next_event(lines) == [
                    "event: message", f'data: {{"jsonrpc":"2.0","id":{100 + turn},"result":{{}}}}']
    assert {n for n in posted_to if n != stream_node}, (stream_node, posted_to)


async def test_oauth_registration_authorization_token_and_refresh_across_nodes(topology: Topology) -> None:
    seen: list[str] = []

    async def hook(answer: httpx.Response) -> None:
        seen.append(node_of(answer))

    async with https_client(topology, event_hooks={"response": [hook]}) as c:
        client = await register(c)
        signed = await sign_in(c, OWNER_EMAIL, PASSWORD)
        assert signed.status_code == 303, signed.text
        verifier, challenge = pkce()
        redirect_uri = client["redirect_uris"][0]
        code = await get_code(c, client["client_id"], challenge, email=OWNER_EMAIL, redirect_uri=redirect_uri)
        issued = await c.post(f"{OAUTH}/token/", data={
            "grant_type": "authorization_code", "code": code, "code_verifier": verifier,
            "client_id": client["client_id"], "redirect_uri": redirect_uri})
        assert issued.status_code == 200, issued.text
        tokens = issued.json()
        for _ in range(2):
            refreshed = await c.post(f"{OAUTH}/token/", data={
                "grant_type": "refresh_token", "client_id": client["client_id"],
                "refresh_token": tokens["refresh_token"]})
            assert refreshed.status_code == 200, refreshed.text
            assert refreshed.json()["refresh_token"] != tokens["refresh_token"]
            tokens = refreshed.json()
        me = [await c.get(ME, headers=bearer(tokens["access_token"])) for _ in range(2)]
    assert [m.status_code for m in me] == [200, 200], [m.text for m in me]
    assert all(OWNER_EMAIL in m.text for m in me), [m.text for m in me]  # whoami: the consenting user
    assert set(seen) == nodes(topology), seen
    # Issuer: the public https URL of the tenant's host as clients address nginx, not a node's own address.
    claims = json.loads(base64.urlsafe_b64decode(tokens["access_token"].split(".")[1] + "=="))
    assert claims["iss"] == f"https://{topology.host('demo')}"


async def test_a_per_user_ceiling_is_one_ceiling_across_both_nodes(topology: Topology) -> None:
    key = cli("key", "create", "--tenant", "demo", "--email", MEMBER_EMAIL, "--org", DEMO_ORG,
              deployment=topology)["api_key"]
    async with https_client(topology) as http:
        answers = await asyncio.gather(*(http.get(ME, headers=bearer(key)) for _ in range(3 * USER_CEILING)))
    statuses = [a.status_code for a in answers]
    assert statuses.count(200) == USER_CEILING and statuses.count(429) == 2 * USER_CEILING, statuses
    # Both nodes counted requests, yet only one ceiling's worth succeeded: with a ceiling per node each would have
    # let its own first USER_CEILING through. Which node's requests win is a race (a node pipelines its
    # concurrent checks to Redis in one round trip, so one pipeline can take the whole ceiling).
    assert {node_of(a) for a in answers} == nodes(topology)


async def test_a_mission_budget_spent_through_both_nodes_refuses_at_the_ceiling_once(topology: Topology) -> None:
    async with https_client(topology, headers=bearer(demo_key(topology))) as http:
        made = await http.post(MISSIONS, json=crud("missions", "mission", "create", name="close", budget_ceiling=10))
        assert made.status_code == 200, made.text
        mission_id = made.json()["data"]["id"]
        started = await http.post(MISSIONS, json=crud("missions", "mission", "start", id=mission_id))
        assert started.status_code == 200, started.text
        answers = await asyncio.gather(*(
            http.post(TOOL, json={**crud("spare_parts", "spare_part", "list"), "mission_id": mission_id})
            for _ in range(40)))
    statuses = [a.status_code for a in answers]
    assert statuses.count(200) == 10 and statuses.count(403) == 30, statuses
    assert {a.json()["error"] for a in answers if a.status_code == 403} == {"budget_exceeded"}
    # Both nodes counted requests, yet only one ceiling's worth succeeded: with a ceiling per node each would have
    # let its own first USER_CEILING through. Which node's requests win is a race (a node pipelines its
    # concurrent checks to Redis in one round trip, so one pipeline can take the whole ceiling).
    assert {node_of(a) for a in answers} == nodes(topology)
    [mission] = query(topology.database_url, "SELECT spent, budget_ceiling FROM missions WHERE id = :id", id=mission_id)
    assert mission == {"spent": 10, "budget_ceiling": 10}
    exceeded = query(topology.database_url,
                     "SELECT payload FROM event_outbox WHERE event_type = 'mission.budget_exceeded'")
    assert len(exceeded) == 1 and mission_id in exceeded[0]["payload"]


CALLS = 200
KILL_AFTER = 60


async def test_a_node_killed_mid_load_loses_no_answered_call_no_ledger_entry_and_no_webhook(
        topology: Topology, receiver: Receiver) -> None:
    hook_path = f"/topology-{uuid.uuid4().hex}"
    prefix = f"KILL-{uuid.uuid4().hex[:6]}"
    async with https_client(topology, headers=bearer(demo_key(topology))) as http:
        made = await http.post(WEBHOOKS, json={"name": "tickets", "url": receiver.url(hook_path),
                                               "events": ["ticket.created"], "retry_delay_seconds": 1})
        assert made.status_code == 201, made.text
        victim = topology.nodes[1]
        answered: dict[str, str] = {}  # title -> ticket id, for every 2xx the client saw
        failed: list[str] = []
        gate = asyncio.Semaphore(12)
        done = 0

        async def create(i: int) -> None:
            nonlocal done
            title = f"{prefix}-{i:03}"
            async with gate:
                try:
                    answer = await http.post(TOOL, json=crud("itsm", "ticket", "create", title=title))
                except httpx.TransportError as exc:
                    failed.append(f"{title}: {exc!r}")
                    return
                finally:
                    done += 1
                    if done == KILL_AFTER:
                        victim.process.kill()  # the supervisor and both its worker processes, mid-load
                if 200 <= answer.status_code < 300:
                    answered[title] = answer.json()["data"]["id"]
                else:
                    failed.append(f"{title}: {answer.status_code} {answer.text[:200]}")

        await asyncio.gather(*(create(i) for i in range(CALLS)))
    assert victim.process.proc.poll() is not None
    with pytest.raises(ConnectionRefusedError):  # none of its worker processes survived to hold the port
        socket.create_connection(("127.0.0.1", victim.port), timeout=2).close()
    # Most calls after the kill went to the surviving node: nginx skips a node that refuses connections.
    assert len(answered) >= CALLS - 24, failed

    stored = {r["title"]: r["id"] for r in query(
        topology.database_url, "SELECT t.title, t.id FROM itsm_tickets t WHERE t.title LIKE :p", p=f"{prefix}-%")}
    assert answered.items() <= stored.items(), set(answered) - set(stored)
    # One ledger entry per committed ticket: every answered call is in the ledger (a call cut off by the kill
    # is there exactly when its ticket committed).
    entries = query(topology.database_url,
                    "SELECT count(*) AS n FROM audit_entries e JOIN organizations o ON o.id = e.organization_id "
                    "WHERE o.slug = :org AND e.coordinate = 'entity_crud/itsm/ticket/create' AND e.outcome = 'allowed'",
                    org=DEMO_ORG)
    assert entries == [{"n": len(stored)}], (entries, len(stored))

    sealed = await asyncio.to_thread(cli, "audit", "seal", deployment=topology)
    verified = await asyncio.to_thread(cli, "audit", "verify", "--tenant", "demo", deployment=topology)
    assert verified["valid"] is True, (sealed, verified)

    # The worker delivers one ticket.created per committed ticket, the killed node's included.
    arrived = await receiver.wait_for(hook_path, len(stored), within=90)
    await asyncio.sleep(1)  # a duplicate would arrive right behind
    delivered = [json.loads(r.body)["data"]["ticket_id"] for r in receiver.at(hook_path)]
    assert sorted(delivered) == sorted(stored.values()), (len(arrived), len(stored))
