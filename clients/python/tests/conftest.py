"""The client's tests run against a real Prism: the fixtures of Prism's own suite, shared here.

Run from the repository root with the main test command (`python -m pytest`), which collects this folder.
"""

from __future__ import annotations

from tests.conftest import app, client, database_url, db, factory, settings
from tests.live_prism import live_prism_fixture

__all__ = ["app", "client", "database_url", "db", "factory", "live_prism_fixture", "settings"]
