"""Declarative base and column types shared by every table."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import BigInteger, DateTime, Integer, MetaData, String, TypeDecorator
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from prism.kit.ids import new_id
from prism.kit.timeutil import utcnow

NAMING = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class Int64(TypeDecorator[int]):
    """A 64-bit integer column (amounts in cents, budgets, costs): BIGINT on PostgreSQL, whose INTEGER holds 32 bits;
    INTEGER on SQLite, which already stores 64, so a database migrated there keeps the schema a new one gets.

    Read back as an int also where PostgreSQL answers NUMERIC: `sum()` of a BIGINT (a Decimal in Python, which no
    JSON encoder takes). SQLAlchemy gives a sum its column's type, so every sum of such a column is read so."""

    impl = BigInteger
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> Any:
        return dialect.type_descriptor(Integer() if dialect.name == "sqlite" else BigInteger())

    def process_result_value(self, value: Any, dialect: Dialect) -> int | None:
        return None if value is None else int(value)


class UTCDateTime(TypeDecorator[datetime]):
    """Always timezone-aware UTC in Python, whatever the engine stores (SQLite keeps no zone)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime")
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        parsed: datetime = datetime.fromisoformat(value) if isinstance(value, str) else value
        return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)


def id_column() -> Mapped[str]:
    return mapped_column(String(36), primary_key=True, default=new_id)


def created_column() -> Mapped[datetime]:
    return mapped_column(UTCDateTime(), default=utcnow, nullable=False)
