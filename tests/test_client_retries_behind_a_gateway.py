"""The official clients (Python sync and async, TypeScript) retry only what cannot run twice.

Each scenario runs the real client against a real `prism serve` behind a gateway on loopback that forwards the
request to Prism and then answers 502 or 504 (or cuts the connection) instead of Prism's answer.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest
from prism_client import AsyncPrismClient

from tests.client_retries_support import (
    CLIENTS,
    DROP,
    ClientCall,
    Failure,
    Gateway,
    Limits,
    build_typescript_client,
    invoke,
    running_gateway,
)
from tests.factories import Factory, Workspace, unique
from tests.live_prism import LiveServer, live_prism_fixture  # noqa: F401 -- the fixture

FAILURES = [502, 504, DROP]
TICKET = ("entity_crud", "itsm", "ticket")


@pytest.fixture
async def gateway(live_prism: LiveServer) -> AsyncIterator[Gateway]:
    async with running_gateway(live_prism.base_url) as running:
        yield running


@pytest.fixture(scope="module")
def typescript() -> str:
    return build_typescript_client()


WHOAMI = ClientCall("me", [])


def create_ticket(title: str) -> ClientCall:
    # Tickets, because nothing in them is unique: a create run twice makes two tickets, as in production.
    return ClientCall("dispatch", [*TICKET, "create", {"title": title, "priority": "p3"}])


def create_ticket_through(door: str, title: str) -> ClientCall:
    """The same create through the tool door (POST /api/mcp/tools/…/) or the sandbox (POST /api/v1/dev/call/)."""
    envelope = {"app": "itsm", "entity": "ticket", "operation": "create",
                "arguments": {"title": title, "priority": "p3"}}
    if door == "tool door":
        return ClientCall("call_tool", ["prism_entity_crud"], "callTool", ["prism_entity_crud", envelope],
                          kwargs=envelope)
    return ClientCall("call", ["prism_entity_crud", envelope])


def create_webhook(name: str) -> ClientCall:
    url = "https://127.0.0.1:9/hook"
    return ClientCall("create_webhook", [name, url], "createWebhook", [{"name": name, "url": url}])


async def tickets_on_prism(live_prism: LiveServer, ws: Workspace) -> int:
    """How many tickets the workspace holds, asked of Prism directly (not through the gateway)."""
    async with AsyncPrismClient(live_prism.base_url, ws.keys["owner"], timeout=10) as prism:
        page = await prism.dispatch(*TICKET, "list", {})
    return len(page["items"])


def as_the_client_saw_it(failure: Failure) -> tuple[str, int | None]:
    """The outcome's (error, status) for a gateway failure that is not retried."""
    return ("connection", None) if failure == DROP else ("api", int(failure))


@pytest.mark.engine_independent
@pytest.mark.parametrize("failure", FAILURES)
@pytest.mark.parametrize("client", CLIENTS)
async def test_a_create_is_sent_again_after_a_gateway_failure_with_the_same_generated_key(
        client: str, failure: Failure, gateway: Gateway, factory: Factory, typescript: str) -> None:
    ws = await factory.workspace(roles=("owner",))
    title = unique("Printer jam ")
    gateway.fail_after_forwarding(failure)
    outcome = await invoke(client, gateway.base_url, ws.keys["owner"], create_ticket(title),
                           typescript=typescript)
    assert outcome.error is None and outcome.value["title"] == title
    first, second = gateway.passages
    assert first.idempotency_key is not None and uuid.UUID(first.idempotency_key).version == 4
    assert second.idempotency_key == first.idempotency_key


@pytest.mark.parametrize("failure", FAILURES)
@pytest.mark.parametrize("client", CLIENTS)
async def test_a_create_retried_after_a_gateway_failure_runs_once_on_prism(
        client: str, failure: Failure, gateway: Gateway, factory: Factory, live_prism: LiveServer,
        typescript: str) -> None:
    ws = await factory.workspace(roles=("owner",))
    title = unique("Printer jam ")
    gateway.fail_after_forwarding(failure)
    outcome = await invoke(client, gateway.base_url, ws.keys["owner"], create_ticket(title),
                           typescript=typescript)
    assert outcome.error is None and outcome.value["title"] == title
    assert [p.replayed for p in gateway.passages] == [False, True]
    assert await tickets_on_prism(live_prism, ws) == 1


@pytest.mark.parametrize("door", ["tool door", "sandbox"])
@pytest.mark.parametrize("client", CLIENTS)
async def test_a_create_through_another_door_runs_once_after_a_gateway_timeout(
        client: str, door: str, gateway: Gateway, factory: Factory, live_prism: LiveServer, typescript: str) -> None:
    ws = await factory.workspace(roles=("owner",))
    gateway.fail_after_forwarding(504)
    outcome = await invoke(client, gateway.base_url, ws.keys["owner"], create_ticket_through(door, unique("Jam ")),
                           typescript=typescript)
    assert outcome.error is None
    assert [p.replayed for p in gateway.passages] == [False, True]
    assert await tickets_on_prism(live_prism, ws) == 1


@pytest.mark.engine_independent
@pytest.mark.parametrize("failure", FAILURES)
@pytest.mark.parametrize("client", CLIENTS)
async def test_a_create_sent_without_a_key_is_not_sent_again_after_a_gateway_failure(
        client: str, failure: Failure, gateway: Gateway, factory: Factory, live_prism: LiveServer,
        typescript: str) -> None:
    ws = await factory.workspace(roles=("owner",))
    title = unique("Printer jam ")
    gateway.fail_after_forwarding(failure)
    outcome = await invoke(client, gateway.base_url, ws.keys["owner"], create_ticket(title),
                           idempotency_key=None, typescript=typescript)
    assert (outcome.error, outcome.status) == as_the_client_saw_it(failure)
    assert [(p.method, p.idempotency_key) for p in gateway.passages] == [("POST", None)]
    assert await tickets_on_prism(live_prism, ws) == 1


