"""Save-time lookups of receiver hosts run on threads of their own (prism.kit.outbound.LookupThreads): hosts
whose DNS servers never answer cannot take the event loop's default executor from everything else run there,
and once those threads are all taken a save is refused at once (503 resolver_busy).

The slow DNS is real: Prism's app runs (Uvicorn, asyncio's event loop) in a mount namespace of its own
(`unshare -m`) whose /etc/resolv.conf names a local DNS server that receives every query and answers none (a UDP
socket nobody reads), so each lookup holds its thread in the system resolver until its timeout. The machine's own
/etc/resolv.conf is untouched. What else waits on the default executor: a document upload's indexing
(`default_executor_probe`; password checks have a pool of their own, prism.identity.passwords).
"""

from __future__ import annotations

import asyncio
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from prism.kit.outbound import LOOKUPS_AT_ONCE, RESOLVE_WITHIN_SECONDS
from prism.storage import Database
from tests.factories import Factory, Workspace
from tests.processes import HOST, clean_env, free_port, prism_command, run_cli
from tests.webhooks_fixtures import BASE

DOCUMENT_OP = "/api/mcp/tools/prism_document_op/"

# How long the system resolver in the server's namespace waits for an answer that never comes.
RESOLVER_TIMEOUT_SECONDS = 20
# Saves naming a host that never resolves: more than the default executor's threads (min(32, cores + 4)) and
# more than the lookups' own threads.
HANGING_SAVES = max(LOOKUPS_AT_ONCE, min(32, (os.cpu_count() or 1) + 4)) + 4


@pytest.fixture(name="silent_dns")
def silent_dns_fixture() -> Iterator[str]:
    """The address of a DNS server that never answers: a UDP socket on port 53 of a loopback address, unread."""
    if shutil.which("unshare") is None:
        pytest.skip("unshare (util-linux) is not installed")
    address = f"127.{random.randint(1, 254)}.{random.randint(1, 254)}.53"
    server = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        server.bind((address, 53))
    except PermissionError:
        server.close()
        pytest.skip("binding port 53 needs root (or CAP_NET_BIND_SERVICE)")
    try:
        yield address
    finally:
        server.close()


def start_app_with_resolver(tmp_path: Path, nameserver: str, database_url: str,
                            **settings: str) -> tuple[subprocess.Popen[bytes], int]:
    """Prism's app under Uvicorn on asyncio's own event loop, whose `getaddrinfo` runs on the default executor
    (`prism serve` runs uvloop, whose lookups take libuv's threads instead: 4, starved the same way). `settings`:
    PRISM_* variables (by default no delivery worker in the process)."""
    port = free_port()
    return start_with_resolver(tmp_path, nameserver, database_url, [
        sys.executable, "-m", "uvicorn", "--factory", "prism.app:create_app", "--loop", "asyncio",
        "--host", HOST, "--port", str(port), "--log-level", "warning"], **settings), port


def start_with_resolver(tmp_path: Path, nameserver: str, database_url: str, command: list[str],
                        **settings: str) -> subprocess.Popen[bytes]:
    """`command` in a mount namespace whose /etc/resolv.conf names only `nameserver`."""
    resolv = tmp_path / "resolv.conf"
    resolv.write_text(f"nameserver {nameserver}\noptions timeout:{RESOLVER_TIMEOUT_SECONDS} attempts:1\n")
    env = clean_env(PRISM_DATABASE_URL=database_url, **{"PRISM_WEBHOOK_WORKER_IN_PROCESS": "false", **settings})
    # The bind mount is private to the new mount namespace (unshare's default propagation), gone with the process.
    wrapped = ["unshare", "-m", "sh", "-c", 'mount --bind "$0" /etc/resolv.conf && exec "$@"', str(resolv), *command]
    with (tmp_path / "app.err").open("wb") as stderr:
        return subprocess.Popen(wrapped, stdout=subprocess.DEVNULL, stderr=stderr, stdin=subprocess.DEVNULL,
                                env=env, cwd=tmp_path)


async def wait_ready(process: subprocess.Popen[bytes], port: int, tmp_path: Path) -> None:
    deadline = time.monotonic() + 60
    async with httpx.AsyncClient(base_url=f"http://{HOST}:{port}", timeout=1) as client:
        while time.monotonic() < deadline:
            if process.poll() is not None:
                err = (tmp_path / "app.err").read_text(errors="replace")
                if "mount" in err or "unshare" in err:
                    pytest.skip(f"no mount namespace here: {err.strip()[:200]}")
                raise AssertionError(f"the app exited ({process.returncode}):\n{err}")
            try:
                if (await client.get("/api/v1/dev/ping/")).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            await asyncio.sleep(0.1)
    raise AssertionError("the app did not answer within 60 s")



async def owner_workspace(database_url: str) -> Workspace:
    """A migrated SQLite database with a workspace whose owner holds a key."""
    migrated = run_cli("migrate", database_url=database_url)
    assert migrated.returncode == 0, migrated
    db = Database(database_url)
    try:
        return await Factory(db).workspace(roles=("owner",))
    finally:
        await db.dispose()


