"""prism_db_pool_connections_in_use, kept by the pools' own checkout and checkin events (SQLAlchemy's public
event API): each process counts its own connections, and a scrape adds up the live processes'."""

from __future__ import annotations

from typing import Any

from sqlalchemy import event

from prism.observability.metrics import DB_POOL_IN_USE
from prism.storage import Database


def _checked_out(*_: Any) -> None:
    DB_POOL_IN_USE.inc()


def _checked_in(*_: Any) -> None:
    DB_POOL_IN_USE.dec()


def observe_pools(db: Database) -> None:
    for engine in {db.engine, db.read_engine}:
        event.listen(engine.sync_engine, "checkout", _checked_out)
        event.listen(engine.sync_engine, "checkin", _checked_in)