@pytest.mark.engine_independent
@pytest.mark.parametrize("client", CLIENTS)
async def test_the_callers_own_key_is_sent_on_every_attempt(client: str, gateway: Gateway, factory: Factory,
                                                            typescript: str) -> None:
    ws = await factory.workspace(roles=("owner",))
    title = unique("Printer jam ")
    own_key = f"printer-{uuid.uuid4().hex}"
    gateway.fail_after_forwarding(504)
    outcome = await invoke(client, gateway.base_url, ws.keys["owner"], create_ticket(title),
                           idempotency_key=own_key, typescript=typescript)
    assert outcome.error is None
    assert [p.idempotency_key for p in gateway.passages] == [own_key, own_key]


@pytest.mark.engine_independent
@pytest.mark.parametrize("failure", FAILURES)
@pytest.mark.parametrize("client", CLIENTS)
async def test_a_read_is_sent_again_after_a_gateway_failure(client: str, failure: Failure, gateway: Gateway,
                                                            factory: Factory, typescript: str) -> None:
    ws = await factory.workspace(roles=("owner",))
    gateway.fail_after_forwarding(failure)
    outcome = await invoke(client, gateway.base_url, ws.keys["owner"], WHOAMI, typescript=typescript)
    assert outcome.error is None and outcome.value["user"]["email"] == ws.emails["owner"]
    assert [(p.method, p.idempotency_key) for p in gateway.passages] == [("GET", None), ("GET", None)]


@pytest.mark.engine_independent
@pytest.mark.parametrize("status", [429, 503])
@pytest.mark.parametrize("client", CLIENTS)
async def test_a_retry_after_beyond_the_cap_is_raised_at_once_with_the_wait(
        client: str, status: int, gateway: Gateway, factory: Factory, typescript: str) -> None:
    ws = await factory.workspace(roles=("owner",))
    gateway.refuse(status, {"Retry-After": "60"})
    outcome = await invoke(client, gateway.base_url, ws.keys["owner"], WHOAMI, limits=Limits(max_retry_after=5),
                           typescript=typescript)
    assert (outcome.error, outcome.status, outcome.retry_after) == ("api", status, 60)
    assert outcome.seconds < 2.5, "the client must raise at once, not sleep the cap first"
    assert len(gateway.passages) == 1


@pytest.mark.parametrize("failure", FAILURES)
@pytest.mark.parametrize("client", CLIENTS)
async def test_a_webhook_create_retried_after_a_gateway_failure_runs_once_on_prism(
        client: str, failure: Failure, gateway: Gateway, factory: Factory, live_prism: LiveServer,
        typescript: str) -> None:
    # The webhooks API keeps answers by key like every door: a create sent again gets the first one's webhook.
    ws = await factory.workspace(roles=("owner",))
    gateway.fail_after_forwarding(failure)
    outcome = await invoke(client, gateway.base_url, ws.keys["owner"], create_webhook("Ops hook"),
                           typescript=typescript)
    assert outcome.error is None and outcome.value["name"] == "Ops hook"
    first, second = gateway.passages
    assert first.idempotency_key is not None and second.idempotency_key == first.idempotency_key
    assert [p.replayed for p in gateway.passages] == [False, True]
    async with AsyncPrismClient(live_prism.base_url, ws.keys["owner"], timeout=10) as prism:
        assert (await prism.list_webhooks())["count"] == 1


@pytest.mark.parametrize("client", CLIENTS)
async def test_a_webhook_delete_retried_after_a_gateway_failure_succeeds(
        client: str, gateway: Gateway, factory: Factory, live_prism: LiveServer, typescript: str) -> None:
    # Sent again without its key, the delete would find the webhook gone and answer 404 for a delete that worked.
    ws = await factory.workspace(roles=("owner",))
    async with AsyncPrismClient(live_prism.base_url, ws.keys["owner"], timeout=10) as prism:
        hook = await prism.create_webhook("Doomed hook", "https://127.0.0.1:9/hook")
    gateway.fail_after_forwarding(504)
    outcome = await invoke(client, gateway.base_url, ws.keys["owner"],
                           ClientCall("delete_webhook", [hook["id"]], "deleteWebhook"), typescript=typescript)
    assert outcome.error is None, outcome
    assert [(p.prism_status, p.replayed) for p in gateway.passages] == [(204, False), (204, True)]


@pytest.mark.engine_independent
@pytest.mark.parametrize("client", CLIENTS)
async def test_a_repeat_answered_key_in_progress_is_sent_again_after_the_wait(
        client: str, gateway: Gateway, factory: Factory, typescript: str) -> None:
    # Prism's answer to a repeat that came while the keyed call was still finishing (its outbound part running),
    # played by the gateway: a live Prism gives it only while a call to another service is under way.
    ws = await factory.workspace(roles=("owner",))
    gateway.refuse(409, {"Retry-After": "1"}, {
        "success": False, "error": "idempotency_key_in_progress", "tool_name": "prism_entity_crud",
        "message": "the call that first used this key is still finishing; retry shortly"})
    outcome = await invoke(client, gateway.base_url, ws.keys["owner"], create_ticket(unique("Jam ")),
                           typescript=typescript)
    assert outcome.error is None and outcome.seconds >= 0.95
    first, second = gateway.passages
    assert first.idempotency_key is not None and second.idempotency_key == first.idempotency_key
