"""Migration 0030 gives each spare part stored before it the opening movement a creation records now (its
quantity less the changes of its movements), so its movements add up to its quantity; stepping down deletes them."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
from alembic import command
from sqlalchemy import Connection, select

from prism.apps.spare_parts.models import SparePart, StockMovement
from prism.migrate import alembic_config, migrate_with_alembic
from prism.storage import Database
from tests.domain_support import Caller
from tests.factories import Factory
from tests.processes import scratch_database
from tests.test_documents_postings_migration import _with_app
from tests.test_documents_word_counts_migration import _on

BEFORE = "0029_endpoint_url_secrets"


def _histories(connection: Connection) -> dict[str, list[tuple[str, int, int]]]:
    """Each part's movements by sku, oldest first: (kind, change, quantity after)."""
    rows = connection.execute(select(SparePart.sku, StockMovement.kind, StockMovement.quantity_change,
                                     StockMovement.quantity_after)
                              .join(StockMovement, StockMovement.spare_part_id == SparePart.id)
                              .order_by(SparePart.sku, StockMovement.created_at, StockMovement.id))
    histories: dict[str, list[tuple[str, int, int]]] = {}
    for sku, *movement in rows:
        histories.setdefault(sku, []).append(tuple(movement))  # type: ignore[arg-type]
    return histories


async def test_the_upgrade_records_the_opening_stock_of_parts_stored_before(tmp_path: Path) -> None:
    with scratch_database(tmp_path, "opening_stock") as url:
        await asyncio.to_thread(migrate_with_alembic, url)

        async def stock(db: Database, client: httpx.AsyncClient) -> Any:
            c = Caller(client, await Factory(db).workspace(roles=("owner",)))
            issued = await c.create("spare_parts", "spare_part", {"sku": "A-ISSUED", "name": "Belt", "quantity": 10})
            await c.ok("workflow_action", "spare_parts", "spare_part", "issueStock", {"id": issued["id"],
                                                                                     "quantity": 3})
            await c.create("spare_parts", "spare_part", {"sku": "B-UNMOVED", "name": "Nut", "quantity": 5})
            empty = await c.create("spare_parts", "spare_part", {"sku": "C-RECEIVED", "name": "Pin"})
            await c.ok("workflow_action", "spare_parts", "spare_part", "receiveStock", {"id": empty["id"],
                                                                                      "quantity": 4})

        await _with_app(url, stock)
        fresh = await _on(url, _histories)
        assert fresh == {"A-ISSUED": [("opening", 10, 10), ("issued", -3, 7)], "B-UNMOVED": [("opening", 5, 5)],
                         "C-RECEIVED": [("received", 4, 4)]}
        await asyncio.to_thread(command.downgrade, alembic_config(url), BEFORE)
        assert await _on(url, _histories) == {"A-ISSUED": [("issued", -3, 7)], "C-RECEIVED": [("received", 4, 4)]}
        await asyncio.to_thread(migrate_with_alembic, url)
        assert await _on(url, _histories) == fresh
