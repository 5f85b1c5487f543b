"""Garbage-collector tuning belongs to `prism serve`, never to the app factory (which tests and embedders call)."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
from pathlib import Path

import pytest

from prism.app import create_app
from prism.config import Settings
from prism.integrations.runtime import IntegrationRuntime
from prism.registry.registry import build_registry
from prism.storage import Database
from tests.processes import clean_env

pytestmark = pytest.mark.engine_independent


async def test_building_and_running_the_app_leaves_the_process_collector_as_it_was(settings: Settings) -> None:
    before = (gc.isenabled(), gc.get_threshold(), gc.get_freeze_count())
    application = create_app(settings)
    async with application.router.lifespan_context(application):
        assert (gc.isenabled(), gc.get_threshold(), gc.get_freeze_count()) == before
    assert (gc.isenabled(), gc.get_threshold(), gc.get_freeze_count()) == before


async def test_an_integrations_refresh_outside_a_server_never_pauses_the_collector(
        db: Database, monkeypatch: pytest.MonkeyPatch) -> None:
    """A pause would last while the refresh awaits the database, so collection would stop for everything else on
    the loop meanwhile (a test, an embedding program): only a server process's collector is Prism's to pause."""
    paused: list[bool] = []
    monkeypatch.setattr(gc, "disable", lambda: paused.append(True))
    runtime = IntegrationRuntime(db, build_registry(), lambda registry: None)
    await runtime.refresh(force=True)
    assert paused == []


def test_a_served_process_collects_again_once_its_app_is_built(tmp_path: Path) -> None:
    """`prism serve` with one worker pauses the collector from its start; its app factory must resume it."""
    probe = (
        "import gc, json\n"
        "from prism.kit.collector import pause_until_serving\n"
        "pause_until_serving()\n"
        "from prism.cli.serve import serving_app\n"
        "serving_app()\n"
        "print(json.dumps([gc.isenabled(), gc.get_freeze_count(), gc.get_threshold()[0]]))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, env=clean_env(), capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    enabled, frozen, young = json.loads(done.stdout.strip().splitlines()[-1])
    assert enabled is True and frozen > 0 and young > 700
