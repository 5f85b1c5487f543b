"""A `prism serve` told to stop (SIGTERM) while an import compiles kills the compiling child at once and exits
within a second or two, its import answered 503 `server_stopping`. Before, the server waited for the compilation
to end (up to PRISM_INTEGRATION_COMPILE_SECONDS), as Uvicorn waits for every request in flight."""

from __future__ import annotations

import asyncio
import os
import signal
import time
import uuid
from pathlib import Path

import httpx
import pytest

from tests.description_server import Descriptions, descriptions_fixture  # noqa: F401 -- fixture
from tests.processes import Server, ServerPool, clean_env, scratch_database
from tests.webhooks_receiver import TlsFiles, make_tls

# One operation and two and a half million tiny items YAML must read one by one (what is not an operation is read,
# then ignored): about 11 s of compiling on an idle machine, far more than the stop may take, far less than
# COMPILE_SECONDS, and about 1 GB in the child.
SLOW = ('openapi: 3.0.3\ninfo: {title: Slow, version: "1"}\n'
        'paths: {/ping: {get: {operationId: ping, responses: {"200": {description: ok}}}}}\n'
        "x-filler: [" + ",".join(["0"] * 2_500_000) + "]\n")
COMPILE_SECONDS = "60"
STOPS_WITHIN_SECONDS = 4.0


@pytest.fixture(name="tls")
def tls_fixture(tmp_path: Path) -> TlsFiles:
    """The descriptions' certificate, which the server started here trusts (PRISM_WEBHOOK_CA_BUNDLE)."""
    return make_tls(tmp_path)


def _children(pid: int) -> list[int]:
    """Every child of `pid`, whichever of its threads started it (the kernel lists them per thread)."""
    children = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            children += [int(child) for child in (task / "children").read_text().split()]
        except FileNotFoundError:  # the thread ended meanwhile
            continue
    return children


def _compiling_children(server: Server) -> list[int]:
    """The children of the server's forkserver: the processes compiling its imports."""
    forkservers = [child for child in _children(server.proc.pid) if b"forkserver" in _command_line(child)]
    return [child for forkserver in forkservers for child in _children(forkserver)]


def _command_line(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as command:
            return command.read()
    except FileNotFoundError:
        return b""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.parametrize("told", ["server", "process_group"])
async def test_a_server_stopped_while_an_import_compiles_kills_the_child_and_exits_at_once(
        tmp_path: Path, server_pool: ServerPool, descriptions: Descriptions, tls: TlsFiles, told: str) -> None:
    """`process_group`: SIGTERM reaches every process of the server's group, as systemd's default stop sends it
    (KillMode=control-group) — the compiling child and the forkserver first, the worst order: a child the signal
    ended would have been answered as a description that failed to compile (400), not as the stop (503)."""
    descriptions.files["slow.yaml"] = SLOW
    with scratch_database(tmp_path, "compile_shutdown") as url:
        server = server_pool.start("--json", ready=False, env=clean_env(
            PRISM_DATABASE_URL=url, PRISM_SEED_DEMO="true", PRISM_WEBHOOK_WORKER_IN_PROCESS="false",
            PRISM_WEBHOOK_ALLOW_PRIVATE_NETWORKS="true", PRISM_WEBHOOK_CA_BUNDLE=str(tls.ca),
            PRISM_INTEGRATION_COMPILE_SECONDS=COMPILE_SECONDS))
        await asyncio.to_thread(server.wait_ready, 120)
        banner = await asyncio.to_thread(server.banner_json, 120)
        async with httpx.AsyncClient(base_url=server.base_url, timeout=120) as client:
            importing = asyncio.create_task(client.post(
                "/api/mcp/tools/prism_config_manage/",
                headers={"Authorization": f"Bearer {banner['api_key']}", "Host": "demo.localhost"},
                json={"app": "integrations", "entity": "integration", "operation": "importOpenapi",
                      "arguments": {"name": "slow_" + uuid.uuid4().hex[:8], "url": descriptions.url("slow.yaml")}}))
            deadline = time.monotonic() + 60
            while not (compiling := _compiling_children(server)):
                assert time.monotonic() < deadline and not importing.done(), \
                    (importing.done() and importing.result().text, server.describe())
                await asyncio.sleep(0.05)
            await asyncio.sleep(1)  # well into its compilation
            assert not importing.done(), importing.result().text
            started = time.monotonic()
            if told == "process_group":
                forkservers = [c for c in _children(server.proc.pid) if b"forkserver" in _command_line(c)]
                for pid in [*compiling, *forkservers]:
                    os.kill(pid, signal.SIGTERM)
            os.kill(server.proc.pid, signal.SIGTERM)
            while server.proc.poll() is None and time.monotonic() - started < 90:  # noqa: ASYNC110 -- a process
                await asyncio.sleep(0.05)
            took = time.monotonic() - started
            answer = await asyncio.wait_for(importing, 10)
    assert took < STOPS_WITHIN_SECONDS, (took, server.describe())
    assert answer.status_code == 503, answer.text
    assert answer.json()["error"] == "server_stopping", answer.text
    assert not [pid for pid in compiling if _alive(pid)], compiling
