"""The post-hoc audit re-checks the calls of an OAuth token in every organization its grant was consented for,
not only in the grant's default one: a persona tightened in the second organization finds its violations."""

from __future__ import annotations

import uuid

import httpx
from sqlalchemy import select

from prism.identity.service import add_to_organization
from prism.models import User
from prism.storage import Database
from prism.tenancy.service import create_organization
from tests.factories import Factory, ledger_keys
from tests.governance_support import ok
from tests.ledger_support import seal_waiting
from tests.oauth_support import CLIENT_BODIES, bearer, browser, register, tokens_for


async def test_the_audit_rechecks_token_calls_in_a_second_consented_organization(
        app: object, client: httpx.AsyncClient, factory: Factory, db: Database) -> None:
    ws = await factory.workspace(roles=("owner",))
    async with db.write() as session:
        second = await create_organization(session, ws.tenant, name="Second org", keys=ledger_keys())
        owner = (await session.execute(select(User).where(User.email == ws.emails["owner"]))).scalar_one()
        await add_to_organization(session, owner, second, role="owner")
    async with browser(app, ws.host) as c:
        registered = await register(c, {**CLIENT_BODIES["cursor"], "client_name": f"Agent {uuid.uuid4().hex[:8]}"})
        tokens = await tokens_for(c, ws, client=registered, organizations=[ws.org.id, second.id])
    token, client_id = tokens["access_token"], str(tokens["client"]["client_id"])
    await factory.add_key(ws, "second_admin", role="owner", org=second)

    persona = await ok(client, ws, "config_manage/governance/persona/create",
                       {"name": "lenient", "default": "allow"}, label="second_admin")
    await ok(client, ws, "config_manage/governance/persona/attach",
             {"client_id": client_id, "persona_id": persona["id"]}, label="second_admin")
    # The token acts in the second organization (not its grant's default) and creates a part there.
    made = await client.post("/api/mcp/tools/prism_entity_crud/",
                             headers={"Host": ws.host, **bearer(token), "X-Organization-Context": second.id},
                             json={"app": "spare_parts", "entity": "spare_part", "operation": "create",
                                   "arguments": {"sku": "S-1", "name": "second org part"}})
    assert made.status_code == 200, made.text

    await ok(client, ws, "config_manage/governance/persona/update",
             {"id": persona["id"], "deny": ["entity_crud/spare_parts/*/create"]}, label="second_admin")
    # The tie holds in the second organization: the same call is refused live now.
    again = await client.post("/api/mcp/tools/prism_entity_crud/",
                              headers={"Host": ws.host, **bearer(token), "X-Organization-Context": second.id},
                              json={"app": "spare_parts", "entity": "spare_part", "operation": "create",
                                    "arguments": {"sku": "S-2", "name": "second org part 2"}})
    assert again.status_code == 403 and again.json()["error"] == "blocked", again.text
    await seal_waiting(db, second.id)  # the audit reads sealed entries only
    report = await ok(client, ws, "governance_review/governance/audit/run", {"hours": 1}, label="second_admin")
    assert [v["coordinate"] for v in report["violations"]] == ["entity_crud/spare_parts/spare_part/create"], report
