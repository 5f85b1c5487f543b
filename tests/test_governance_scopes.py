"""OAuth per-app scopes on the webhook handlers, as on every other handler."""

from __future__ import annotations

from typing import Any

from tests.factories import Factory, Workspace
from tests.oauth_support import bearer, browser, tokens_for

CONFIG = "/api/mcp/tools/prism_config_manage/"
LIST_HOOKS = {"operation": "list", "app": "governance", "entity": "webhook", "arguments": {}}


async def _token(app: object, ws: Workspace, scope: str) -> str:
    async with browser(app, ws.host) as c:
        tokens: dict[str, Any] = await tokens_for(c, ws, label="owner", scope=scope)
    return str(tokens["access_token"])


async def test_a_per_app_view_scope_lists_webhooks_as_it_lists_every_other_governance_view(
        app: object, factory: Factory) -> None:
    """docs/oauth.md: a handler may be called with the platform scope of its class OR a per-app scope naming its
    permission (`governance.view` names `governance.view_webhook`); the dispatcher and the tool list agree, but the
    webhook handler itself insists on `mcp:read` and refuses."""
    ws = await factory.workspace(roles=("owner",))
    token = await _token(app, ws, "governance.view")
    async with browser(app, ws.host) as c:
        personas = await c.post(CONFIG, headers=bearer(token),
                                json={**LIST_HOOKS, "entity": "persona"})
        assert personas.status_code == 200, personas.text  # the same scope reads another governance entity
        hooks = await c.post(CONFIG, headers=bearer(token), json=LIST_HOOKS)
    assert hooks.status_code == 200, hooks.text
