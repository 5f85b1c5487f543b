"""GET /healthz (liveness: the process answers; touches nothing) and GET /readyz (readiness: 200 when every
check passes or is only degraded, else 503). On every host, without authentication, exempt from every limit and
the lockout (prism.edge.paths)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute

from prism.edge.doors import PLAIN, door_routes
from prism.health.checks import Readiness
from prism.web.responses import json_response

NO_STORE = {"Cache-Control": "no-store"}


async def healthz(request: Request) -> Response:
    return json_response({"status": "ok", "checks": {}}, 200, NO_STORE)


async def readyz(request: Request) -> Response:
    readiness: Readiness = request.app.state.readiness
    checks = await readiness.check()
    ready = all(check.ok for check in checks.values())
    status = "unavailable" if not ready else "degraded" if any(c.degraded for c in checks.values()) else "ok"
    body = {"status": status, "checks": {name: c.body() for name, c in checks.items()}}
    return json_response(body, 200 if ready else 503, NO_STORE)


def routes() -> list[BaseRoute]:
    return [*door_routes("/healthz", healthz, ["GET"], PLAIN), *door_routes("/readyz", readyz, ["GET"], PLAIN)]
