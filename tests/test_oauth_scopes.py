"""Scopes an authorization grants: per-app scopes act within the user's role, OpenID Connect's scopes are ignored,
`offline_access` is kept; and the authorize endpoint refuses a repeated parameter on a page."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.factories import Factory, Workspace
from tests.oauth_support import CLAUDE_REDIRECT, OAUTH, authorize_params, bearer, browser, pkce, register, tokens_for

CRUD = "/api/mcp/tools/prism_entity_crud/"
CREATE = {"operation": "create", "app": "spare_parts", "entity": "spare_part",
          "arguments": {"name": "Gasket", "sku": "G-scope", "quantity": 1}}
LIST = {"operation": "list", "app": "spare_parts", "entity": "spare_part", "arguments": {}}


async def _tokens(app: object, ws: Workspace, label: str, scope: str) -> dict[str, Any]:
    async with browser(app, ws.host) as c:
        return await tokens_for(c, ws, label=label, scope=scope)


async def _call(app: object, ws: Workspace, token: str, body: dict[str, Any]) -> httpx.Response:
    async with browser(app, ws.host) as c:
        return await c.post(CRUD, json=body, headers=bearer(token))


async def test_an_app_scope_grants_what_it_names_and_no_more(app: object, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    tokens = await _tokens(app, ws, "owner", "spare_parts.add")
    assert tokens["scope"] == "spare_parts.add"
    made = await _call(app, ws, tokens["access_token"], CREATE)
    assert made.status_code == 200 and made.json()["success"] is True, made.text
    listed = await _call(app, ws, tokens["access_token"], LIST)  # view is not add
    assert listed.status_code == 403 and "mcp:read" in listed.json()["message"]
    other_app = await _call(app, ws, tokens["access_token"], {**LIST, "app": "finance", "entity": "invoice"})
    assert other_app.status_code in (403, 404)
    async with browser(app, ws.host) as c:
        me = await c.get("/api/v1/dev/me/", headers=bearer(tokens["access_token"]))
    assert me.status_code == 200, me.text  # a read that needs no permission takes any app scope


async def test_an_app_scope_never_goes_beyond_the_role(app: object, factory: Factory) -> None:
    ws = await factory.workspace(roles=("viewer",))
    tokens = await _tokens(app, ws, "viewer", "spare_parts.add spare_parts.view")
    refused = await _call(app, ws, tokens["access_token"], CREATE)
    assert refused.status_code == 403 and "lacks permission" in refused.json()["message"]
    assert (await _call(app, ws, tokens["access_token"], LIST)).status_code == 200


async def test_a_token_of_one_tenant_with_an_app_scope_is_refused_on_another(app: object, factory: Factory) -> None:
    ws, other = await factory.workspace(roles=("owner",)), await factory.workspace(roles=("owner",))
    tokens = await _tokens(app, ws, "owner", "spare_parts.view")
    async with browser(app, other.host) as c:
        answer = await c.post(CRUD, json=LIST, headers=bearer(tokens["access_token"]))
    assert answer.status_code == 401


@pytest.mark.parametrize(("asked", "granted"), [
    ("openid profile email", "mcp:read mcp:write mcp:execute"),
    ("openid mcp:read", "mcp:read"),
    ("offline_access", "mcp:read mcp:write mcp:execute offline_access"),
    ("openid offline_access spare_parts.view", "offline_access spare_parts.view"),
])
async def test_openid_scopes_are_ignored_and_offline_access_kept(app: object, factory: Factory, asked: str,
                                                                granted: str) -> None:
    ws = await factory.workspace(roles=("owner",))
    async with browser(app, ws.host) as c:
        client = await register(c, {"client_name": "scopes", "redirect_uris": [CLAUDE_REDIRECT]})
        tokens = await tokens_for(c, ws, client=client, scope=asked)
        assert tokens["scope"] == granted and tokens["refresh_token"]
        # Registered for authorization_code only: offline_access is what lets it refresh.
        again = await c.post(f"{OAUTH}/token/", data={"grant_type": "refresh_token", "client_id": client["client_id"],
                                                      "refresh_token": tokens["refresh_token"]})
    assert again.status_code == (200 if "offline_access" in granted else 400), again.text


async def test_a_repeated_authorize_parameter_is_refused_on_a_page(app: object, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    async with browser(app, ws.host) as c:
        client = await register(c)
        params = [*authorize_params(client["client_id"], pkce()[1]).items(), ("redirect_uri", "https://x.example/")]
        answer = await c.get(f"{OAUTH}/authorize/", params=params)
    assert answer.status_code == 400 and "location" not in answer.headers
    assert "more than once: redirect_uri" in answer.text