async def default_executor_probe(client: httpx.AsyncClient, ws: Workspace, waiting_on: str) -> float:
    """How long a document upload takes: its text is indexed on the event loop's default executor (Handler.prepare,
    `asyncio.to_thread`), the pool lookups on the loop's own resolver would fill. `waiting_on` names them."""
    began = time.monotonic()
    try:
        uploaded = await client.post(DOCUMENT_OP, headers=ws.headers(), timeout=15, json={
            "app": "documents", "entity": "document", "operation": "upload",
            "arguments": {"title": "probe", "content": "a few words to index"}})
    except httpx.ReadTimeout:
        pytest.fail(f"a document upload waited over 15 s behind {waiting_on}")
    assert uploaded.status_code == 200, uploaded.text
    return time.monotonic() - began

@pytest.mark.engine_independent
async def test_saves_naming_hosts_whose_dns_never_answers_leave_the_default_executor_free(
        silent_dns: str, tmp_path: Path) -> None:
    database_url = f"sqlite:///{tmp_path / 'prism.db'}"
    ws = await owner_workspace(database_url)
    process, port = start_app_with_resolver(tmp_path, silent_dns, database_url)
    try:
        await wait_ready(process, port, tmp_path)
        async with httpx.AsyncClient(base_url=f"http://{HOST}:{port}", timeout=60) as client:

            async def save(index: int) -> tuple[float, httpx.Response]:
                began = time.monotonic()
                answer = await client.post(BASE, headers=ws.headers(), json={
                    "name": "silent", "url": f"https://h{index}.silent-dns.test/hook"})
                return time.monotonic() - began, answer

            alone = await default_executor_probe(client, ws, "save-time DNS lookups")
            saves = [asyncio.create_task(save(index)) for index in range(HANGING_SAVES)]
            await asyncio.sleep(1.0)  # every save has reached its lookup (or been refused)
            during = await default_executor_probe(client, ws, "save-time DNS lookups")
            assert during < alone + 3, f"an upload took {during:.1f} s during the lookups ({alone:.1f} s alone)"
            answers = await asyncio.gather(*saves)
        busy = [(took, a) for took, a in answers if a.status_code == 503]
        timed_out = [a for _, a in answers if a.status_code == 400]
        assert len(busy) == HANGING_SAVES - LOOKUPS_AT_ONCE and len(timed_out) == LOOKUPS_AT_ONCE, \
            [(a.status_code, a.text) for _, a in answers]
        for took, refused in busy:  # at once, not after a lookup's time limit, and saying when to try again
            assert refused.json()["error"] == "resolver_busy" and refused.headers["Retry-After"] == "5", refused.text
            assert took < RESOLVE_WITHIN_SECONDS, f"refused after {took:.1f} s"
        for refused in timed_out:
            assert refused.json()["error"] == "invalid_arguments", refused.text
            assert f"did not resolve within {RESOLVE_WITHIN_SECONDS:g} s" in refused.json()["message"], refused.text
    finally:
        process.terminate()
        try:
            process.wait(timeout=RESOLVER_TIMEOUT_SECONDS + 10)  # exit joins the lookup threads still running
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


@pytest.mark.engine_independent
async def test_a_lookup_that_never_answers_does_not_hold_up_the_process_exit(silent_dns: str, tmp_path: Path) -> None:
    """A save's lookup given up (at RESOLVE_WITHIN_SECONDS) keeps its thread in the system resolver; a process
    stopped meanwhile exits at once rather than waiting for it. Here `prism serve` stopped with Ctrl-C (SIGINT),
    which ends as a process does, waiting for the threads that are not daemons (as `prism worker` does on SIGTERM)."""
    database_url = f"sqlite:///{tmp_path / 'prism.db'}"
    ws = await owner_workspace(database_url)
    port = free_port()
    process = start_with_resolver(tmp_path, silent_dns, database_url,
                                  [*prism_command(), "serve", "--host", HOST, "--port", str(port)])
    try:
        await wait_ready(process, port, tmp_path)
        async with httpx.AsyncClient(base_url=f"http://{HOST}:{port}", timeout=60) as client:
            refused = await client.post(BASE, headers=ws.headers(), json={
                "name": "silent", "url": "https://never.silent-dns.test/hook"})
        assert f"did not resolve within {RESOLVE_WITHIN_SECONDS:g} s" in refused.json()["message"], refused.text
        started = time.monotonic()
        process.send_signal(signal.SIGINT)  # the lookup has RESOLVER_TIMEOUT_SECONDS - RESOLVE_WITHIN_SECONDS left
        await asyncio.to_thread(process.wait, RESOLVER_TIMEOUT_SECONDS + 10)
        took = time.monotonic() - started
        assert took < 4, f"the process took {took:.1f} s to exit"
        assert process.returncode == 0, (tmp_path / "app.err").read_text(errors="replace")
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)
