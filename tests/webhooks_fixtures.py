"""Fixtures shared by the webhook tests (registered for every test module by tests/conftest.py).

`hook_app` is Prism configured as for an on-premise receiver: private networks allowed and the test CA
trusted. Its in-process worker is off, and so is the shared test app's, so that each test decides which
worker runs, when, and on which clock.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable
from datetime import datetime, timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy import delete
from starlette.applications import Starlette

from prism.app import create_app
from prism.config import Settings
from prism.kit.timeutil import utcnow
from prism.storage import Database
from prism.webhooks.models import WebhookDelivery
from prism.webhooks.worker import DeliveryWorker
from tests.factories import Workspace
from tests.webhooks_receiver import Receiver, RunningReceiver, TlsFiles, make_tls

BASE = "/api/v1/risk-assessment/governance/webhooks/"
# The data of a governance decision event, as the delivery tests emit it.
DECISION_DATA = {"decision_type": "agent_action", "ai_system": {"id": "s", "name": "n"}}
STILL_TO_SEND = ("pending", "retrying")


@pytest.fixture(scope="session", name="tls")
def tls_fixture(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    return make_tls(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="session", name="receiver")
async def receiver_fixture(tls: TlsFiles) -> AsyncIterator[Receiver]:
    running = RunningReceiver(tls)
    yield await running.start()
    await running.stop()


@pytest.fixture(scope="session", name="hook_settings")
def hook_settings_fixture(settings: Settings, tls: TlsFiles) -> Settings:
    return settings.model_copy(update={
        "webhook_allow_private_networks": True, "webhook_ca_bundle": str(tls.ca),
        "webhook_worker_in_process": False, "webhook_poll_seconds": 0.05, "webhook_lease_seconds": 30.0})


@pytest.fixture(scope="session", name="hook_app")
async def hook_app_fixture(app: Any, hook_settings: Settings) -> AsyncIterator[Starlette]:
    if getattr(app.state, "webhook_worker", None) is not None:  # the shared app's own worker stays out of the way
        await app.state.webhook_worker.stop()
        app.state.webhook_worker = None
    application = create_app(hook_settings)
    async with application.router.lifespan_context(application):
        yield application


@pytest.fixture(scope="session", name="hook_db")
def hook_db_fixture(hook_app: Starlette) -> Database:
    database: Database = hook_app.state.db
    return database


@pytest.fixture(name="hook_client")
async def hook_client_fixture(hook_app: Starlette) -> AsyncIterator[httpx.AsyncClient]:
    await _forget_deliveries_still_to_send(hook_app.state.db)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=hook_app), base_url="http://localhost") as c:
        yield c
    await _forget_deliveries_still_to_send(hook_app.state.db)


async def _forget_deliveries_still_to_send(db: Database) -> None:
    """A worker claims every due delivery of the database, oldest first: one that another test left to be sent
    (any test emitting events to a webhook of its own) would be sent by this test's worker, ahead of, or instead
    of, this test's own. So each webhook test starts, and ends, with none."""
    async with db.write() as session:
        await session.execute(delete(WebhookDelivery).where(WebhookDelivery.status.in_(STILL_TO_SEND)))


class FakeClock:
    """The workers' notion of now, moved by the test: retries are checked to the second without sleeping."""

    def __init__(self) -> None:
        self.now = utcnow()

    def __call__(self) -> datetime:
        return self.now

    def advance_to(self, moment: datetime) -> None:
        self.now = max(self.now, moment)

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


@pytest.fixture(name="make_worker")
async def make_worker_fixture(hook_db: Database,
                              hook_settings: Settings) -> AsyncIterator[Callable[..., DeliveryWorker]]:
    made: list[DeliveryWorker] = []

    def build(settings: Settings | None = None, **kwargs: Any) -> DeliveryWorker:
        worker = DeliveryWorker(hook_db, settings or hook_settings, **kwargs)
        made.append(worker)
        return worker

    yield build
    for worker in made:
        await worker.close()


def unique_path() -> str:
    return "/" + uuid.uuid4().hex


async def create_hook(client: httpx.AsyncClient, ws: Workspace, url: str, **fields: Any) -> dict[str, Any]:
    response = await client.post(BASE, json={"name": "Receiver", "url": url, **fields}, headers=ws.headers())
    assert response.status_code == 201, response.text
    body: dict[str, Any] = response.json()
    return body


async def deliveries_of(client: httpx.AsyncClient, ws: Workspace, webhook_id: str) -> list[dict[str, Any]]:
    response = await client.get(f"{BASE}{webhook_id}/deliveries/", headers=ws.headers())
    assert response.status_code == 200, response.text
    results: list[dict[str, Any]] = response.json()["results"]
    return results
