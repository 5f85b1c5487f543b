"""On PostgreSQL a claim reads the organizations with deliveries pending, not every organization with a webhook,
and organizations still take turns (claim_order)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from sqlalchemy import func
from sqlalchemy.ext.asyncio import AsyncConnection

from prism.storage import Database
from prism.webhooks import postgres_queue
from prism.webhooks.claim_order import fair_pick, fair_pick_ranking_all
from tests.test_webhooks_round_trips import postgres_only
from tests.webhooks_claim_load import buffers, delivery_id, explain_claim, organizations_probed, seed

# Organizations with a webhook and a history of final deliveries, nothing pending. A claim visiting each of them
# reads an index page apiece at least.
IDLE = 3000


@pytest.fixture(name="rolled_back")
async def rolled_back_fixture(hook_client: httpx.AsyncClient, hook_db: Database) -> AsyncIterator[AsyncConnection]:
    """A transaction on the webhook tests' database that is rolled back, so the thousands of organizations written
    in it are seen by nothing else. (hook_client: no delivery other tests left due.)"""
    postgres_only(hook_db)
    async with hook_db.engine.connect() as connection:
        await connection.begin()
        try:
            yield connection
        finally:
            await connection.rollback()


async def test_a_claim_reads_the_organizations_with_deliveries_pending_not_every_one_with_a_webhook(
        rolled_back: AsyncConnection) -> None:
    """Every claim (and every poll of an idle worker) used to probe each organization that has a webhook for its
    oldest due deliveries: about a hundred milliseconds of the database's time per claim with 10,000 of them."""
    await seed(rolled_back, count=IDLE, history=3)
    idle = await explain_claim(rolled_back, limit=16)
    assert organizations_probed(idle) == 0 and buffers(idle) < 200, (organizations_probed(idle), buffers(idle))

    await seed(rolled_back, count=5, history=3, due={1: 10, 2: 10, 3: 10, 4: 10}, leased={4: 4}, later={5: 1})
    due = await explain_claim(rolled_back, limit=16)
    # The five organizations with deliveries pending (the fifth's only later), each probed once; the thousands
    # without are stepped over.
    assert organizations_probed(due) <= 5, organizations_probed(due)
    # About 700, most of it the lease written to the 16 rows taken and their indexes.
    assert buffers(due) < IDLE // 3, buffers(due)


async def test_organizations_take_turns_with_a_few_due_among_thousands_idle(rolled_back: AsyncConnection) -> None:
    """A, B and C have deliveries due (10, 3 and 10, due a second apart, the first an hour ago); C also has 4 in
    flight; D has a retry due only in an hour; thousands have none. A claim of 8 takes the oldest of A and B
    (turns 1 to 3), A's fourth (turn 4), then at turn 5 C's first (C's own turn 1 after its 4 in flight), due
    before A's fifth."""
    await seed(rolled_back, count=IDLE, history=3)
    p = await seed(rolled_back, count=4, history=3, due={1: 10, 2: 3, 3: 10}, leased={3: 4}, later={4: 1})
    await seed(rolled_back, count=IDLE, history=3)
    # The PostgreSQL path, read without leasing, in the order the SQLite path ranks every due delivery.
    now = func.now()
    walked = list((await rolled_back.execute(fair_pick(now, 20))).scalars())
    assert walked == list((await rolled_back.execute(fair_pick_ranking_all(now, 20))).scalars())
    assert len(walked) == 20

    taken = await postgres_queue.claim(rolled_back, me="turns", now=None, lease=30, margin=5, limit=8)
    expected = {delivery_id(p, "due", 1, n) for n in range(1, 5)} | {delivery_id(p, "due", 2, n) for n in range(1, 4)}
    assert {row.id for row in taken} == expected | {delivery_id(p, "due", 3, 1)}
