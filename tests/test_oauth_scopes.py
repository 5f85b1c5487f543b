"""Scopes an authorization grants: per-app scopes act within the user's role, OpenID Connect's scopes are ignored,
`offline_access` is kept; and the authorize endpoint refuses a repeated parameter on a page."""

from __future__ import annotations

import json
import time
from fnmatch import fnmatchcase
from typing import Any

import httpx
import pytest

from prism.auth.permissions import BUILTIN_ROLES
from prism.registry.mega_tools import LEGACY_BINDINGS
from prism.registry.model import Handler
from tests.factories import Factory, Workspace
from tests.oauth_support import (
    CLAUDE_REDIRECT,
    OAUTH,
    authorize_params,
    bearer,
    browser,
    error_code,
    get_code,
    pkce,
    register,
    tokens_for,
)
from tests.test_mcp_protocol import JSON_AND_SSE, PATH, rpc

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


async def test_an_app_scope_does_not_list_the_persons_keys(app: object, factory: Factory) -> None:
    """whoami and introspection orient any client; the person's own credentials are not among them."""
    ws = await factory.workspace(roles=("viewer",))
    keys = {"operation": "list", "app": "keys", "entity": "key", "arguments": {}}
    for scope, status in (("spare_parts.view", 403), ("keys.view", 200), ("mcp:read", 200)):
        token = (await _tokens(app, ws, "viewer", scope))["access_token"]
        async with browser(app, ws.host) as c:
            answer = await c.post("/api/mcp/tools/prism_config_manage/", json=keys, headers=bearer(token))
        assert answer.status_code == status, (scope, answer.text)


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
        assert tokens["scope"] == granted
        # Registered for authorization_code only: offline_access is what lets it refresh, and without it no
        # refresh token is issued at all.
        if "offline_access" not in granted:
            assert "refresh_token" not in tokens
            return
        again = await c.post(f"{OAUTH}/token/", data={"grant_type": "refresh_token", "client_id": client["client_id"],
                                                      "refresh_token": tokens["refresh_token"]})
    assert again.status_code == 200, again.text


