"""Prism started on a scratch database a migration test made: its settings, and work done with its database."""

from __future__ import annotations

from typing import Any

from prism.app import create_app
from prism.config import Settings
from prism.storage import normalize_url
from tests.conftest import UNTHROTTLED
from tests.processes import TEST_SECRET_KEY_FILE


def settings_for(url: str) -> Settings:
    """Settings for the database at `url`: the suite's master secret, no demo, no background workers to wait for."""
    return Settings(database_url=normalize_url(url), credential_cache_seconds=0, seed_demo=False,
                    secret_key_file=str(TEST_SECRET_KEY_FILE), webhook_worker_in_process=False,
                    audit_seal_sweep_seconds=3600, **UNTHROTTLED)


async def with_app_db(url: str, work: Any) -> Any:
    """`work(db)` with Prism started on the database at `url` (which upgrades it first)."""
    application = create_app(settings_for(url))
    async with application.router.lifespan_context(application):
        return await work(application.state.db)
