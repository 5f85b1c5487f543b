"""A real HTTPS service on loopback that implements an OpenAPI description strictly, for the integration tests.

It is generated from the description itself, independently of Prism's compiler: it finds the operation by
method and path template, then checks every request against the raw description — path, query and header
parameters (converted from text by their schema), required parameters, the credential, and the JSON body
against its schema with the document's own `$ref`s resolved by `referencing`. A request that does not fit is
answered 400 with what was wrong and counted in `invalid`; tests assert there are none. A valid request gets
the answer scripted for its operationId, else an echo of what arrived with the operation's first 2xx status.
"""

from __future__ import annotations

import asyncio
import re
import socket
from collections import defaultdict, deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, quote, unquote

import orjson
import pytest
import uvicorn
from jsonschema import Draft202012Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012
from sqlalchemy import delete, select
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from prism.config import Settings
from prism.integrations.models import IntegrationApp
from prism.integrations.runtime import bump_generation, runtime_of
from prism.storage import Database
from tests.webhooks_receiver import TlsFiles, make_tls

METHODS = ("get", "put", "post", "delete", "patch", "head", "options")


@dataclass
class Arrived:
    operation_id: str
    method: str
    path: str
    query: list[tuple[str, str]]
    headers: dict[str, str]
    body: Any


@dataclass
class Scripted:
    status: int
    body: Any = None
    delay: float = 0.0


