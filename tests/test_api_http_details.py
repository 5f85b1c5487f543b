"""HTTP details: a 405 names in `Allow` exactly the methods its path answers (every route of the app is walked),
and the out-of-band redirect `urn:ietf:wg:oauth:2.0:oob` is honoured only for a client registered with it."""

from __future__ import annotations

from typing import Any

import httpx
from starlette.routing import Route

from prism.storage import Database
from tests.factories import Factory
from tests.oauth_support import authorize_params, browser, pkce, register

METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
OOB = "urn:ietf:wg:oauth:2.0:oob"


def _paths(app: Any) -> dict[str, set[str]]:
    """Every routed path (a sample value in each parameter) and the methods its routes declare."""
    served: dict[str, set[str]] = {}
    for route in app.router.routes:
        if isinstance(route, Route) and route.methods:
            path = route.path
            for name in route.param_convertors:
                path = path.replace(f"{{{name}}}", "x1").replace(f"{{{name}:path}}", "x1")
            served.setdefault(path, set()).update(route.methods)
    return served


async def test_every_405_lists_exactly_the_methods_its_path_answers(client: httpx.AsyncClient, app: Any,
                                                                    db: Database) -> None:
    ws = await Factory(db).workspace(roles=("owner",))
    checked = 0
    for path, methods in sorted(_paths(app).items()):
        for method in METHODS:
            if method in methods:
                continue
            r = await client.request(method, path, headers=ws.headers())
            if r.status_code != 405:  # a refusal before routing (an edge limit, a NUL) is not this test's
                assert r.status_code in (401, 403, 404, 429), (method, path, r.status_code, r.text)
                continue
            allowed = {m.strip() for m in r.headers["allow"].split(",")}
            assert allowed == methods, (method, path, allowed, methods)
            assert r.headers["content-type"].startswith("application/json"), (method, path)
            checked += 1
    assert checked > 50, checked


async def test_the_mcp_door_does_not_offer_a_method_it_refuses(client: httpx.AsyncClient, db: Database) -> None:
    ws = await Factory(db).workspace(roles=("owner",))
    r = await client.delete("/api/mcp/sse", headers=ws.headers())
    assert r.status_code == 405, r.text
    assert "DELETE" not in {m.strip() for m in r.headers["allow"].split(",")}


async def test_the_oob_redirect_is_only_for_clients_registered_with_it(app: object, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    async with browser(app, ws.host) as c:
        plain = await register(c, {"client_name": "web", "redirect_uris": ["https://app.example.com/cb"]})
        _, challenge = pkce()
        page = await c.get("/api/mcp/oauth/authorize/", params=authorize_params(
            plain["client_id"], challenge, redirect_uri=OOB))
        assert page.status_code == 400 and "location" not in page.headers
        assert 'id="authorization-code"' not in page.text
        manual = await register(c, {"client_name": "manual", "redirect_uris": [OOB]})
        page = await c.get("/api/mcp/oauth/authorize/", params=authorize_params(
            manual["client_id"], challenge, redirect_uri=OOB))
        assert page.status_code in (200, 302, 303), page.text  # on to sign-in and consent
