"""What the canonical door's storage shortcuts must keep exactly as SQLAlchemy's own path had it.

- a record read by id equals `to_record` of the ORM row (dates as ISO text);
- a read by id still flushes pending ORM changes first, and reads in each new transaction;
- the dispatcher's NUL check answers as its plain walk does.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.dialects import sqlite

from prism.apps.spare_parts.models import SparePart
from prism.dispatch.dispatcher import _holds_nul
from prism.kit import timeutil
from prism.kit.ids import new_id
from prism.kit.timeutil import iso, iso_of_sqlite_text, sqlite_text_of
from prism.models.base import UTCDateTime
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


def test_a_utc_datetime_is_written_as_the_full_conversion_writes_it() -> None:
    write = UTCDateTime()._cached_bind_processor(sqlite.dialect())
    assert write is not None
    for value in _stored_values():
        in_utc = value.astimezone(UTC)
        assert sqlite_text_of(in_utc) == write(in_utc) == write(value), value
        if value.utcoffset():
            assert sqlite_text_of(value) is None  # another zone: left to the full conversion
    assert sqlite_text_of(datetime(2026, 1, 2)) is None  # naive: the full conversion refuses it


def test_sqlite_text_becomes_the_iso_text_the_full_conversion_gives() -> None:
    dialect = sqlite.dialect()
    write = UTCDateTime()._cached_bind_processor(dialect)
    read = UTCDateTime()._cached_result_processor(dialect, None)
    assert write is not None and read is not None
    for value in _stored_values():
        stored = write(value)
        assert iso_of_sqlite_text(stored) == iso(read(stored)), stored


def test_iso_gives_isoformat_text_with_z_for_utc() -> None:
    for value in _stored_values():
        in_utc = value.astimezone(UTC)
        assert iso(in_utc) == in_utc.isoformat().replace("+00:00", "Z"), in_utc
        assert iso(in_utc.replace(tzinfo=None)) == iso(in_utc)  # naive values are taken as UTC
        assert iso(value) == value.isoformat().replace("+00:00", "Z"), value  # other zones keep their offset
    assert iso(datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone(timedelta(0)))) == "2026-01-02T03:04:05Z"
    assert iso(None) is None


@pytest.mark.parametrize("stored", ["2026-11-21 22:46:43", "2026-11-21T22:46:43.009970", "2026-W47-6 22:46:43.009970",
                                    "2026-11-21 22:46:43.12345Z", "2026-11-21 22:46:43.123+01", "x" * 26, ""])
def test_text_of_another_form_is_left_to_the_full_conversion(stored: str) -> None:
    assert iso_of_sqlite_text(stored) is None


def test_an_impossible_stored_date_fails_as_the_full_conversion_does() -> None:
    read = UTCDateTime()._cached_result_processor(sqlite.dialect(), None)
    assert read is not None
    for stored in ("2026-13-21 22:46:43.009970", "2026-02-30 22:46:43.009970", "2026-11-21 24:46:43.009970"):
        with pytest.raises(ValueError):
            read(stored)
        with pytest.raises(ValueError):
            iso_of_sqlite_text(stored)


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


def _walk(value: Any) -> bool:
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            if "\x00" in item:
                return True
        elif isinstance(item, dict):
            pending.extend(item.keys())
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
    return False


def _deep(leaf: Any, depth: int) -> Any:
    for _ in range(depth):
        leaf = {"n": [leaf]}
    return leaf


@pytest.mark.parametrize("value", [
    {"id": "x"}, {"id": "x\x00"}, {"a\x00": 1}, {"a": "\\u0000"}, {"a": "\\\x00"}, {"a": ["b", {"c": "\x00d"}]},
    {"a": ("tuple\x00",)}, {1: "x"}, {"a": 2**70}, {"a": "\ud800"}, {"a": 1.5, "b": None, "c": True},
    _deep("x", 400), _deep("x\x00", 400), [], "plain", "nul\x00",
])
def test_the_nul_check_answers_as_its_walk(value: Any) -> None:
    assert _holds_nul(value) == _walk(value)


def test_converted_texts_are_remembered_within_a_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(timeutil, "_ISO_OF_TEXT", {})
    monkeypatch.setattr(timeutil, "_ISO_OF_TEXT_MAX", 3)
    texts = [f"2026-11-21 22:46:4{i}.00997{i}" for i in range(5)]
    for stored in texts:
        assert iso_of_sqlite_text(stored) == stored[:10] + "T" + stored[11:] + "Z"
    assert iso_of_sqlite_text(texts[4]) == texts[4][:10] + "T" + texts[4][11:] + "Z"  # a remembered one
    assert 0 < len(timeutil._ISO_OF_TEXT) <= 3
    assert iso_of_sqlite_text("x" * 26) is None
    assert "x" * 26 not in timeutil._ISO_OF_TEXT  # only conversions are remembered
