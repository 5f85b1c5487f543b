"""An agent's credential cannot revoke its own key, or any key, on any door (docs/governance.md, "API keys":
`config_manage/keys/key/revoke` is a person's): the canonical REST door, `/prism/…`, the sandbox's call and MCP
(both tool surfaces) refuse it alike with `person_required`, each refusal a BLOCK decision of the key's AI
system. The OAuth revocation endpoint revokes OAuth tokens only (SPEC.md: "token (access or refresh token)"): an
API key sent there is answered 200 as any token it does not know (RFC 7009 2.2) and keeps working. The key's
person ends it on the console or /keys/ (or the operator, `prism key revoke`)."""

from __future__ import annotations

import httpx

from tests.factories import Factory
from tests.governance_support import governed_key, ok, post
from tests.test_mcp_protocol import call, headers_for, initialize, rpc, tool_text

REVOKE = "config_manage/keys/key/revoke"
DECISIONS = "audit_query/governance/decision/list"


async def test_a_governed_key_is_refused_its_own_revocation_alike_on_every_door(
        client: httpx.AsyncClient, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    await governed_key(factory, client, ws, "agent", persona={"name": "agent", "default": "allow"},
                       risk_level="high")
    mine = (await ok(client, ws, "config_manage/keys/key/list", {}, label="agent"))["items"]
    [own_id] = [k["id"] for k in mine if k["prefix"] == ws.keys["agent"][:15]]
    envelope = {"app": "keys", "entity": "key", "operation": "revoke", "arguments": {"id": own_id}}

    refusals = [(await post(client, ws, REVOKE, {"id": own_id}, label="agent")).json()["error"],
                (await client.post(f"/prism/{REVOKE}", json={"id": own_id}, headers=ws.headers("agent"))).json()[
                    "error"],
                (await client.post("/api/v1/dev/call/", json={"name": "prism_config_manage", "arguments": envelope},
                                   headers=ws.headers("agent"))).json()["error"]]
    headers = headers_for(ws, "agent")
    session = await initialize(client, headers, "2025-11-25")
    for request_id, tool in enumerate(("prism_config_manage", "prism_config_manage_destructive"), start=2):
        answer = await call(client, headers, session, rpc("tools/call", {"name": tool, "arguments": envelope},
                                                          request_id=request_id))
        is_error, body = tool_text(answer)
        assert is_error, body
        refusals.append(body["error"])
    assert refusals == ["person_required"] * 5

    # The OAuth revocation endpoint knows OAuth tokens only: the key is not revoked there either.
    revoked = await client.post("/api/mcp/oauth/revoke/", data={"token": ws.keys["agent"]}, headers={"Host": ws.host})
    assert revoked.status_code == 200
    me = await client.get("/api/v1/dev/me/", headers=ws.headers("agent"))
    assert me.status_code == 200, me.text
    assert [k["status"] for k in (await ok(client, ws, "config_manage/keys/key/list", {}, label="agent"))["items"]
            if k["id"] == own_id] == ["active"]
    decided = [(d["decision"], d["primary_reason"].split(":")[0])
               for d in (await ok(client, ws, DECISIONS, {"page_size": 50}))["items"] if d["coordinate"] == REVOKE]
    assert decided == [("BLOCK", "person_required")] * 5