@dataclass
class SpecService:
    document: dict[str, Any]
    base_path: str = ""
    required_headers: dict[str, str] = field(default_factory=dict)
    # Query parameters every request must carry that no operation declares: a key written into the base URL.
    required_query: dict[str, str] = field(default_factory=dict)
    arrived: list[Arrived] = field(default_factory=list)
    invalid: list[str] = field(default_factory=list)
    scripts: dict[str, deque[Scripted]] = field(default_factory=lambda: defaultdict(deque))
    port: int = 0

    def __post_init__(self) -> None:
        self.registry: Registry[Any] = Registry().with_resource(
            "urn:spec", Resource.from_contents(self.document, default_specification=DRAFT202012))
        self.routes: list[tuple[re.Pattern[str], list[str], str, str]] = []
        # Templates with more literal text first: /repos/{owner}/{repo}/git/refs before /repos/{owner}/{repo}/{x}.
        for template in sorted(self.document["paths"], key=lambda t: -len(re.sub(r"\{[^}]*\}", "", t))):
            names = re.findall(r"\{([^}]+)\}", template)
            pattern = re.sub(r"\\\{[^}]*\\\}", "([^/]+)", re.escape(template))
            self.routes.append((re.compile(f"^{pattern}$"), names, template, _pointer("paths", template)))

    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}{self.base_path}"

    def script(self, operation_id: str, *answers: Scripted) -> None:
        self.scripts[operation_id].extend(answers)

    def _validator(self, pointer: str) -> Draft202012Validator:
        return Draft202012Validator({"$ref": f"urn:spec#{pointer}"}, registry=self.registry)

    def _deref(self, node: Any) -> Any:
        while isinstance(node, dict) and "$ref" in node:
            node = self.registry.resolver().lookup("urn:spec" + node["$ref"]).contents
        return node

    def _operation(self, method: str, path: str) -> tuple[str, dict[str, Any], dict[str, str], str] | None:
        for pattern, names, template, pointer in self.routes:
            found = pattern.match(path)
            item = self.document["paths"][template]
            if found and isinstance(item.get(method), dict):
                values = {n: unquote(v) for n, v in zip(names, found.groups(), strict=True)}
                return template, item, values, pointer + "/" + method
        return None

    # OAuth 2 client credentials: POST /oauth/token with these (client id, secret) issues `access_token`.
    oauth_client: tuple[str, str] | None = None
    access_token: str = "at-" + "0" * 24
    tokens_issued: int = 0

    async def token(self, request: Request) -> Response:
        form = dict(parse_qsl((await request.body()).decode()))
        if self.oauth_client is None or form.get("grant_type") != "client_credentials" or (
                form.get("client_id"), form.get("client_secret")) != self.oauth_client:
            return _json(401, {"error": "invalid_client"})
        self.tokens_issued += 1
        return _json(200, {"access_token": self.access_token, "token_type": "Bearer", "expires_in": 3600})

    async def handle(self, request: Request) -> Response:
        # The path as sent (Starlette's url.path has %2F decoded into a separator).
        method, path = request.method.lower(), request.scope["raw_path"].decode("latin-1").split("?", 1)[0]
        if not path.startswith(self.base_path):
            return self._invalid(f"path {path} outside {self.base_path}")
        found = self._operation(method, path[len(self.base_path):] or "/")
        if found is None:
            return self._invalid(f"no operation {method.upper()} {path}")
        template, item, path_values, pointer = found
        operation = item[method]
        problems: list[str] = []
        for name, value in self.required_headers.items():
            if request.headers.get(name) != value:
                problems.append(f"credential header {name} missing or wrong")
        query = parse_qsl(request.url.query, keep_blank_values=True)
        for name, value in self.required_query.items():
            if (name, value) not in query:
                problems.append(f"query parameter {name} of the base URL missing or wrong")
        query = [(k, v) for k, v in query if k not in self.required_query]
        declared = [(raw, f"{_pointer('paths', template)}/parameters/{i}")
                    for i, raw in enumerate(item.get("parameters") or [])]
        declared += [(raw, f"{pointer}/parameters/{i}") for i, raw in enumerate(operation.get("parameters") or [])]
        seen: set[str] = set()
        for raw, at in declared:
            parameter = self._deref(raw)
            where, name = parameter["in"], parameter["name"]
            seen.add(f"{where}:{name}")
            schema = self._deref(parameter.get("schema") or {})
            if where == "path":
                values = [path_values.get(name)]
            elif where == "query":
                values = [v for k, v in query if k == name]
            elif where == "header":
                values = [request.headers[name]] if name in request.headers else []
            else:
                continue
            if not values or values == [None]:
                if where == "path" or parameter.get("required"):
                    problems.append(f"{where} parameter {name} missing")
                continue
            typed = [_convert(v, schema.get("items", {}) if schema.get("type") == "array" else schema)
                     for v in values]
            value: Any = typed if schema.get("type") == "array" else typed[0]
            param_pointer = (raw["$ref"][1:] if "$ref" in raw else at) + "/schema"
            problems += [f"{where} {name}: {e.message}" for e in self._validator(param_pointer).iter_errors(value)]
        for key, _ in query:
            if f"query:{key}" not in seen:
                problems.append(f"unknown query parameter {key}")
        body: Any = None
        raw_body = await request.body()
        request_body = self._deref(operation.get("requestBody")) if operation.get("requestBody") else None
        if request_body is not None:
            if not raw_body:
                if request_body.get("required"):
                    problems.append("request body missing")
            elif "application/json" in request_body["content"]:
                if not request.headers.get("content-type", "").startswith("application/json"):
                    problems.append("request body is not declared as JSON")
                try:
                    body = orjson.loads(raw_body)
                except orjson.JSONDecodeError:
                    problems.append("request body is not JSON")
                else:
                    body_pointer = f"{pointer}/requestBody/content/application~1json/schema"
                    if "$ref" in operation["requestBody"]:
                        body_pointer = operation["requestBody"]["$ref"][1:] + "/content/application~1json/schema"
                    problems += [f"body: {e.message}" for e in self._validator(body_pointer).iter_errors(body)]
        elif raw_body:
            problems.append("a body was sent to an operation that takes none")
        if problems:
            return self._invalid("; ".join(problems))
        operation_id = operation.get("operationId") or f"{method} {template}"
        self.arrived.append(Arrived(operation_id, method.upper(), path, query, dict(request.headers), body))
        queued = self.scripts.get(operation_id)
        if queued:
            answer = queued.popleft()
            if answer.delay:
                await asyncio.sleep(answer.delay)
            return _json(answer.status, answer.body)
        status = next((int(code) for code in operation.get("responses", {}) if str(code).startswith("2")), 200)
        if status == 204:
            return Response(status_code=204)
        return _json(status, {"operationId": operation_id, "path": path, "query": query, "body": body})

    def _invalid(self, message: str) -> Response:
        self.invalid.append(message)
        return _json(400, {"message": message})

    def app(self) -> Starlette:
        return Starlette(routes=[Route("/oauth/token", self.token, methods=["POST"]),
                                 Route("/{path:path}", self.handle, methods=[m.upper() for m in METHODS])])


