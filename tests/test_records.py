"""Records as the doors answer them: a read by id is `to_record` of its row, in each transaction, and `iso()`."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta, timezone

from sqlalchemy import select

from prism.apps.spare_parts.models import SparePart
from prism.kit.ids import new_id
from prism.kit.timeutil import iso
from prism.storage import Database
from prism.tenancy.repository import OrgRepository, to_record
from tests.factories import Factory, unique


def _stored_values() -> list[datetime]:
    rng = random.Random(7)
    values = [datetime(1, 1, 1, tzinfo=UTC), datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
              datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC), datetime(2026, 1, 2, 3, 4, 5, 10, tzinfo=UTC)]
    for _ in range(2000):
        offset = timezone(timedelta(minutes=rng.randint(-900, 900)))
        values.append(datetime(rng.randint(2, 9998), rng.randint(1, 12), rng.randint(1, 28), rng.randint(0, 23),
                               rng.randint(0, 59), rng.randint(0, 59), rng.choice([0, rng.randint(0, 999999)]),
                               tzinfo=offset))
    return values


def test_iso_gives_isoformat_text_with_z_for_utc() -> None:
    for value in _stored_values():
        in_utc = value.astimezone(UTC)
        assert iso(in_utc) == in_utc.isoformat().replace("+00:00", "Z"), in_utc
        assert iso(in_utc.replace(tzinfo=None)) == iso(in_utc)  # naive values are taken as UTC
        assert iso(value) == value.isoformat().replace("+00:00", "Z"), value  # other zones keep their offset
    assert iso(datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone(timedelta(0)))) == "2026-01-02T03:04:05Z"
    assert iso(None) is None


async def test_a_record_read_by_id_is_to_record_of_its_row(db: Database, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    whole_second = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    async with db.write() as s:
        rows = [SparePart(organization_id=ws.org.id, sku=unique("sku"), name="Bearing", quantity=3,
                          created_at=whole_second, updated_at=whole_second + timedelta(microseconds=7)),
                SparePart(organization_id=ws.org.id, sku=unique("sku"), name="Gasket \u00e9")]
        s.add_all(rows)
    async with db.write() as s:
        for row in rows:
            fresh = (await s.execute(select(SparePart).where(SparePart.id == row.id))).scalar_one()
            record = await OrgRepository(s, SparePart, ws.org.id).get_record(row.id)
            assert record == to_record(fresh)
            assert list(record) == list(to_record(fresh))  # the same keys, in the same order
    assert record is not None


async def test_a_read_by_id_flushes_pending_changes_first(db: Database, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    async with db.write() as s:
        part = SparePart(id=new_id(), organization_id=ws.org.id, sku=unique("sku"), name="Pending")
        s.add(part)  # not flushed: the read must flush it (autoflush), or it would not be found
        record = await OrgRepository(s, SparePart, ws.org.id).get_record(part.id)
        assert record["name"] == "Pending"
        part.name = "Changed"  # dirty: flushed before the next read
        assert (await OrgRepository(s, SparePart, ws.org.id).get_record(part.id))["name"] == "Changed"


async def test_each_transaction_reads_on_its_own_connection(db: Database, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    async with db.write() as s:
        part = SparePart(organization_id=ws.org.id, sku=unique("sku"), name="First")
        s.add(part)
    repo_reads = []
    for name in ("Second", "Third"):
        async with db.write() as s:
            repo = OrgRepository(s, SparePart, ws.org.id)
            repo_reads.append((await repo.get_record(part.id))["name"])
            (await repo.get(part.id)).name = name
    async with db.read() as s:
        repo_reads.append((await OrgRepository(s, SparePart, ws.org.id).get_record(part.id))["name"])
    assert repo_reads == ["First", "Second", "Third"]
