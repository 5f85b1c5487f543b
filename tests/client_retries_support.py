"""A gateway in front of a live Prism that fails on purpose, and the three official clients driven alike.

The gateway plays nginx or a cloud load balancer whose upstream was slow: it forwards a request to Prism, waits
for Prism's answer, then gives the client a 502 or a 504 (or cuts the connection) instead. Prism ran the call;
the client cannot tell. The drivers run one client call (Python sync, Python async, or TypeScript in Node) and
report its outcome in one shape, so a scenario is written once for the three clients.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web
from prism_client import (
    GENERATED_KEY,
    AsyncPrismClient,
    IdempotencyKey,
    PrismAPIError,
    PrismClient,
    PrismConnectionError,
)

from tests.live_prism import run_process

DROP = "drop"  # the gateway cuts the connection instead of answering
Failure = int | str  # a status the gateway answers after forwarding, or DROP
CLIENTS = ("sync", "async", "typescript")
TYPESCRIPT_CLIENT = Path(__file__).resolve().parent.parent / "clients" / "typescript"

# Hop-by-hop and framing headers belong to one connection; the gateway sets its own on each side.
NOT_FORWARDED = frozenset({"host", "connection", "keep-alive", "transfer-encoding", "content-length",
                           "content-encoding", "upgrade", "te", "trailer"})


@dataclass(frozen=True)
class Passage:
    """One request through the gateway."""

    method: str
    path: str
    idempotency_key: str | None
    prism_status: int | None  # None: the gateway answered without asking Prism
    replayed: bool  # Prism answered with a stored answer (Idempotent-Replayed: true)


@dataclass
class Gateway:
    upstream: str
    session: aiohttp.ClientSession
    base_url: str = ""
    passages: list[Passage] = field(default_factory=list)
    _failures: list[Failure] = field(default_factory=list)
    _refusals: list[tuple[int, dict[str, str], dict[str, Any]]] = field(default_factory=list)

    def fail_after_forwarding(self, *failures: Failure) -> None:
        """The next requests reach Prism; their clients get these failures instead of Prism's answers."""
        self._failures.extend(failures)

    def refuse(self, status: int, headers: dict[str, str], body: dict[str, Any] | None = None) -> None:
        """The next request gets this answer without reaching Prism."""
        self._refusals.append((status, headers, body or {"error": f"http_{status}", "message": "refused"}))

    def paths(self, method: str) -> list[str]:
        return [p.path for p in self.passages if p.method == method]

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        key = request.headers.get("Idempotency-Key")
        if self._refusals:
            status, headers, refusal = self._refusals.pop(0)
            self.passages.append(Passage(request.method, request.path, key, None, False))
            return web.json_response(refusal, status=status, headers=headers)
        forwarded = {k: v for k, v in request.headers.items() if k.lower() not in NOT_FORWARDED}
        async with self.session.request(request.method, self.upstream + request.path_qs, headers=forwarded,
                                        data=body, allow_redirects=False) as answer:
            payload = await answer.read()
            self.passages.append(Passage(request.method, request.path, key, answer.status,
                                         answer.headers.get("Idempotent-Replayed") == "true"))
            headers = {k: v for k, v in answer.headers.items() if k.lower() not in NOT_FORWARDED}
        if not self._failures:
            return web.Response(status=answer.status, body=payload, headers=headers)
        failure = self._failures.pop(0)
        if failure == DROP:
            assert request.transport is not None
            request.transport.close()
            return web.Response(status=502)  # never reaches the client: the connection is gone
        assert isinstance(failure, int)
        return web.json_response({"error": "gateway", "message": "upstream answered too late"}, status=failure)


@asynccontextmanager
async def running_gateway(upstream: str) -> AsyncIterator[Gateway]:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as session:
        gateway = Gateway(upstream.rstrip("/"), session)
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", gateway.handle)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        host, port = runner.addresses[0][:2]
        gateway.base_url = f"http://{host}:{port}"
        try:
            yield gateway
        finally:
            await runner.cleanup()


# --- the clients --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    value: Any = None
    error: str | None = None  # "api" (Prism or the gateway answered an error) or "connection"
    status: int | None = None
    retry_after: float | None = None
    seconds: float = 0.0  # how long the call took, measured around it (not around starting Node)


