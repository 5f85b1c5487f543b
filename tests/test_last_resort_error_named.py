"""The last resort's 500 (an error no door turned into an answer) names the request's id, as every answer does,
in its X-Request-ID and in its log line: a client's report of the failure leads to the traceback."""

from __future__ import annotations

import logging

import httpx
import pytest
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from prism.app import create_app
from prism.config import Settings


async def _broken(request: Request) -> Response:
    raise RuntimeError("a bug")


async def test_an_unhandled_error_answers_500_with_the_request_id(settings: Settings,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    app = create_app(settings)
    app.router.routes.append(Route("/broken/", _broken))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
            with caplog.at_level(logging.ERROR, logger="prism"):
                answer = await client.get("/broken/", headers={"X-Request-ID": "report-7"})
    assert answer.status_code == 500 and answer.json()["error"] == "internal_error", answer.text
    assert answer.headers["x-request-id"] == "report-7"
    [logged] = [r for r in caplog.records if "unhandled error" in r.getMessage()]
    assert logged.fields["request_id"] == "report-7" and logged.exc_info is not None  # type: ignore[attr-defined]