async def test_a_repeated_authorize_parameter_is_refused_on_a_page(app: object, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    async with browser(app, ws.host) as c:
        client = await register(c)
        params = [*authorize_params(client["client_id"], pkce()[1]).items(), ("redirect_uri", "https://x.example/")]
        answer = await c.get(f"{OAUTH}/authorize/", params=params)
    assert answer.status_code == 400 and "location" not in answer.headers
    assert "more than once: redirect_uri" in answer.text


def _app_scope_allows(granted: set[str], handler: Handler, role: str) -> bool:
    """docs/oauth.md "Scopes", written out: a per-app scope names `<app>.<verb>` or one permission; a read that
    needs no permission takes any; the role's patterns are checked besides."""
    permission = handler.permission
    if permission is None:
        return handler.scope == "read"
    app_name, _, rest = permission.partition(".")
    named = permission in granted or f"{app_name}.{rest.split('_', 1)[0]}" in granted
    return named and any(fnmatchcase(permission, p) for p in BUILTIN_ROLES[role])


async def _over_mcp(c: httpx.AsyncClient, token: str, *messages: dict[str, Any]) -> list[dict[str, Any]]:
    headers = {**bearer(token), **JSON_AND_SSE}
    opened = await c.post(PATH, json=rpc("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                                        "clientInfo": {"name": "t", "version": "1"}}), headers=headers)
    assert opened.status_code == 200, opened.text
    headers["Mcp-Session-Id"] = opened.headers["mcp-session-id"]
    return [(await c.post(PATH, json=m, headers=headers)).json() for m in messages]


@pytest.mark.parametrize(("role", "scope"), [
    ("owner", "spare_parts.view"), ("member", "spare_parts.view spare_parts.add"),
    ("viewer", "spare_parts.view spare_parts.add"), ("member", "spare_parts.delete spare_parts.view_stock_movement")])
async def test_over_mcp_an_app_scope_lists_and_runs_exactly_what_it_and_the_role_permit(
        app: Any, factory: Factory, role: str, scope: str) -> None:
    ws = await factory.workspace(roles=(role,))
    token = (await _tokens(app, ws, role, scope))["access_token"]
    granted = set(scope.split())
    registry = list(app.state.registry)
    allowed = [h for h in registry if _app_scope_allows(granted, h, role)]
    # Every spare_parts handler, and each other app's first handler: the scope names none of those.
    probed = [h for h in registry if h.coordinate.app == "spare_parts" or h.permission is None]
    probed += list({h.coordinate.app: h for h in reversed(registry) if h.permission is not None}.values())
    calls = [rpc("tools/call", {"name": f"prism_{h.coordinate.mega_tool}", "arguments": {
        "app": h.coordinate.app, "entity": h.coordinate.entity, "operation": h.coordinate.operation,
        "arguments": {}}}, request_id=i) for i, h in enumerate(probed, start=2)]
    async with browser(app, ws.host) as c:
        listed, *answers = await _over_mcp(c, token, rpc("tools/list"), *calls)

    tools = {t["name"]: t for t in listed["result"]["tools"]}
    expected_megas = {f"prism_{h.coordinate.mega_tool}" for h in allowed}
    paths = {h.path for h in allowed}
    assert set(tools) == expected_megas | {name for name, path in LEGACY_BINDINGS.items() if path in paths}
    for name in expected_megas:
        mine = [h for h in allowed if f"prism_{h.coordinate.mega_tool}" == name]
        schema = tools[name]["inputSchema"]["properties"]
        for part in ("app", "entity", "operation"):
            assert set(schema[part]["enum"]) == {getattr(h.coordinate, part) for h in mine}, (name, part)
        assert tools[name]["annotations"]["readOnlyHint"] is all(h.read_only for h in mine)
    for handler, answer in zip(probed, answers, strict=True):
        if "error" in answer:  # a platform scope would allow it: the step-up challenge (docs/mcp.md)
            assert answer["error"]["data"]["error"] == "insufficient_scope", (handler.path, answer)
            refused = True
        else:
            outcome = json.loads(answer["result"]["content"][0]["text"])
            refused = outcome.get("error") == "permission_denied"
        assert refused is (handler not in allowed), (handler.path, outcome)
    assert 0 < sum(h in allowed for h in probed) < len(probed)  # both outcomes were probed


async def test_a_form_of_many_repeated_fields_is_refused_at_once(app: object, factory: Factory) -> None:
    """The token endpoint reads its form before anyone is authenticated: a body of many fields is refused by its
    count, and repeated names are found in one pass (comparing every field with every other took seconds of the
    event loop for a 32 KB body, and hours for the 1 MiB the edge admits)."""
    ws = await factory.workspace(roles=("owner",))
    form = {"content-type": "application/x-www-form-urlencoded"}
    async with browser(app, ws.host) as c:
        started = time.monotonic()
        many = await c.post(f"{OAUTH}/token/", content=b"grant_type=authorization_code&" + b"a&" * 40_000,
                            headers=form)
        assert time.monotonic() - started < 5
        assert many.status_code == 400 and many.json()["error"] == "invalid_request"
        assert "at most 1000 fields" in many.json()["error_description"]
        names = "&".join(f"f{i}=1&f{i}=2" for i in range(300))
        repeated = await c.post(f"{OAUTH}/token/", content=f"grant_type=authorization_code&{names}".encode(),
                                headers=form)
    assert repeated.status_code == 400 and repeated.json()["error"] == "invalid_request"
    first_ten = "f0, f1, f10, f100, f101, f102, f103, f104, f105, f106"  # sorted as text
    assert repeated.json()["error_description"].endswith(f"{first_ten} and 290 more")


async def test_basic_credentials_that_are_not_ascii_are_an_invalid_client(app: object, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    async with browser(app, ws.host) as c:
        for endpoint in ("token", "revoke"):
            for value in (b"Basic \xc3\xa9t\xc3\xa9", b"Basic \xff\xfe=="):
                answer = await c.post(f"{OAUTH}/{endpoint}/", data={"grant_type": "client_credentials", "token": "x"},
                                      headers={"Authorization": value})
                assert answer.status_code == 401 and answer.json()["error"] == "invalid_client", (endpoint, value)


# --- the registered scope is the client's ceiling (RFC 7591 section 2) -----------------------------------------

def _scoped_client(scope: str | None) -> dict[str, Any]:
    body: dict[str, Any] = {"client_name": f"ceiling {scope}", "redirect_uris": [CLAUDE_REDIRECT],
                            "grant_types": ["authorization_code", "refresh_token"],
                            "token_endpoint_auth_method": "none"}
    if scope is not None:
        body["scope"] = scope
    return body


@pytest.mark.parametrize(("registered", "asked", "error"), [
    ("mcp:read", "mcp:read mcp:write", "invalid_scope"),
    ("mcp:read", "spare_parts.view", "invalid_scope"),
    ("spare_parts.view", "spare_parts.add", "invalid_scope"),
    ("spare_parts.view", "mcp:read", "invalid_scope"),
    ("mcp:read", "mcp:read offline_access openid", None),
    ("mcp:read", "", None),
    ("spare_parts.view", "spare_parts.view_spare_part", None),
    ("mcp:read mcp:write mcp:execute", "spare_parts.add", None),
    (None, "mcp:execute spare_parts.delete", None),
])
async def test_a_scope_beyond_the_registered_one_is_invalid_scope_at_authorize(
        app: object, factory: Factory, registered: str | None, asked: str, error: str | None) -> None:
    ws = await factory.workspace(roles=("owner",))
    async with browser(app, ws.host) as c:
        client = await register(c, _scoped_client(registered))
        answer = await c.get(f"{OAUTH}/authorize/", params=authorize_params(client["client_id"], pkce()[1],
                                                                          scope=asked))
    if error is None:  # on to sign-in and consent
        assert answer.status_code == 303 and answer.headers["location"].startswith("/login/"), answer.text
        return
    # An error of the request itself: Prism's page, never a redirect (RFC 9700 4.11.2).
    assert answer.status_code == 400 and "location" not in answer.headers, answer.headers.get("location")
    assert error_code(answer.text) == error and registered in answer.text


async def _narrow(c: httpx.AsyncClient, client: dict[str, Any], scope: str) -> None:
    """The client replaces its registration (RFC 7592) with a narrower scope."""
    body = {k: v for k, v in client.items() if k not in ("registration_access_token", "registration_client_uri")}
    replaced = await c.put(client["registration_client_uri"], json={**body, "scope": scope},
                           headers=bearer(client["registration_access_token"]))
    assert replaced.status_code == 200 and replaced.json()["scope"] == scope, replaced.text


async def test_a_refresh_stays_within_the_registered_scope(app: object, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    async with browser(app, ws.host) as c:
        client = await register(c, _scoped_client("mcp:read mcp:write"))
        tokens = await tokens_for(c, ws, client=client)
        assert tokens["scope"] == "mcp:read mcp:write"
        await _narrow(c, client, "mcp:read")
        form = {"grant_type": "refresh_token", "client_id": client["client_id"],
                "refresh_token": tokens["refresh_token"]}
        widened = await c.post(f"{OAUTH}/token/", data={**form, "scope": "mcp:write"})
        assert widened.status_code == 400 and widened.json()["error"] == "invalid_scope", widened.text
        kept = await c.post(f"{OAUTH}/token/", data=form)  # no scope asked: the grant's, within the registration
    assert kept.status_code == 200, kept.text
    assert kept.json()["scope"] == "mcp:read"


async def test_a_code_beyond_a_since_narrowed_registration_is_invalid_scope(app: object, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    async with browser(app, ws.host) as c:
        client = await register(c, _scoped_client("mcp:read mcp:write"))
        verifier, challenge = pkce()
        code = await get_code(c, client["client_id"], challenge, email=ws.emails["owner"])
        await _narrow(c, client, "mcp:read")
        answer = await c.post(f"{OAUTH}/token/", data={
            "grant_type": "authorization_code", "code": code, "code_verifier": verifier,
            "client_id": client["client_id"], "redirect_uri": CLAUDE_REDIRECT})
    assert answer.status_code == 400 and answer.json()["error"] == "invalid_scope", answer.text
