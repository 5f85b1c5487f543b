"""Running Prism as real processes in tests: the `prism` CLI, `prism serve`, throwaway databases.

Every process started here is stopped by the caller's fixture (see `ServerPool.stop_all`), and every
throwaway PostgreSQL database is dropped by the context manager that created it.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import secrets
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import httpx
from sqlalchemy import text
from sqlalchemy.engine import make_url

from prism.storage import one_shot_engine

T = TypeVar("T")
HOST = "127.0.0.1"
TRACEBACK = "Traceback (most recent call last)"


# --- the CLI -------------------------------------------------------------------------------------

def prism_command() -> list[str]:
    """The installed `prism` script next to this interpreter, else the same entry point through -c."""
    script = Path(sys.executable).with_name("prism")
    if script.exists():
        return [str(script)]
    return [sys.executable, "-c", "import sys; from prism.cli.main import main; sys.argv[0] = 'prism'; main()"]


# One master secret for every process a test run starts (processes must agree on it: sessions, cookies),
# kept out of the working directory.
TEST_SECRET_KEY_FILE = Path(tempfile.mkdtemp(prefix="prism-test-secret-")) / "prism-secret.key"
# Written now: only `serve` and `migrate` create a missing secret file, and a test may start with another command.
TEST_SECRET_KEY_FILE.write_text(secrets.token_urlsafe(48))
TEST_SECRET_KEY_FILE.chmod(0o600)


def clean_env(**settings: str) -> dict[str, str]:
    """The current environment without any PRISM_* variable, plus `settings` (already prefixed)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PRISM_")}
    env["PRISM_SECRET_KEY_FILE"] = str(TEST_SECRET_KEY_FILE)
    env.update(settings)
    return env


@dataclass(frozen=True)
class CliResult:
    args: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str

    @property
    def json(self) -> Any:
        try:
            return json.loads(self.stdout)
        except ValueError as exc:
            raise AssertionError(f"prism {' '.join(self.args)} printed no JSON:\n{self}") from exc

    @property
    def error(self) -> Any:
        """The one JSON line `--json` prints on stderr for an error (stdout stays empty)."""
        lines = self.stderr.strip().splitlines()
        if self.stdout or len(lines) != 1:
            raise AssertionError(f"prism {' '.join(self.args)} printed no one-line JSON error:\n{self}")
        return json.loads(lines[0])

    def __str__(self) -> str:
        return f"exit {self.returncode}\n--- stdout\n{self.stdout}\n--- stderr\n{self.stderr}"


def run_cli(*args: str, database_url: str | None, cwd: Path | None = None, timeout: float = 60,
            **settings: str) -> CliResult:
    """Run `prism *args` to completion with a clean environment pointing at `database_url`."""
    env = clean_env(**settings)
    if database_url is not None:
        env["PRISM_DATABASE_URL"] = database_url
    done = subprocess.run([*prism_command(), *args], capture_output=True, text=True, env=env, cwd=cwd,
                          timeout=timeout, stdin=subprocess.DEVNULL, check=False)
    return CliResult(tuple(args), done.returncode, done.stdout, done.stderr)


def cli_json(*args: str, database_url: str, **settings: str) -> Any:
    """Run a command that must succeed with `--json` and return its parsed output."""
    result = run_cli(*args, "--json", database_url=database_url, **settings)
    assert result.returncode == 0, str(result)
    assert TRACEBACK not in result.stderr, str(result)
    return result.json


# --- servers -------------------------------------------------------------------------------------

def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        port: int = s.getsockname()[1]
        return port


