"""Migration 0034 counts each organization's ticket numbers on from its highest ticket, so that organizations with
tickets before it keep their numbering (and no number is given twice after it); stepping down drops the counters."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
from alembic import command
from sqlalchemy import Connection, inspect, select

from prism.apps.itsm.models import TicketCounter
from prism.migrate import alembic_config, migrate_with_alembic
from prism.storage import Database
from tests.domain_support import Caller
from tests.factories import Factory
from tests.processes import scratch_database
from tests.test_documents_postings_migration import _with_app
from tests.test_documents_word_counts_migration import _on

BEFORE = "0033_oversight_mission"


def _counters(connection: Connection) -> dict[str, int] | None:
    if "itsm_ticket_counters" not in inspect(connection).get_table_names():
        return None
    return dict(connection.execute(select(TicketCounter.organization_id, TicketCounter.last_number)).all())


async def test_the_upgrade_counts_on_from_each_organizations_highest_ticket(tmp_path: Path) -> None:
    with scratch_database(tmp_path, "ticket_counters") as url:
        await asyncio.to_thread(migrate_with_alembic, url)
        callers: dict[str, Caller] = {}

        async def tickets(db: Database, client: httpx.AsyncClient) -> Any:
            busy = callers["busy"] = Caller(client, await Factory(db).workspace(roles=("owner",)))
            callers["quiet"] = Caller(client, await Factory(db).workspace(roles=("owner",)))
            made = [await busy.create("itsm", "ticket", {"title": f"t{n}"}) for n in range(3)]
            await busy.ok("workflow_action", "itsm", "ticket", "cancel", {"id": made[1]["id"], "reason": "dup"})
            await busy.ok("entity_crud", "itsm", "ticket", "delete", {"id": made[1]["id"]})

        await _with_app(url, tickets)
        busy = callers["busy"].ws.org.id  # the organization without tickets gets no counter
        assert await _on(url, _counters) == {busy: 3}
        await asyncio.to_thread(command.downgrade, alembic_config(url), BEFORE)
        assert await _on(url, _counters) is None
        await asyncio.to_thread(migrate_with_alembic, url)
        assert await _on(url, _counters) == {busy: 3}  # from the highest ticket left, not from how many there are

        async def next_numbers(db: Database, client: httpx.AsyncClient) -> Any:
            return [(await Caller(client, callers[name].ws).create("itsm", "ticket", {"title": "n"}))["number"]
                    for name in ("busy", "quiet")]

        assert await _with_app(url, next_numbers) == [4, 1]
