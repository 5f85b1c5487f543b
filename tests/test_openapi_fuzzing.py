"""Contract fuzzing: schemathesis against both descriptors of a running Prism, with a key.

No 5xx, and every response conforming to the descriptor (status, content type, headers, body schema).
Bounded for CI: PRISM_FUZZ_MAX_EXAMPLES cases per operation (default 6), the phases in PRISM_FUZZ_PHASES
(default examples,fuzzing; add `coverage` for the exhaustive boundary and negative cases, which takes several
times longer), PRISM_FUZZ_SEED picks the run.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from pathlib import Path

import httpx
from openapi_spec_validator import validate

from tests.factories import Factory
from tests.live_prism import LiveServer, live_prism_fixture, run_process  # noqa: F401 -- the fixture

# Beyond the answers' conformance: input the descriptor forbids is refused (negative_data_rejection), and a
# method a path does not answer is 405 with an Allow header naming what it does (docs/architecture.md "Errors").
CHECKS = ("not_a_server_error,status_code_conformance,content_type_conformance,response_headers_conformance,"
          "response_schema_conformance,negative_data_rejection,unsupported_method,allow_header_conformance")
MAX_EXAMPLES = os.environ.get("PRISM_FUZZ_MAX_EXAMPLES", "6")
PHASES = os.environ.get("PRISM_FUZZ_PHASES", "examples,fuzzing")
SEED = os.environ.get("PRISM_FUZZ_SEED", "20241231")


async def _fuzz(schema_file: Path, base_url: str, key: str, report_dir: Path, *extra: str) -> None:
    schemathesis = shutil.which("schemathesis")
    assert schemathesis, "schemathesis is a dev dependency (pip install -e .[dev])"
    command = [
        schemathesis, "run", str(schema_file), "--url", base_url, "--header", f"Authorization: Bearer {key}",
        "--checks", CHECKS, "--phases", PHASES, "--max-examples", MAX_EXAMPLES,
        "--seed", SEED, "--workers", "1", "--request-timeout", "30", "--report", "junit",
        "--report-dir", str(report_dir), "--output-truncate", "false", *extra]
    # In the test's own directory: schemathesis keeps a cache folder where it runs.
    run = await run_process(command, cwd=report_dir.parent, env={**os.environ, "NO_COLOR": "1"}, limit_seconds=900)
    assert run.returncode == 0, f"schemathesis found problems:\n{run.stdout[-20000:]}\n{run.stderr[-4000:]}"


def _save(doc: dict[str, object], path: Path) -> Path:
    path.write_text(json.dumps(doc))
    return path


async def test_tenant_descriptor_holds_under_fuzzing(live_prism: LiveServer, factory: Factory,
                                                    tmp_path: Path) -> None:
    ws = await factory.workspace()
    key = ws.keys["owner"]
    response = await asyncio.to_thread(httpx.get, f"{live_prism.base_url}/.well-known/openapi.json", timeout=30,
                         headers={"Authorization": f"Bearer {key}"})
    doc = response.json()
    validate(doc)
    assert len(doc["paths"]) > 10
    await _fuzz(_save(doc, tmp_path / "tenant.json"), live_prism.base_url, key, tmp_path / "tenant-report")
    assert not live_prism.errors_logged()


async def test_developer_descriptor_holds_under_fuzzing(live_prism: LiveServer, factory: Factory,
                                                       tmp_path: Path) -> None:
    ws = await factory.workspace()
    key = ws.keys["owner"]
    response = await asyncio.to_thread(httpx.get, f"{live_prism.base_url}/.well-known/openapi.json", timeout=30,
                         headers={"Host": "portal.localhost"})
    doc = response.json()
    validate(doc)
    assert doc["openapi"] == "3.1.0"
    # The browser half of OAuth answers HTML pages and redirects a fuzzer cannot follow meaningfully.
    await _fuzz(_save(doc, tmp_path / "developer.json"), live_prism.base_url, key, tmp_path / "developer-report",
          "--exclude-operation-id", "authorize")
    assert not live_prism.errors_logged()