class Server:
    """One `prism serve` process; its stdout and stderr go to files so nothing ever blocks on a pipe."""

    def __init__(self, args: list[str], *, env: dict[str, str], cwd: Path, log_dir: Path) -> None:
        self.port = free_port()
        self.base_url = f"http://{HOST}:{self.port}"
        name = f"serve-{self.port}-{uuid.uuid4().hex[:6]}"
        self.stdout_path = log_dir / f"{name}.out"
        self.stderr_path = log_dir / f"{name}.err"
        with self.stdout_path.open("wb") as out, self.stderr_path.open("wb") as err:
            self.proc = subprocess.Popen([*prism_command(), "serve", "--host", HOST, "--port", str(self.port), *args],
                                         stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=env, cwd=cwd)

    @property
    def stdout(self) -> str:
        return self.stdout_path.read_text(errors="replace")

    @property
    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def describe(self) -> str:
        return f"prism serve on {self.base_url} (exit {self.proc.poll()})\n--- stdout\n{self.stdout}\n" \
               f"--- stderr\n{self.stderr}"

    def _wait_for(self, what: str, probe: Callable[[], T | None], timeout: float) -> T:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = probe()
            if found is not None:
                return found
            if self.proc.poll() is not None:
                found = probe()
                if found is not None:
                    return found
                raise AssertionError(f"server exited before {what}:\n{self.describe()}")
            time.sleep(0.05)
        raise AssertionError(f"no {what} within {timeout} s:\n{self.describe()}")

    def banner_json(self, timeout: float = 30) -> dict[str, Any]:
        """The JSON object `prism serve --json` prints first (it may span several lines)."""

        def probe() -> dict[str, Any] | None:
            out, decoder, at = self.stdout, json.JSONDecoder(), 0
            while True:  # the first object that is not one of the server's log lines (docs/operations.md "Logs")
                while at < len(out) and out[at].isspace():
                    at += 1
                try:
                    value, at = decoder.raw_decode(out, at)
                except ValueError:
                    return None
                assert isinstance(value, dict), out
                if "logger" not in value:
                    return value

        return self._wait_for("JSON banner", probe, timeout)

    def banner_text(self, pattern: str, timeout: float = 30) -> re.Match[str]:
        """Wait until stdout matches `pattern` (multiline) and return the match."""
        return self._wait_for(f"banner line {pattern!r}", lambda: re.search(pattern, self.stdout, re.M), timeout)

    def wait_ready(self, timeout: float = 30) -> None:
        def probe() -> bool | None:
            try:
                return httpx.get(f"{self.base_url}/api/v1/dev/ping/", timeout=1).status_code == 200 or None
            except httpx.TransportError:
                return None

        self._wait_for("answer on /api/v1/dev/ping/", probe, timeout)
        # Whoever answered must be this process (not another one that took the port first).
        assert self.proc.poll() is None, self.describe()

    def stop(self) -> int:
        """SIGTERM (Uvicorn shuts down gracefully), then SIGKILL if it does not exit in time."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=15)
        return self.proc.returncode


class ServerPool:
    """Starts servers and remembers them, so a fixture finalizer can always stop every one."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.started: list[Server] = []

    def start(self, *args: str, env: dict[str, str], cwd: Path | None = None, ready: bool = True) -> Server:
        server = Server(list(args), env=env, cwd=cwd or self.log_dir, log_dir=self.log_dir)
        self.started.append(server)
        if ready:
            server.wait_ready()
        return server

    def stop_all(self) -> None:
        errors = []
        for server in self.started:
            try:
                server.stop()
            except Exception as exc:  # keep stopping the others
                errors.append(exc)
        if errors:
            raise errors[0]


# --- databases -----------------------------------------------------------------------------------

def _in_thread(make: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run a coroutine to completion on its own loop, whether or not the caller is inside one."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = asyncio.run(make())
        except BaseException as exc:
            box["error"] = exc

    worker = threading.Thread(target=target)
    worker.start()
    worker.join()
    if "error" in box:
        raise box["error"]
    value: T = box["value"]
    return value


def query(url: str, sql: str, **params: Any) -> list[dict[str, Any]]:
    """Run one SQL statement in its own committed transaction; rows as dicts (empty for writes)."""

    async def run() -> list[dict[str, Any]]:
        engine = one_shot_engine(url)
        try:
            async with engine.begin() as conn:
                result = await conn.execute(text(sql), params)
                return [dict(r) for r in result.mappings()] if result.returns_rows else []
        finally:
            await engine.dispose()

    return _in_thread(run)


def postgres_test_url() -> str | None:
    """PRISM_TEST_DATABASE_URL when it names PostgreSQL, else None (the SQLite run)."""
    url = os.environ.get("PRISM_TEST_DATABASE_URL", "")
    return url if url and make_url(url).get_backend_name() == "postgresql" else None


def _admin_dsn(url: str) -> str:
    return make_url(url).set(drivername="postgresql", database="postgres").render_as_string(hide_password=False)


async def _postgres_admin(url: str, statement: str) -> None:
    import asyncpg

    conn = await asyncpg.connect(_admin_dsn(url), timeout=10)
    try:
        await conn.execute(statement)
    finally:
        await conn.close()


@contextmanager
def scratch_database(tmp_dir: Path, label: str = "prism") -> Iterator[str]:
    """An empty database of the engine under test: a SQLite file in `tmp_dir`, or (when
    PRISM_TEST_DATABASE_URL names PostgreSQL) a throwaway PostgreSQL database, dropped on exit."""
    pg = postgres_test_url()
    if pg is None:
        yield f"sqlite:///{tmp_dir / f'{label}.db'}"
        return
    name = f"prism_{label}_{uuid.uuid4().hex[:10]}"
    _in_thread(lambda: _postgres_admin(pg, f'CREATE DATABASE "{name}"'))
    try:
        yield make_url(pg).set(drivername="postgresql", database=name).render_as_string(hide_password=False)
    finally:
        _in_thread(lambda: _postgres_admin(pg, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
