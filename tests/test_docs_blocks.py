"""Docs that work as written: every fenced block of README.md, docs/ and examples/ is checked.

Each block says what it is (its info string). `text` is a picture; `python`, `json` and `toml` must parse (a
snippet that compiles); `http` requests and `bash`/`sh` commands are run against a live Prism — or are named in
NOT_RUN with the reason they cannot run here. A new block that is neither run nor named fails the walk.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import tomllib
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.factories import Factory
from tests.live_prism import LiveServer, live_prism_fixture  # noqa: F401 -- the fixture

ROOT = Path(__file__).resolve().parent.parent
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "examples").glob("*.md"))]
FENCE = re.compile(r"^```(\S*)\s*$")
README_ADDRESS = "http://127.0.0.1:8000"

# Shell blocks run against the live server by this module: (file, first line of the block).
RUN = {("README.md", 'KEY=ck_...   # printed by `bin/prism serve`')}
# Shell blocks that are not run here, each with its reason: they operate a deployment (nginx, its prism.env,
# pg_dump of its database) or install third-party software.
NOT_RUN = {
    ("README.md", "bin/prism serve     # Prism on http://127.0.0.1:8000 — SQLite in ./prism.db, a demo tenant, "
                  "a printed key"): "the first start itself: tests/test_quickstart.py runs it in an empty directory;"
                                    " `bin/test` is this suite",
    ("docs/deploy.md", "apt-get install -y nginx-light"): "installs nginx; the topology it starts is "
                                                          "tests/test_deploy_topology.py's",
    ("docs/deploy.md", "curl -s --cacert /tmp/prism-topology/tls/ca.pem https://127.0.0.1:59987/readyz"):
        "addresses the running topology (its port and CA)",
    ("docs/deploy.md", "curl -s http://127.0.0.1:37637/readyz"): "addresses the running topology",
    ("docs/deploy.md", '(set -a; . ./prism.env; pg_dump --format=custom --file=prism.dump "$PRISM_DATABASE_URL")'):
        "backs up a deployment's database (its prism.env)",
    ("docs/deploy.md", "(set -a; . ./prism.env; prism audit checkpoint --tenant demo --json > checkpoint.json)"):
        "a deployment's prism.env",
    ("docs/deploy.md", "createdb -h 127.0.0.1 -U postgres prism_restored"): "restores a deployment's backup",
    ("docs/deploy.md", "(set -a; . ./prism.env; prism migrate --json)"): "a deployment's prism.env",
    ("docs/mcp.md", "npm install --prefix .cache/mcp-inspector --no-save --no-package-lock \\"):
        "installs the MCP Inspector from npm; tests/test_mcp_clients.py drives it",
    ("examples/ledger_verifier.md", "prism audit public-key                                    # key id, "
                                    "algorithm, base64 public key"): "needs a tenant `acme` with a long log; "
                                                                    "tests/test_ledger_proofs.py runs the verifier",
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
        assert block.language in ("text", "python", "json", "toml", "http", "bash", "sh"), (where, block.language)
        if block.language == "python":
            compile(block.text, where, "exec")
        elif block.language == "json":
            json.loads(block.text)
        elif block.language == "toml":
            tomllib.loads(block.text)
        elif block.language in ("bash", "sh"):
            assert block.key in RUN or block.key in NOT_RUN, f"{where}: a command block neither run nor excused"
            seen_shell.add(block.key)
    assert seen_shell == RUN | set(NOT_RUN), "RUN and NOT_RUN name blocks that are gone"


def _documents(output: str) -> list[object]:
    """The JSON documents curl printed one after the other (bodies carry no newline)."""
    decoder, out, at = json.JSONDecoder(), [], 0
    while at < len(output):
        if output[at].isspace():
            at += 1
            continue
        document, at = decoder.raw_decode(output, at)
        out.append(document)
    return out


async def test_the_readme_calls_work_as_printed(live_prism: LiveServer, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    [block] = [b for b in blocks() if b.key in RUN]
    script = block.text.replace("KEY=ck_...", f"KEY={ws.keys['owner']}").replace(README_ADDRESS, live_prism.base_url)
    run = await asyncio.to_thread(subprocess.run, ["bash", "-euo", "pipefail", "-c", script], capture_output=True,
                                  text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    answers = _documents(run.stdout)
    assert len(answers) == block.text.count("curl "), run.stdout
    for answer in answers:
        assert isinstance(answer, dict) and "error" not in answer and answer.get("success") is not False, answer


async def test_the_http_examples_work_as_printed(live_prism: LiveServer, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    for block in (b for b in blocks() if b.language == "http"):
        head, _, body = block.text.partition("\n\n")
        request_line, *header_lines = head.splitlines()
        method, path = request_line.split()[:2]
        headers = dict(line.split(": ", 1) for line in header_lines)
        headers["Authorization"] = f"Bearer {ws.keys['owner']}"
        async with httpx.AsyncClient(base_url=live_prism.base_url, timeout=30) as client:
            r = await client.request(method, path, headers=headers, content=body.encode())
        assert r.is_success, (block.file, block.line, r.text)
