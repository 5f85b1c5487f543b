"""`prism serve` migrates on every start: a database at the newest revision is recognised without Alembic."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from alembic.script import ScriptDirectory

from prism.migrate import alembic_config, database_revision, newest_revision, upgrade


def test_the_newest_revision_read_from_the_scripts_is_alembics_head(database_url: str) -> None:
    assert newest_revision() == ScriptDirectory.from_config(alembic_config(database_url)).get_current_head()


def test_a_migrated_database_reports_the_newest_revision(database_url: str) -> None:
    assert database_revision(database_url) == newest_revision()


def test_a_new_database_has_no_revision_until_migrated(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'fresh.db'}"
    assert database_revision(url) is None
    upgrade(url)
    assert database_revision(url) == newest_revision()


def test_upgrading_a_database_at_the_newest_revision_does_not_load_alembic(database_url: str) -> None:
    probe = ("import sys\nfrom prism.migrate import upgrade\n"
             f"upgrade({database_url!r})\nprint('alembic' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
