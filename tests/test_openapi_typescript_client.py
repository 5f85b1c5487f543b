"""The TypeScript client's own suite (Node's test runner) against a running Prism.

Needs Node.js 18+ and `npm ci` in clients/typescript (TypeScript compiles the client and its tests).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from tests.factories import Factory
from tests.live_prism import LiveServer, live_prism_fixture, run_process  # noqa: F401 -- the fixture

CLIENT = Path(__file__).resolve().parent.parent / "clients" / "typescript"


async def test_typescript_client_suite_passes_against_a_running_prism(live_prism: LiveServer,
                                                                      factory: Factory) -> None:
    node = shutil.which("node")
    assert node, "Node.js 18+ is required for the TypeScript client's suite"
    tsc = CLIENT / "node_modules" / ".bin" / "tsc"
    assert tsc.exists(), "run `npm ci` in clients/typescript first"
    build = await run_process([str(tsc), "-p", str(CLIENT)], limit_seconds=300)
    assert build.returncode == 0, build.stdout + build.stderr
    ws = await factory.workspace()
    agent_key = await factory.add_key(ws, "agent")  # gets a persona holding vendor creation for review
    env = {**os.environ, "PRISM_URL": live_prism.base_url, "PRISM_OWNER_KEY": ws.keys["owner"],
           "PRISM_VIEWER_KEY": ws.keys["viewer"], "PRISM_OWNER_EMAIL": ws.emails["owner"], "PRISM_AGENT_KEY": agent_key}
    run = await run_process([node, "--test", "dist/test/"], cwd=CLIENT, env=env, limit_seconds=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "# fail 0" in run.stdout and "# pass 24" in run.stdout, run.stdout
    assert not live_prism.errors_logged()
