"""The master secret a process starts with is the deployment's: a command run away from the server's directory
makes no secret of its own (it would sign audit entries and seal secrets the deployment cannot verify or open), and
`prism serve` with another secret than the one that signed the audit log refuses to start."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.processes import TRACEBACK, CliResult, ServerPool, clean_env, prism_command, scratch_database

SECRET_FILE = "prism-secret.key"
OWNER = ("--admin-email", "owner@acme.example", "--admin-password", "a long enough password")


def prism(cwd: Path, url: str, *args: str, **settings: str) -> CliResult:
    """`prism *args --json` in `cwd` with the deployment's database URL and no secret setting but `settings`: the
    master secret is `prism-secret.key` in `cwd` unless they say otherwise."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PRISM_")}
    env.update(PRISM_DATABASE_URL=url, **settings)
    done = subprocess.run([*prism_command(), *args, "--json"], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=120, stdin=subprocess.DEVNULL, check=False)
    return CliResult(args, done.returncode, done.stdout, done.stderr)


def succeeds(result: CliResult) -> dict[str, object]:
    assert result.returncode == 0 and TRACEBACK not in result.stderr, str(result)
    out: dict[str, object] = result.json
    return out


@pytest.fixture
def deployment(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """A deployment migrated from its server directory (which then holds the master secret), with tenants `acme`
    and `globex`; its database URL set explicitly, as operators of a database server have it."""
    server_dir = tmp_path / "server"
    server_dir.mkdir()
    with scratch_database(server_dir, "deployment") as url:
        succeeds(prism(server_dir, url, "migrate"))
        for tenant in ("acme", "globex"):
            succeeds(prism(server_dir, url, "tenant", "create", tenant, "--name", tenant.title(), *OWNER))
        yield server_dir, url


def test_a_command_away_from_the_server_makes_no_secret_and_leaves_the_log_valid(
        deployment: tuple[Path, str], tmp_path: Path) -> None:
    server_dir, url = deployment
    home = tmp_path / "home"
    home.mkdir()
    for command in (("org", "create", "Ops Two", "--tenant", "acme"),
                    ("key", "create", "--tenant", "acme", "--email", "owner@acme.example"),
                    ("tenant", "create", "initech", "--name", "Initech", *OWNER),
                    ("audit", "seal"), ("audit", "public-key"),
                    ("audit", "retain", "--tenant", "acme", "--archive-dir", str(home))):
        refused = prism(home, url, *command)
        assert refused.returncode == 1 and TRACEBACK not in refused.stderr, str(refused)
        error = refused.error
        assert error["error"] == "invalid_setting", str(refused)
        assert str(home / SECRET_FILE) in error["message"] and "prism serve" in error["message"], error
        assert "PRISM_SECRET_KEY" in error["message"], error
    assert not (home / SECRET_FILE).exists()
    for tenant in ("acme", "globex"):  # neither tenant's log was written to under another secret
        assert succeeds(prism(server_dir, url, "audit", "verify", "--tenant", tenant))["valid"] is True
    assert [o["name"] for o in succeeds(prism(server_dir, url, "org", "list", "--tenant", "acme"))[
        "organizations"]] == ["Acme"]  # type: ignore[index]

    # Given the deployment's secret, the same command works from anywhere, and the log stays valid.
    with_secret = {"PRISM_SECRET_KEY_FILE": str(server_dir / SECRET_FILE)}
    succeeds(prism(home, url, "org", "create", "Ops Two", "--tenant", "acme", **with_secret))
    succeeds(prism(home, url, "key", "create", "--tenant", "acme", "--email", "owner@acme.example", **with_secret))
    assert not (home / SECRET_FILE).exists()
    assert succeeds(prism(server_dir, url, "audit", "verify", "--tenant", "acme"))["valid"] is True
    assert succeeds(prism(home, url, "audit", "verify", "--tenant", "globex", **with_secret))["valid"] is True


def test_migrate_makes_the_secret_where_the_deployment_starts(tmp_path: Path) -> None:
    with scratch_database(tmp_path, "first") as url:
        succeeds(prism(tmp_path, url, "migrate"))
        assert (tmp_path / SECRET_FILE).stat().st_mode & 0o777 == 0o600


def test_migrate_with_another_master_secret_than_the_logs_is_refused(
        deployment: tuple[Path, str], tmp_path: Path) -> None:
    """`migrate` may make a secret where it runs, but never seals a deployment's logs with one that is not the
    deployment's: run away from the server's directory, it is refused once it sees the logs' key."""
    server_dir, url = deployment
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    refused = prism(elsewhere, url, "migrate")
    assert refused.returncode == 1 and TRACEBACK not in refused.stderr, str(refused)
    assert refused.error["error"] == "invalid_setting" and "master secret" in refused.error["message"], str(refused)
    assert succeeds(prism(server_dir, url, "migrate"))["migrated"] is True
    for tenant in ("acme", "globex"):
        assert succeeds(prism(server_dir, url, "audit", "verify", "--tenant", tenant))["valid"] is True


def test_serve_with_another_master_secret_than_the_logs_refuses_to_start(
        deployment: tuple[Path, str], tmp_path: Path, server_pool: ServerPool) -> None:
    server_dir, url = deployment
    ours = succeeds(prism(server_dir, url, "audit", "public-key"))["key_id"]
    other_secret = "another deployment's secret, long enough for a key"
    theirs = succeeds(prism(server_dir, url, "audit", "public-key", PRISM_SECRET_KEY=other_secret))["key_id"]
    assert ours != theirs

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for settings in ({"PRISM_SECRET_KEY": other_secret}, {}):  # another secret; a new file made in another place
        refused = prism(elsewhere, url, "serve", "--host", "127.0.0.1", "--port", "0", "--no-seed-demo", **settings)
        assert refused.returncode == 1 and TRACEBACK not in refused.stderr, str(refused)
        assert refused.error["error"] == "invalid_setting", str(refused)
        assert ours in refused.error["message"] and "master secret" in refused.error["message"], str(refused)
    assert succeeds(prism(server_dir, url, "audit", "verify", "--tenant", "acme"))["valid"] is True

    # With the deployment's own secret it starts.
    server = server_pool.start("--no-seed-demo", env=clean_env(
        PRISM_DATABASE_URL=url, PRISM_SECRET_KEY_FILE=str(server_dir / SECRET_FILE)), cwd=elsewhere)
    assert server.proc.poll() is None