@dataclass(frozen=True)
class ClientCall:
    """One method call, named and shaped as the Python clients take it and, where it differs, the TypeScript one."""

    method: str
    args: list[Any]
    typescript_method: str | None = None
    typescript_args: list[Any] | None = None
    kwargs: dict[str, Any] = field(default_factory=dict)  # Python only


@dataclass(frozen=True)
class Limits:
    max_retries: int = 3
    max_retry_after: float = 120.0


def build_typescript_client() -> str:
    """Compile the TypeScript client; the file URL of its entry point."""
    assert shutil.which("node"), "Node.js 18+ is required to drive the TypeScript client"
    tsc = TYPESCRIPT_CLIENT / "node_modules" / ".bin" / "tsc"
    assert tsc.exists(), "run `npm ci` in clients/typescript first"
    build = subprocess.run([str(tsc), "-p", str(TYPESCRIPT_CLIENT)], capture_output=True, text=True, timeout=300,
                           check=False)
    assert build.returncode == 0, build.stdout + build.stderr
    return (TYPESCRIPT_CLIENT / "dist" / "index.js").as_uri()


async def invoke(client: str, base_url: str, api_key: str, call: ClientCall, *,
                 idempotency_key: IdempotencyKey = GENERATED_KEY, limits: Limits = Limits(),
                 typescript: str = "") -> Outcome:
    """Make `call` with one of the three clients (the TypeScript one needs `typescript`, its URL)."""
    if client == "typescript":
        return await _invoke_typescript(typescript, base_url, api_key, call, idempotency_key, limits)
    options: dict[str, Any] = {"timeout": 10, "max_retries": limits.max_retries, "backoff_base": 0.02,
                               "max_retry_after": limits.max_retry_after}
    keyword = dict(call.kwargs)
    if idempotency_key is not GENERATED_KEY:
        keyword["idempotency_key"] = idempotency_key
    started = time.monotonic()
    try:
        if client == "sync":
            def run() -> Any:
                with PrismClient(base_url, api_key, **options) as prism:
                    return getattr(prism, call.method)(*call.args, **keyword)
            value = await asyncio.to_thread(run)  # the gateway runs on this event loop
        else:
            async with AsyncPrismClient(base_url, api_key, **options) as prism:
                value = await getattr(prism, call.method)(*call.args, **keyword)
    except PrismAPIError as exc:
        return Outcome(error="api", status=exc.status, retry_after=exc.retry_after,
                       seconds=time.monotonic() - started)
    except PrismConnectionError:
        return Outcome(error="connection", seconds=time.monotonic() - started)
    return Outcome(value=value, seconds=time.monotonic() - started)


# One call with the built client; the outcome is printed as JSON in the shape of Outcome.
_NODE_DRIVER = """
const spec = JSON.parse(process.argv[1]);
const { PrismClient, PrismApiError, PrismConnectionError } = await import(spec.client);
const prism = new PrismClient(spec.options);
const started = performance.now();
let outcome;
try {
  outcome = { value: await prism[spec.method](...spec.args) };
} catch (error) {
  if (error instanceof PrismApiError) outcome = { error: "api", status: error.status, retry_after: error.retryAfter };
  else if (error instanceof PrismConnectionError) outcome = { error: "connection" };
  else throw error;
}
process.stdout.write(JSON.stringify({ ...outcome, seconds: (performance.now() - started) / 1000 }));
"""


async def _invoke_typescript(entry: str, base_url: str, api_key: str, call: ClientCall,
                             idempotency_key: IdempotencyKey, limits: Limits) -> Outcome:
    assert entry, "build the TypeScript client first (build_typescript_client)"
    method = call.typescript_method or call.method
    args = call.args if call.typescript_args is None else call.typescript_args
    if idempotency_key is not GENERATED_KEY:  # the last argument of a dispatching call: { idempotencyKey }
        args = [*args, {"idempotencyKey": False if idempotency_key is None else idempotency_key}]
    spec = {"client": entry, "method": method, "args": args, "options": {
        "baseUrl": base_url, "apiKey": api_key, "timeoutMs": 10_000, "maxRetries": limits.max_retries,
        "backoffBaseMs": 20, "maxRetryAfterMs": limits.max_retry_after * 1000}}
    node = shutil.which("node")
    assert node
    run = await run_process([node, "--input-type=module", "-e", _NODE_DRIVER, json.dumps(spec)], limit_seconds=120)
    assert run.returncode == 0, run.stdout + run.stderr
    return Outcome(**json.loads(run.stdout))
