"""MCP step-up authorization (2025-11-25 basic/authorization, "Scope Challenge Handling"): a tools/call refused
only because an OAuth token lacks a platform scope is HTTP 403 with `WWW-Authenticate: Bearer
error="insufficient_scope"`, the scopes to ask for and the protected-resource metadata of the 401 challenge; every
other refusal stays a tool result with `isError`, and the refusal is in the audit ledger either way."""

from __future__ import annotations

from typing import Any

import httpx
from sqlalchemy import select

from prism.models.audit import AuditEntry
from prism.storage import Database
from tests.factories import Factory, Workspace
from tests.oauth_support import bearer, browser, tokens_for
from tests.test_mcp_protocol import JSON_AND_SSE, LIST_PARTS, PATH, call, headers_for, initialize, rpc, tool_text
from tests.test_mcp_revisions import envelope

REFUSED_CREATE = ("mcp", "refused", "permission_denied", "entity_crud/spare_parts/spare_part/create")
CREATE_PART = {"app": "spare_parts", "entity": "spare_part", "operation": "create",
               "arguments": {"sku": "STEP-UP", "name": "Needs the write scope"}}


def _token_headers(ws: Workspace, token: str, **extra: str) -> dict[str, str]:
    return {**bearer(token), "Host": ws.host, **JSON_AND_SSE, **extra}


async def _read_only_token(app: object, ws: Workspace, label: str = "owner") -> str:
    async with browser(app, ws.host) as c:
        tokens = await tokens_for(c, ws, label=label, scope="mcp:read")
    token: str = tokens["access_token"]
    return token


async def _metadata_of_the_401(client: httpx.AsyncClient, ws: Workspace) -> str:
    """The resource_metadata URL the 401 challenge of this host names."""
    refused = await client.post(PATH, headers={**JSON_AND_SSE, "Host": ws.host}, json=rpc("ping"))
    assert refused.status_code == 401
    challenge = refused.headers["www-authenticate"]
    return challenge.split('resource_metadata="', 1)[1].split('"', 1)[0]


async def _ledger(db: Database, ws: Workspace) -> list[tuple[str, str, str | None, str]]:
    async with db.read() as s:
        rows = (await s.execute(select(AuditEntry.door, AuditEntry.outcome, AuditEntry.error_code,
                                       AuditEntry.coordinate).where(AuditEntry.organization_id == ws.org.id)
                                )).all()
    return [tuple(r) for r in rows]


def _assert_challenged(answer: httpx.Response, metadata: str, request_id: int | str) -> None:
    assert answer.status_code == 403, answer.text
    assert answer.headers["www-authenticate"] == (
        f'Bearer error="insufficient_scope", scope="mcp:read mcp:write", resource_metadata="{metadata}"')
    body = answer.json()
    assert body["id"] == request_id and "result" not in body
    assert body["error"]["data"] == {"error": "insufficient_scope", "scope": "mcp:read mcp:write"}
    assert "mcp:write" in body["error"]["message"]


async def test_an_oauth_token_without_the_write_scope_is_challenged_to_step_up(
        app: object, client: httpx.AsyncClient, factory: Factory, db: Database) -> None:
    ws = await factory.workspace(roles=("owner",))
    token = await _read_only_token(app, ws)
    headers = _token_headers(ws, token)
    session = await initialize(client, headers, "2025-11-25")
    answer = await call(client, headers, session, rpc("tools/call", {"name": "prism_entity_crud",
                                                                     "arguments": CREATE_PART}, request_id=7))
    _assert_challenged(answer, await _metadata_of_the_401(client, ws), 7)
    # Refused and recorded exactly as before: the dispatcher's refusal, in the ledger; nothing was created.
    assert await _ledger(db, ws) == [REFUSED_CREATE]
    listed = await call(client, headers, session, rpc("tools/call", {"name": "prism_entity_crud",
                                                                     "arguments": LIST_PARTS}))
    is_error, body = tool_text(listed)
    assert is_error is False and body["data"]["items"] == []


