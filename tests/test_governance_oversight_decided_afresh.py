"""A decision reads its oversight request afresh, locked: a request read earlier in the same transaction (a
ledger batch runs several calls in one session, whose identity map keeps what it loaded) and used meanwhile by
another process is not approved again, which would let its held call run twice (docs/governance.md)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import update

from prism.auth.context import AuthContext, KeyUsage
from prism.auth.permissions import BUILTIN_ROLES, PermissionSet
from prism.errors import Conflict
from prism.governance.models import OversightRequest
from prism.governance.oversight import decide, repository
from prism.storage import Database
from tests.factories import Factory


def _reviewer(organization_id: str, tenant_id: str) -> AuthContext:
    return AuthContext(tenant_id=tenant_id, tenant_subdomain="t", tenant_name=None, organization_id=organization_id,
                       organization_name="Org", user_id="reviewer", user_email="r@example.com", role="owner",
                       permissions=PermissionSet(BUILTIN_ROLES["owner"]), scopes=frozenset(), credential_kind="api_key",
                       credential_id="c", key_prefix="", key_name="k", key_created_at=datetime.now(UTC),
                       usage=KeyUsage(None))


async def test_a_request_used_by_another_transaction_after_it_was_read_is_not_decided_again(
        db: Database, factory: Factory) -> None:
    if db.is_sqlite:
        pytest.skip("SQLite has one writer: no other transaction commits while a decision's is open")
    ws = await factory.workspace(roles=("owner",))
    now = datetime.now(UTC)
    async with db.write() as s:
        s.add(OversightRequest(
            id="ovr_" + "0" * 32, organization_id=ws.org.id, tenant_id=ws.tenant.id, persona_id="p",
            credential_id="agent", requested_by="agent-user", coordinate="entity_crud/finance/vendor/create",
            arguments={}, arguments_digest="0" * 64, status="pending", priority="normal", reason="r",
            sla_deadline=now + timedelta(hours=1), decision_note="", created_at=now, mission_id=None))
    async with db.write() as batch:
        request = await repository(batch, ws.org.id).get("ovr_" + "0" * 32)  # an earlier unit's read
        assert request.status == "pending"
        async with db.write() as elsewhere:  # another process approves it and its call runs
            await elsewhere.execute(update(OversightRequest).where(OversightRequest.id == request.id)
                                    .values(status="consumed", consumed_at=now))
        with pytest.raises(Conflict) as refused:
            await decide(batch, _reviewer(ws.org.id, ws.tenant.id), request_id=request.id, approve=True, note="")
        assert refused.value.code == "invalid_transition"
