"""Protocol-version routing of the MCP door: a request carrying the per-request envelope is served (or refused)
as that revision whatever its header says, and a refusal of an unsupported version names the request's id."""

from __future__ import annotations

import httpx

from tests.factories import Factory
from tests.test_mcp_protocol import PATH, rpc
from tests.test_mcp_revisions import SERVED, envelope, modern_headers


async def test_an_unsupported_modern_version_on_a_request_other_than_discover_answers_its_id(
        client: httpx.AsyncClient, factory: Factory) -> None:
    """docs/mcp.md: an error answers with the request's id whenever it could be read, "a 2026-07-28 envelope
    refused with -32602, -32020 or -32022" included; the draft spec's UnsupportedProtocolVersionError example
    echoes the id. server/discover at an unknown version gets its id back; tools/list at the same version must too."""
    ws = await factory.workspace()
    discover = await client.post(PATH, headers=modern_headers(ws, "server/discover", version="2099-01-01"),
                                 json=rpc("server/discover", envelope(version="2099-01-01"), request_id=21))
    listed = await client.post(PATH, headers=modern_headers(ws, "tools/list", version="2099-01-01"),
                               json=rpc("tools/list", envelope(version="2099-01-01"), request_id=22))
    assert discover.status_code == listed.status_code == 400
    assert discover.json()["error"]["data"] == {"supported": SERVED, "requested": "2099-01-01"}
    assert listed.json()["error"]["code"] == -32022
    assert (discover.json()["id"], listed.json()["id"]) == (21, 22)


async def test_a_modern_request_whose_version_header_disagrees_with_its_meta_is_a_header_mismatch(
        client: httpx.AsyncClient, factory: Factory) -> None:
    """Draft streamable HTTP, "Protocol Version Header": the header MUST match params._meta's protocolVersion,
    else 400 with HeaderMismatch (-32020). docs/mcp.md checks the envelope in that order. With the header naming
    a version Prism does not serve, tools/list skips the envelope check and answers -32022 (server/discover with
    the very same headers and body gets -32020)."""
    ws = await factory.workspace()
    sent = modern_headers(ws, "tools/list", version="2099-01-01")
    answer = await client.post(PATH, headers=sent, json=rpc("tools/list", envelope(), request_id=23))
    assert answer.status_code == 400
    assert (answer.json()["id"], answer.json()["error"]["code"]) == (23, -32020)


async def test_a_request_carrying_the_modern_envelope_without_the_version_header_is_a_header_mismatch(
        client: httpx.AsyncClient, factory: Factory) -> None:
    """Draft versioning: a dual-era server serves "a request carrying modern per-request _meta" statelessly under
    2026-07-28; draft streamable HTTP "Server Validation": a missing MCP-Protocol-Version is a HeaderMismatch
    (-32020, 400). A dual-era client reads that as a modern server; Prism answers session_required (-32002)
    instead, the legacy answer that sends the client back to initialize."""
    ws = await factory.workspace()
    sent = {k: v for k, v in modern_headers(ws, "tools/list").items() if k != "MCP-Protocol-Version"}
    answer = await client.post(PATH, headers=sent, json=rpc("tools/list", envelope(), request_id=24))
    assert answer.status_code == 400
    assert (answer.json()["id"], answer.json()["error"]["code"]) == (24, -32020)
