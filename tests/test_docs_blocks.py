"""Docs that work as written: every fenced block of README.md, docs/ and examples/ is checked.

Each block says what it is (its info string). `text` is a picture; `python`, `json` and `toml` must parse (a
snippet that compiles); `http` requests and `bash`/`sh` commands are run as a reader would — or are named in
NOT_RUN with the reason they cannot run here. A new block that is neither run nor named fails the walk.

The run starts where a reader starts: an empty directory, where docs/extending.md's block writes a handler
module that is installed nowhere and starts `prism serve` with it named in PRISM_APPS (the first start seeds the
demo and prints its key). Every other block then runs, in that directory, against that one server. The only
changes made to a block are the reader's placeholders: the printed key for `KEY=ck_...`, the server's address
for http://127.0.0.1:8000 (a port of its own: 8000 may be taken here), and the addresses of the two outside
services the docs talk to, both real HTTPS servers on loopback: docs/integrations.md's warehouse, which
implements the document's own warehouse.yaml strictly (tests/integrations_upstream.py), and docs/webhooks.md's
receiver. Reaching them takes the two settings an operator sets for services on a private network with a
private CA: PRISM_WEBHOOK_ALLOW_PRIVATE_NETWORKS and PRISM_WEBHOOK_CA_BUNDLE.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.integrations_upstream import RunningService, Scripted, SpecService
from tests.processes import clean_env, free_port
from tests.webhooks_receiver import RunningReceiver, make_tls

ROOT = Path(__file__).resolve().parent.parent
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "examples").glob("*.md"))]
FENCE = re.compile(r"^```(\S*)\s*$")
README_ADDRESS = "http://127.0.0.1:8000"

# Shell blocks run by test_the_docs_run_as_written: (file, first line of the block).
SERVE = ("docs/extending.md", "cat > parcel_quotes.py <<'EOF'")
PARCEL_QUOTE = ("docs/extending.md", "KEY=ck_...   # printed by `prism serve`")
README_CALLS = ("README.md", "KEY=ck_...   # printed by `bin/prism serve`")
OVERSIGHT_WALK = ("docs/governance.md", f"BASE={README_ADDRESS}")
INTEGRATION_WALK = ("docs/integrations.md", f"BASE={README_ADDRESS}")
WAREHOUSE_YAML = ("docs/integrations.md", "openapi: 3.0.3")  # the file the walk imports, as warehouse.yaml
WAREHOUSE_ADDRESS = "https://warehouse.example.com/v2"
LEDGER_PROOFS = ("examples/ledger_verifier.md", "prism audit public-key                                    # key id, "
                                                 "algorithm, base64 public key")
WEBHOOK_WALK = ("docs/webhooks.md", "KEY=ck_...   # printed by `prism serve`")
RECEIVER_ADDRESS = "https://hooks.example.com/prism"
OAUTH_REGISTRATION = ("docs/oauth.md", f"BASE={README_ADDRESS}")
RUN = {SERVE, PARCEL_QUOTE, README_CALLS, OVERSIGHT_WALK, INTEGRATION_WALK, LEDGER_PROOFS, WEBHOOK_WALK,
       OAUTH_REGISTRATION}
# Shell blocks that are not run here, each with its reason: they need a deployment this test does not start (the
# multi-node topology: root to install nginx, its ports, its CA and its prism.env on PostgreSQL) or they dump and
# restore such a deployment's database. Everything else is run.
NOT_RUN = {
    ("README.md", "bin/prism serve     # Prism on http://127.0.0.1:8000 — SQLite in ./prism.db, a demo tenant, "
                  "a printed key"): "`bin/prism` installs into .venv on first use and `bin/test` is this suite; "
                                    "tests/test_quickstart.py runs that first start in an empty directory, and "
                                    "docs/extending.md's `prism serve` block is the server every run block uses",
    ("docs/deploy.md", "apt-get install -y nginx-light"): "installs a Debian package as root, then starts the "
                                                          "two-node topology (deploy/topology.py), which "
                                                          "tests/test_deploy_topology.py brings up and checks",
    ("docs/deploy.md", "curl -s --cacert /tmp/prism-topology/tls/ca.pem https://127.0.0.1:59987/readyz"):
        "addresses the running topology: the port its nginx printed and the CA it made",
    ("docs/deploy.md", "curl -s http://127.0.0.1:37637/readyz"): "addresses a node of the running topology",
    ("docs/deploy.md", '(set -a; . ./prism.env; pg_dump --format=custom --file=prism.dump "$PRISM_DATABASE_URL")'):
        "dumps the PostgreSQL database of a deployment (the topology's prism.env)",
    ("docs/deploy.md", "(set -a; . ./prism.env; prism audit checkpoint --tenant demo --json > checkpoint.json)"):
        "reads a deployment's prism.env (the topology's)",
    ("docs/deploy.md", "createdb -h 127.0.0.1 -U postgres prism_restored"):
        "restores that dump into a database of a fixed name on the PostgreSQL server",
    ("docs/deploy.md", "(set -a; . ./prism.env; prism migrate --json)"): "migrates a deployment (its prism.env)",
}


@dataclass(frozen=True)
class Block:
    file: str
    line: int
    language: str
    text: str

    @property
    def key(self) -> tuple[str, str]:
        return self.file, self.text.splitlines()[0] if self.text else ""


def blocks() -> list[Block]:
    found: list[Block] = []
    for path in DOCUMENTS:
        lines = path.read_text().splitlines()
        start: tuple[int, str] | None = None
        for number, line in enumerate(lines, 1):
            fence = FENCE.match(line)
            if fence is None:
                continue
            if start is None:
                start = (number, fence.group(1))
            else:
                text = "\n".join(lines[start[0]:number - 1])
                found.append(Block(str(path.relative_to(ROOT)), start[0], start[1], text))
                start = None
        assert start is None, f"{path}: unclosed block at line {start}"
    return found


@pytest.mark.engine_independent
def test_every_block_says_what_it_is_and_parses_or_is_run() -> None:
    seen_shell: set[tuple[str, str]] = set()
    for block in blocks():
        where = f"{block.file}:{block.line}"
        assert block.language in ("text", "python", "json", "toml", "yaml", "http", "bash", "sh"), (
            where, block.language)
        if block.language == "python":
            compile(block.text, where, "exec")
        elif block.language == "json":
            json.loads(block.text)
        elif block.language == "toml":
            tomllib.loads(block.text)
        elif block.language == "yaml":
            yaml.safe_load(block.text)
        elif block.language in ("bash", "sh"):
            assert block.key in RUN or block.key in NOT_RUN, f"{where}: a command block neither run nor excused"
            assert block.key not in seen_shell, f"{where}: two command blocks of one file begin alike"
            seen_shell.add(block.key)
    assert seen_shell == RUN | set(NOT_RUN), "RUN and NOT_RUN name blocks that are gone"




def _documents(output: str) -> list[Any]:
    """The JSON documents a block printed one after the other (curl's bodies, the CLI's `--json` lines)."""
    decoder, out, at = json.JSONDecoder(), [], 0
    while at < len(output):
        if output[at].isspace():
            at += 1
            continue
        document, at = decoder.raw_decode(output, at)
        out.append(document)
    return out


def _stop(server: subprocess.Popen[bytes]) -> None:
    """End the process group this test started (bash and the server it runs), gracefully first."""
    if server.poll() is None:
        os.killpg(server.pid, signal.SIGTERM)
    try:
        server.wait(timeout=15)
    except subprocess.TimeoutExpired:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait(timeout=15)


def _serve(command: str, *, cwd: Path, env: dict[str, str]) -> tuple[subprocess.Popen[bytes], str, Path]:
    """Start the block's `prism serve` in the background and return it with the key its first start printed."""
    log = cwd / "serve.out"
    with log.open("w") as out:
        server = subprocess.Popen(["bash", "-euo", "pipefail", "-c", command], cwd=cwd, env=env, stdout=out,
                                  stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        found = re.search(r"^API key \(shown once\): (\S+)$", log.read_text(), re.M)
        if found:
            return server, found.group(1), log
        if server.poll() is not None:
            break
        time.sleep(0.1)
    _stop(server)
    raise AssertionError(f"prism serve printed no key within 60 s:\n{log.read_text()}")


async def _run(block: Block, *, substitutes: dict[str, str], cwd: Path, env: dict[str, str]) -> list[Any]:
    script = block.text
    for placeholder, value in substitutes.items():
        script = script.replace(placeholder, value)
    run = await asyncio.to_thread(subprocess.run, ["bash", "-euo", "pipefail", "-c", script], cwd=cwd, env=env,
                                  capture_output=True, text=True, timeout=60, check=False)
    assert run.returncode == 0, (block.file, block.line, run.stdout, run.stderr)
    return _documents(run.stdout)


def _succeeded(answer: Any) -> bool:
    return isinstance(answer, dict) and "error" not in answer and answer.get("success") is not False


@pytest.mark.engine_independent
async def test_the_docs_run_as_written(tmp_path: Path) -> None:
    by_key = {b.key: b for b in blocks() if b.language in ("bash", "sh", "yaml")}
    port = free_port()
    address = f"http://127.0.0.1:{port}"
    tls = make_tls(tmp_path)
    warehouse_yaml = by_key[WAREHOUSE_YAML].text
    warehouse = SpecService(yaml.safe_load(warehouse_yaml), base_path="/v2",
                            required_headers={"X-API-Key": "wh-live-key"})
    warehouse.script("getItem", Scripted(200, {"id": 7, "name": "pallet jack", "on_hand": 3}))
    # No other PRISM_* setting: the defaults a reader has (./prism.db, ./prism-secret.key). A script types
    # faster than a reader: the server notices the CLI's import within 0.2 s instead of 2 s.
    env = clean_env(PRISM_WEBHOOK_ALLOW_PRIVATE_NETWORKS="true", PRISM_WEBHOOK_CA_BUNDLE=str(tls.ca),
                    PRISM_INTEGRATIONS_REFRESH_SECONDS="0.2")
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"  # `prism`: the virtualenv's command
    serve = by_key[SERVE].text.rstrip()
    assert serve.endswith(" prism serve"), serve
    # The module is installed nowhere: without the PYTHONPATH the block sets, the start stops naming it.
    without = await asyncio.to_thread(
        subprocess.run, ["bash", "-euo", "pipefail", "-c", re.sub(r"PYTHONPATH=\S+ ", "", serve)], cwd=tmp_path,
        env=env, capture_output=True, text=True, timeout=60, check=False)
    assert without.returncode != 0 and "'parcel_quotes:app' cannot be loaded" in without.stderr, without
    upstream = RunningService(warehouse, tls)
    await upstream.start()
    hooks = RunningReceiver(tls)
    receiver = await hooks.start()
    try:
        server, key, log = await asyncio.to_thread(_serve, f"{serve} --port {port}", cwd=tmp_path, env=env)
    except BaseException:
        await upstream.stop()
        await hooks.stop()
        raise
    try:
        substitutes = {"KEY=ck_...": f"KEY={key}", README_ADDRESS: address, WAREHOUSE_ADDRESS: warehouse.url(),
                       RECEIVER_ADDRESS: receiver.url("/prism")}

        async def run(which: tuple[str, str]) -> list[Any]:
            return await _run(by_key[which], substitutes=substitutes, cwd=tmp_path, env=env)

        # The module in PRISM_APPS is importable only through PYTHONPATH, and its handler answers.
        [quote] = await run(PARCEL_QUOTE)
        assert quote == {"success": True, "data": {"price_cents": 950}, "tool_name": quote.get("tool_name")}, quote

        answers = await run(README_CALLS)
        assert len(answers) == by_key[README_CALLS].text.count("curl "), answers
        assert all(_succeeded(a) for a in answers), answers

        walk = await run(OVERSIGHT_WALK)
        assert [a.get("error") for a in walk] == [
            None, None, "oversight_required", "self_approval_forbidden", None, None, None, None,
            "oversight_request_used"], walk
        assert walk[6]["success"] is True and walk[6]["data"]["status"] == "approved", walk[6]
        assert _succeeded(walk[7]) and walk[7]["data"], walk[7]

        (tmp_path / "warehouse.yaml").write_text(warehouse_yaml)
        imported, connected, called = await run(INTEGRATION_WALK)
        assert (imported["name"], imported["handlers"]) == ("warehouse", 1), imported
        assert (connected["base_url"], connected["has_secret"]) == (warehouse.url(), True), connected
        assert called["result"]["isError"] is False, called
        assert json.loads(called["result"]["content"][0]["text"]) == {
            "success": True, "data": {"status": 200, "body": {"id": 7, "name": "pallet jack", "on_hand": 3}},
            "tool_name": "prism_integration_call"}, called
        assert [a.operation_id for a in warehouse.arrived] == ["getItem"] and not warehouse.invalid, warehouse.invalid

        # The auditor's verifier, handed over as one file, checks what the demo's CLI hands out.
        shutil.copy(ROOT / "examples" / "ledger_verifier.py", tmp_path)
        block = by_key[LEDGER_PROOFS]
        run_ = await asyncio.to_thread(subprocess.run, ["bash", "-euo", "pipefail", "-c", block.text], cwd=tmp_path,
                                       env=env, capture_output=True, text=True, timeout=60, check=False)
        assert run_.returncode == 0, (run_.stdout, run_.stderr)
        verdicts = [line for line in run_.stdout.splitlines() if line.startswith(("OK:", "FAILED:"))]
        assert len(verdicts) == block.text.count("python ledger_verifier.py"), run_.stdout
        assert all(v.startswith("OK:") for v in verdicts), run_.stdout

        # The webhook's test delivery reaches the receiver, signed with the secret shown once.
        created, queued, deliveries = await run(WEBHOOK_WALK)
        assert created["secret"].startswith("whk_secret_") and queued["is_test"] is True, (created, queued)
        assert deliveries["total"] == 1, deliveries
        [delivery] = await receiver.wait_for("/prism", 1, within=30)
        assert delivery.headers["x-governance-event"] == "governance.oversight.requested", delivery.headers
        stamp, signature = (part.split("=", 1)[1] for part in delivery.headers["x-governance-signature"].split(","))
        expected = hmac.new(created["secret"].encode(), f"{stamp}.".encode() + delivery.body, hashlib.sha256)
        assert hmac.compare_digest(signature, expected.hexdigest()), delivery.headers

        # A client registers itself and reads its registration back from the address it was given.
        metadata, registered, read_back = await run(OAUTH_REGISTRATION)
        assert metadata["issuer"] == address and "S256" in metadata["code_challenge_methods_supported"], metadata
        assert read_back["client_id"] == registered["client_id"] and read_back["client_name"] == "my agent", read_back

        for block in (b for b in blocks() if b.language == "http"):
            head, _, body = block.text.partition("\n\n")
            request_line, *header_lines = head.splitlines()
            method, path = request_line.split()[:2]
            headers = dict(line.split(": ", 1) for line in header_lines)
            headers["Authorization"] = f"Bearer {key}"
            async with httpx.AsyncClient(timeout=30) as client:
                r = await client.request(method, address + path, headers=headers, content=body.encode())
            assert r.is_success, (block.file, block.line, r.text)
    finally:
        try:
            await asyncio.to_thread(_stop, server)
        finally:
            await upstream.stop()
            await hooks.stop()
    assert server.returncode in (0, -signal.SIGTERM), await asyncio.to_thread(log.read_text)