def _pointer(*parts: str) -> str:
    return "/" + "/".join(quote(p.replace("~", "~0").replace("/", "~1"), safe="~") for p in parts)


def _json(status: int, body: Any) -> Response:
    """`body` as JSON; bytes go as they are (an answer orjson would not write, nested past its limit)."""
    return Response(body if isinstance(body, bytes) else orjson.dumps(body), status_code=status,
                    media_type="application/json")


def _convert(text: str | None, schema: dict[str, Any]) -> Any:
    kind = schema.get("type")
    try:
        if kind == "integer":
            return int(text or "")
        if kind == "number":
            return float(text or "")
    except ValueError:
        return text
    if kind == "boolean":
        return {"true": True, "false": False}.get(text or "", text)
    return text


class RunningService:
    """The service on a loopback port over HTTPS (certificate from the tests' throw-away CA)."""

    def __init__(self, service: SpecService, tls: TlsFiles) -> None:
        self.service = service
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        self.sock = sock
        service.port = sock.getsockname()[1]
        self.server = uvicorn.Server(uvicorn.Config(service.app(), ssl_certfile=str(tls.cert),
                                                    ssl_keyfile=str(tls.key), log_level="error", lifespan="off",
                                                    timeout_graceful_shutdown=1))
        self.task: asyncio.Task[None] | None = None

    async def start(self) -> SpecService:
        self.task = asyncio.create_task(self.server.serve(sockets=[self.sock]))
        while not self.server.started:  # noqa: ASYNC110 -- uvicorn offers no event to wait on
            await asyncio.sleep(0.01)
        return self.service

    async def stop(self) -> None:
        self.server.should_exit = True
        if self.task is not None:
            await self.task
        self.sock.close()


async def remove_every_integration(app: Any) -> None:
    """What a module's tests imported into the suite's shared database goes, and the shared app serves the
    built-in registry again: imported handlers change every other module's search statistics and counts."""
    db: Database = app.state.db
    async with db.write() as session:
        if (await session.execute(select(IntegrationApp.id).limit(1))).first() is None:
            return
        await session.execute(delete(IntegrationApp))  # their connections go with them (ON DELETE CASCADE)
        await bump_generation(session)
    runtime = runtime_of(app.state.registry)
    if runtime is not None:
        await runtime.refresh()


@pytest.fixture(scope="module", name="imports_removed_after_the_module")
async def imports_removed_after_the_module_fixture(app: Any) -> AsyncIterator[None]:
    """Registered by tests/conftest.py; each integrations test module asks for it in pytestmark (see
    remove_every_integration)."""
    yield
    await remove_every_integration(app)


@pytest.fixture(name="tls")
def upstream_tls_fixture(tmp_path: Path, settings: Settings, monkeypatch: pytest.MonkeyPatch) -> TlsFiles:
    """A CA and certificate for a loopback upstream, which the suite's app trusts and may reach for this test."""
    files = make_tls(tmp_path)
    monkeypatch.setattr(settings, "webhook_allow_private_networks", True)
    monkeypatch.setattr(settings, "webhook_ca_bundle", str(files.ca))
    return files
