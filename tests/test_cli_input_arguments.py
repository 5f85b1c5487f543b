"""What an operator types is refused in one line, never a traceback, on both engines: an argument that is not UTF-8
text, a PRISM_APPS entry that does not load when `prism migrate` runs a migration that loads the apps, and a tenant or
organization name longer than its column."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from alembic import command

from prism.migrate import alembic_config, database_revision, migrate_with_alembic, newest_revision
from tests.processes import TRACEBACK, clean_env, cli_json, prism_command, run_cli, scratch_database

NOT_UTF8 = b"Caf\xe9"  # Latin-1: Python keeps the byte as a lone surrogate, which no driver can encode
BEFORE_APPS_ARE_LOADED = "0030_spare_parts_opening_stock"  # 0031 loads the PRISM_APPS handlers


@pytest.fixture(scope="module")
def cli_db(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with scratch_database(tmp_path_factory.mktemp("cli_input"), "cli_input") as url:
        cli_json("migrate", database_url=url)
        cli_json("tenant", "create", "acme", "--name", "Acme", "--admin-email", "a@acme.example",
                 "--admin-password", "password123", database_url=url)
        yield url


def run_with_bytes(database_url: str, *args: bytes) -> subprocess.CompletedProcess[str]:
    env = clean_env(PRISM_DATABASE_URL=database_url)
    return subprocess.run([*(part.encode() for part in prism_command()), *args], env=env, capture_output=True,
                          text=True, errors="replace", timeout=60, stdin=subprocess.DEVNULL, check=False)


@pytest.mark.parametrize(("args", "as_json"), [
    ((b"org", b"create", NOT_UTF8, b"--tenant", b"acme"), True),
    ((b"org", b"create", NOT_UTF8, b"--tenant", b"acme"), False),
    ((b"org", b"create", b"Cafe", b"--tenant", b"acme", b"--slug", NOT_UTF8), True),
    ((b"user", b"create", NOT_UTF8 + b"@acme.example", b"--password", b"password123"), True),
    ((b"tenant", b"create", b"cafe", b"--name", NOT_UTF8, b"--admin-email", b"c@cafe.example",
      b"--admin-password", b"password123"), True),
], ids=["org name", "org name as text", "org slug", "user email", "tenant name"])
def test_an_argument_that_is_not_utf8_is_a_usage_error(cli_db: str, args: tuple[bytes, ...], as_json: bool) -> None:
    done = run_with_bytes(cli_db, *args, *([b"--json"] if as_json else []))
    assert TRACEBACK not in done.stderr, done.stderr[-600:]
    assert done.returncode == 2 and done.stdout == "", done
    [line] = done.stderr.strip().splitlines()
    if as_json:
        error = json.loads(line)
        assert error["error"] == "usage_error", error
        assert error["message"].startswith("argument 'Caf\\xe9") and "is not valid UTF-8" in error["message"], error
    else:
        assert line.startswith("error: argument 'Caf\\xe9") and line.endswith("(usage_error)"), line
    # Nothing was written: acme still has its one organization, and no tenant `cafe` exists.
    assert [o["slug"] for o in cli_json("org", "list", "--tenant", "acme", database_url=cli_db)["organizations"]] \
        == ["acme"]
    assert "cafe" not in subdomains(cli_db)


def test_migrate_names_a_prism_apps_entry_that_does_not_load(tmp_path: Path) -> None:
    with scratch_database(tmp_path, "apps_typo") as url:
        migrate_with_alembic(url)
        command.downgrade(alembic_config(url), BEFORE_APPS_ARE_LOADED)
        done = run_cli("migrate", "--json", database_url=url, PRISM_APPS="typo_pkg.handlers")
        assert TRACEBACK not in done.stderr, done.stderr[-600:]
        assert done.returncode == 1 and done.error["error"] == "invalid_setting", str(done)
        assert "PRISM_APPS entry 'typo_pkg.handlers'" in done.error["message"], str(done)
        assert database_revision(url) == BEFORE_APPS_ARE_LOADED  # nothing migrated
        cli_json("migrate", database_url=url)  # with the entry fixed, the same database migrates
        assert database_revision(url) == newest_revision()


LONG = "n" * 256


@pytest.mark.parametrize("args", [
    ("tenant", "create", "longname", "--name", LONG, "--admin-email", "l@long.example", "--admin-password",
     "password123"),
    ("tenant", "create", "longorg", "--name", "Long", "--org-name", LONG, "--admin-email", "l@long.example",
     "--admin-password", "password123"),
    ("org", "create", LONG, "--tenant", "acme"),
], ids=["tenant name", "first organization name", "organization name"])
def test_a_name_over_255_characters_is_refused_on_both_engines(cli_db: str, args: tuple[str, ...]) -> None:
    done = run_cli(*args, "--json", database_url=cli_db)
    assert done.returncode == 1 and done.error["error"] == "invalid_name", str(done)
    assert "256 characters long; at most 255" in done.error["message"], str(done)
    assert not {"longname", "longorg"} & subdomains(cli_db)
    assert [o["slug"] for o in cli_json("org", "list", "--tenant", "acme", database_url=cli_db)["organizations"]] \
        == ["acme"]


def test_a_name_of_255_characters_is_kept_whole(cli_db: str) -> None:
    name = "m" * 255
    cli_json("tenant", "create", "wide", "--name", name, "--admin-email", "w@wide.example", "--admin-password",
             "password123", database_url=cli_db)
    made = cli_json("org", "create", name.upper(), "--tenant", "wide", "--slug", "second", database_url=cli_db)
    assert made["name"] == name.upper()
    tenants = {t["subdomain"]: t["name"] for t in cli_json("tenant", "list", database_url=cli_db)["tenants"]}
    assert tenants["wide"] == name
    orgs = cli_json("org", "list", "--tenant", "wide", database_url=cli_db)["organizations"]
    assert [(o["slug"], o["name"]) for o in orgs] == [("m" * 63, name), ("second", name.upper())]


def subdomains(database_url: str) -> set[str]:
    return {t["subdomain"] for t in cli_json("tenant", "list", database_url=database_url)["tenants"]}