async def test_a_2026_07_28_request_is_challenged_the_same_way(
        app: object, client: httpx.AsyncClient, factory: Factory, db: Database) -> None:
    ws = await factory.workspace(roles=("owner",))
    headers = _token_headers(ws, await _read_only_token(app, ws), **{
        "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "prism_entity_crud"})
    answer = await client.post(PATH, headers=headers, json=rpc("tools/call", envelope(
        {"name": "prism_entity_crud", "arguments": CREATE_PART}), request_id="call-9"))
    _assert_challenged(answer, await _metadata_of_the_401(client, ws), "call-9")
    assert await _ledger(db, ws) == [REFUSED_CREATE]


async def test_refusals_a_new_token_cannot_cure_stay_tool_errors(
        app: object, client: httpx.AsyncClient, factory: Factory, db: Database) -> None:
    """An API key's scopes are fixed when it is minted; a role's permission is not a scope; a batch shares one
    HTTP answer among its requests: each is refused as a tool result with isError, HTTP 200."""
    ws = await factory.workspace(roles=("owner", "viewer"))
    await factory.add_key(ws, "readonly", scopes="mcp:read")
    call_create = rpc("tools/call", {"name": "prism_entity_crud", "arguments": CREATE_PART}, request_id=3)
    key_headers = headers_for(ws, "readonly")
    by_key = await call(client, key_headers, await initialize(client, key_headers, "2025-11-25"), call_create)
    async with browser(app, ws.host) as c:
        viewer_token = (await tokens_for(c, ws, label="viewer"))["access_token"]  # every scope, a viewer's role
    viewer_headers = _token_headers(ws, viewer_token)
    by_role = await call(client, viewer_headers, await initialize(client, viewer_headers, "2025-11-25"), call_create)
    batch_headers = _token_headers(ws, await _read_only_token(app, ws))
    in_batch = await call(client, batch_headers, await initialize(client, batch_headers, "2025-03-26"),
                          [call_create, rpc("ping", request_id=4)])
    for answer in (by_key, by_role):
        assert answer.status_code == 200 and "www-authenticate" not in answer.headers
        is_error, body = tool_text(answer)
        assert is_error is True and body["error"] == "permission_denied"
    assert in_batch.status_code == 200 and "www-authenticate" not in in_batch.headers
    refused: dict[str, Any] = in_batch.json()[0]["result"]
    assert refused["isError"] is True and '"permission_denied"' in refused["content"][0]["text"]
    assert [e[:3] for e in await _ledger(db, ws)] == [("mcp", "refused", "permission_denied")] * 3


async def test_the_rest_doors_challenge_an_oauth_token_the_same_way_and_never_a_key(
        app: object, client: httpx.AsyncClient, factory: Factory) -> None:
    """RFC 6750 section 3.1 on the REST doors: the 403 of a scope an OAuth token lacks names the scopes to ask for;
    an API key's 403 has no challenge (its scopes are fixed when it is minted)."""
    ws = await factory.workspace(roles=("owner",))
    token = await _read_only_token(app, ws)
    metadata = (await _metadata_of_the_401(client, ws)).removesuffix(PATH)
    read_only_key = await factory.add_key(ws, "read-only", scopes="mcp:read")
    for url, body in (("/api/mcp/tools/prism_entity_crud/", CREATE_PART),
                      ("/prism/entity_crud/spare_parts/spare_part/create", CREATE_PART["arguments"])):
        refused = await client.post(url, json=body, headers={**bearer(token), "Host": ws.host})
        assert refused.status_code == 403 and refused.json()["error"] == "permission_denied", refused.text
        assert refused.headers["www-authenticate"] == (
            f'Bearer error="insufficient_scope", scope="mcp:read mcp:write", resource_metadata="{metadata}"')
        by_key = await client.post(url, json=body, headers={**bearer(read_only_key), "Host": ws.host})
        assert by_key.status_code == 403 and "www-authenticate" not in by_key.headers, by_key.headers
