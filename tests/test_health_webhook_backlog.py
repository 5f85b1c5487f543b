"""A webhook backlog makes /readyz "degraded", never 503: the queue is the deployment's, so every node reports the same
backlog, and each still serves its requests. The node is unavailable only when it cannot serve (its database)."""

from __future__ import annotations

import sqlite3
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from prism.config import Settings
from prism.kit.timeutil import utcnow
from prism.migrate import upgrade
from tests.limits_support import client_for, limited_app

pytestmark = pytest.mark.engine_independent  # the check reads one status and one time; its verdict is Python's


@pytest.fixture
def migrated_sqlite(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'backlog.db'}"
    upgrade(url)
    return url


async def test_an_overdue_delivery_degrades_every_node_and_none_leaves_service(
        settings: Settings, app: Any, migrated_sqlite: str) -> None:
    async with limited_app(settings, app, database_url=migrated_sqlite, webhook_worker_in_process=False,
                           health_webhook_stall_seconds=300) as first, \
            limited_app(settings, app, database_url=migrated_sqlite, webhook_worker_in_process=False,
                        health_webhook_stall_seconds=300) as second, \
            client_for(first) as one, client_for(second) as other:
        assert (await one.get("/readyz")).json()["status"] == "ok"
        _waiting_delivery(migrated_sqlite, overdue_seconds=60)
        assert (await one.get("/readyz")).json()["status"] == "ok"  # due a minute ago: a worker is on its way
        _waiting_delivery(migrated_sqlite, overdue_seconds=600)
        for client in (one, other):
            ready = await client.get("/readyz")
            assert ready.status_code == 200 and ready.json()["status"] == "degraded", ready.text
            webhooks = ready.json()["checks"]["webhooks"]
            assert webhooks["status"] == "degraded" and "overdue by 6" in webhooks["detail"], webhooks
            assert ready.json()["checks"]["database"] == {"status": "ok"}


async def test_a_backlog_does_not_hide_a_database_that_cannot_serve(
        settings: Settings, app: Any, migrated_sqlite: str) -> None:
    _waiting_delivery(migrated_sqlite, overdue_seconds=600)
    async with limited_app(settings, app, database_url=migrated_sqlite, webhook_worker_in_process=False,
                           health_webhook_stall_seconds=300) as limited, client_for(limited) as client:
        assert (await client.get("/readyz")).status_code == 200
        with sqlite3.connect(migrated_sqlite.split("///", 1)[1]) as connection:
            connection.execute("UPDATE alembic_version SET version_num = 'older'")
        limited.state.readiness.schema_at_head = False  # a fresh node reads the revision again
        ready = await client.get("/readyz")
        assert ready.status_code == 503 and ready.json()["status"] == "unavailable", ready.text
        assert ready.json()["checks"]["migrations"]["status"] == "unavailable"
        assert ready.json()["checks"]["webhooks"]["status"] == "degraded"


def _waiting_delivery(url: str, *, overdue_seconds: float) -> None:
    """A pending delivery due `overdue_seconds` ago, written with the standard sqlite3 module, whose
    connections do not enforce foreign keys: the readiness check reads only its status and due time."""
    due = (utcnow() - timedelta(seconds=overdue_seconds)).replace(tzinfo=None).isoformat(sep=" ")
    with sqlite3.connect(url.split("///", 1)[1]) as connection:
        connection.execute(
            "INSERT INTO webhook_deliveries (id, organization_id, webhook_id, event_id, event_type, status, "
            "attempt_count, response_body, is_test, due_at, created_at) "
            "VALUES (?, 'org', 'hook', 'event', 'governance.decision.allow', 'pending', 0, '', 0, ?, ?)",
            (f"whd_{overdue_seconds}", due, due))
