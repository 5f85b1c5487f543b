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
    return with_stdin(database_url, "user", "set-password", *args, stdin=stdin)


def with_stdin(database_url: str, *args: str, stdin: str | None) -> CliResult:
    """`prism … --json`, with `stdin` piped in (None: no stdin at all, as from cron)."""
    command = [*prism_command(), *args, "--json"]
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


def user_rows(database_url: str, email: str) -> list[dict[str, object]]:
    return query(database_url, "SELECT password_hash FROM users WHERE email = :e", e=email)


def test_user_create_reads_the_password_from_stdin(pw_db: str) -> None:
    email = "stdin-user@passwords.example.com"
    done = with_stdin(pw_db, "user", "create", email, "--password-stdin", stdin=NEW_PASSWORD + "\n")
    assert done.returncode == 0, str(done)
    assert done.json["email"] == email and NEW_PASSWORD not in done.stdout
    assert verify_password(stored_hash(pw_db, email), NEW_PASSWORD)


def test_user_create_without_a_password_is_refused_and_creates_nobody(pw_db: str) -> None:
    email = "no-password@passwords.example.com"
    # No terminal to prompt on and no --password-stdin: refused instead of hanging or creating a user with "".
    assert refusal(with_stdin(pw_db, "user", "create", email, stdin=None)) == "password_required"
    assert refusal(with_stdin(pw_db, "user", "create", email, "--password", NEW_PASSWORD, "--password-stdin",
                              stdin=NEW_PASSWORD + "\n")) == "invalid_arguments"
    assert user_rows(pw_db, email) == []


def test_tenant_create_asks_no_password_of_an_existing_owner(pw_db: str) -> None:
    email = "existing-owner@passwords.example.com"
    cli_json("user", "create", email, "--password", NEW_PASSWORD, database_url=pw_db)
    before = stored_hash(pw_db, email)
    done = with_stdin(pw_db, "tenant", "create", "pwexisting", "--name", "Existing", "--admin-email", email,
                      stdin=None)
    assert done.returncode == 0, str(done)
    assert done.json["admin"]["existing_user"] is True
    assert stored_hash(pw_db, email) == before


def test_tenant_create_reads_a_new_owners_password_from_stdin(pw_db: str) -> None:
    email = "new-owner@passwords.example.com"
    # Without a password, a new owner cannot be made: nothing is created, not even the tenant.
    assert refusal(with_stdin(pw_db, "tenant", "create", "pwnew", "--name", "New", "--admin-email", email,
                              stdin=None)) == "password_required"
    assert query(pw_db, "SELECT id FROM tenants WHERE subdomain = 'pwnew'") == []
    done = with_stdin(pw_db, "tenant", "create", "pwnew", "--name", "New", "--admin-email", email,
                      "--admin-password-stdin", stdin=NEW_PASSWORD + "\n")
    assert done.returncode == 0, str(done)
    assert done.json["admin"]["existing_user"] is False
    assert verify_password(stored_hash(pw_db, email), NEW_PASSWORD)
