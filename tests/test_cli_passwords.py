"""`prism user set-password`: the password comes from a prompt or stdin, never from an argument."""

from __future__ import annotations

import json
import subprocess
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from prism.identity.passwords import verify_password
from prism.storage import Database
from tests.factories import Factory, Workspace
from tests.processes import TRACEBACK, CliResult, clean_env, cli_json, prism_command, query, scratch_database

NEW_PASSWORD = "a much longer passphrase"


@pytest.fixture(scope="module")
def pw_db(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with scratch_database(tmp_path_factory.mktemp("passwords"), "passwords") as url:
        cli_json("migrate", database_url=url)
        yield url


@pytest.fixture(scope="module")
async def pw_factory(pw_db: str) -> AsyncIterator[Factory]:
    db = Database(pw_db)
    try:
        yield Factory(db)
    finally:
        await db.dispose()


def set_password(database_url: str, *args: str, stdin: str | None) -> CliResult:
    """`prism user set-password … --json`, with `stdin` piped in (None: no stdin at all, as from cron)."""
    command = [*prism_command(), "user", "set-password", *args, "--json"]
    done = subprocess.run(command, input=stdin, capture_output=True, text=True, timeout=60, check=False,
                          env=clean_env(PRISM_DATABASE_URL=database_url),
                          stdin=subprocess.DEVNULL if stdin is None else None)
    return CliResult(tuple(args), done.returncode, done.stdout, done.stderr)


def stored_hash(database_url: str, email: str) -> str:
    rows = query(database_url, "SELECT password_hash FROM users WHERE email = :e", e=email)
    return str(rows[0]["password_hash"])


def refusal(result: CliResult) -> str:
    assert result.returncode == 1, str(result)
    assert result.stdout == "" and TRACEBACK not in result.stderr, str(result)
    [line] = result.stderr.strip().splitlines()
    body = json.loads(line)
    assert set(body) == {"error", "message"} and body["message"], body
    return str(body["error"])


async def test_set_password_from_stdin_replaces_the_hash(pw_db: str, pw_factory: Factory) -> None:
    ws: Workspace = await pw_factory.workspace(roles=("owner",))
    email = ws.emails["owner"]
    before = stored_hash(pw_db, email)
    done = set_password(pw_db, "--tenant", ws.tenant.subdomain, "--email", email, "--password-stdin",
                        stdin=NEW_PASSWORD + "\n")
    assert done.returncode == 0, str(done)
    assert json.loads(done.stdout) == {"user": email, "tenant": ws.tenant.subdomain, "password_set": True}
    after = stored_hash(pw_db, email)
    assert after != before and NEW_PASSWORD not in after
    assert verify_password(after, NEW_PASSWORD)


async def test_set_password_refusals_change_nothing(pw_db: str, pw_factory: Factory) -> None:
    ws = await pw_factory.workspace(roles=("owner",))
    other = await pw_factory.workspace(roles=("owner",))
    email = ws.emails["owner"]
    before = stored_hash(pw_db, email)
    sub = ws.tenant.subdomain
    assert refusal(set_password(pw_db, "--tenant", sub, "--email", email, "--password-stdin",
                                stdin="short\n")) == "weak_password"
    # A user of another tenant is not this tenant's to change.
    assert refusal(set_password(pw_db, "--tenant", other.tenant.subdomain, "--email", email, "--password-stdin",
                                stdin=NEW_PASSWORD + "\n")) == "not_a_member"
    assert refusal(set_password(pw_db, "--tenant", sub, "--email", "nobody@example.com", "--password-stdin",
                                stdin=NEW_PASSWORD + "\n")) == "user_not_found"
    # No terminal to prompt on and no --password-stdin: refused instead of hanging or reading nothing.
    assert refusal(set_password(pw_db, "--tenant", sub, "--email", email, stdin=None)) == "password_required"
    assert stored_hash(pw_db, email) == before


def test_set_password_takes_no_password_argument(tmp_path: Path) -> None:
    """A password on the command line would sit in the shell history and the process list."""
    done = subprocess.run([*prism_command(), "user", "set-password", "--help"], capture_output=True, text=True,
                          env=clean_env(), cwd=tmp_path, timeout=60, check=False)
    assert done.returncode == 0 and "--password-stdin" in done.stdout
    assert "--password " not in done.stdout and "--password\n" not in done.stdout
