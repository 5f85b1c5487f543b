"""Migration 0036 ends the credentials removals left before removal ended them: a former member's API keys and
OAuth consent, which worked again the day the person was added back. Members' credentials, another tenant's
included, are left as they are."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
from alembic import command
from sqlalchemy import Connection, delete, insert, select

from prism.identity.service import add_to_organization
from prism.migrate import alembic_config, migrate_with_alembic
from prism.models import Membership, Organization, User
from prism.models.keys import ApiKey
from prism.oauth.models import OAuthGrant, OAuthGrantOrganization
from prism.storage import Database
from tests.factories import Factory
from tests.processes import scratch_database
from tests.test_documents_postings_migration import _with_app
from tests.test_documents_word_counts_migration import _on

BEFORE = "0035_ledger_ids_in_bigint"
ME = "/api/v1/dev/me/"


def _grant(connection: Connection, grant_id: str, user_id: str, default: str | None, consented: list[str]) -> None:
    connection.execute(insert(OAuthGrant.__table__).values(
        id=grant_id, client_id="connector", user_id=user_id, organization_id=default, scope="mcp:tools",
        issuer="http://t.localhost", audience="http://t.localhost/api/mcp/sse", created_at=datetime.now(UTC)))
    for organization_id in consented:
        connection.execute(insert(OAuthGrantOrganization.__table__).values(grant_id=grant_id,
                                                                           organization_id=organization_id))


async def test_the_upgrade_ends_former_members_keys_and_consent_and_nothing_else(tmp_path: Path) -> None:
    with scratch_database(tmp_path, "former_members") as url:
        await asyncio.to_thread(migrate_with_alembic, url)
        spaces: dict[str, Any] = {}

        async def people(db: Database, client: httpx.AsyncClient) -> Any:
            factory = Factory(db)
            spaces["a"] = await factory.workspace(roles=("owner", "member"))
            spaces["second"] = await factory.second_org(spaces["a"])
            spaces["b"] = await factory.workspace(roles=("owner", "member"))

        await _with_app(url, people)
        a, b, second = spaces["a"], spaces["b"], spaces["second"]
        gone_email = a.emails["member"]

        def as_before(connection: Connection) -> str:
            """The member removed as removal did before: the membership row alone; and their grants."""
            gone = connection.execute(select(User.id).where(User.email == gone_email)).scalar_one()
            connection.execute(insert(Membership.__table__).values(
                id="m-second", user_id=gone, organization_id=second.id,
                role_id=connection.execute(select(Membership.role_id).where(
                    Membership.organization_id == a.org.id, Membership.user_id == gone)).scalar_one(),
                created_at=datetime.now(UTC)))
            connection.execute(delete(Membership.__table__).where(Membership.user_id == gone,
                                                                  Membership.organization_id == a.org.id))
            _grant(connection, "g-only-a", gone, a.org.id, [a.org.id])
            _grant(connection, "g-both", gone, a.org.id, [a.org.id, second.id])
            stayed = connection.execute(select(User.id).where(User.email == b.emails["member"])).scalar_one()
            _grant(connection, "g-member", stayed, b.org.id, [b.org.id])
            return gone

        gone = await _on(url, as_before)
        await asyncio.to_thread(command.downgrade, alembic_config(url), BEFORE)
        await asyncio.to_thread(migrate_with_alembic, url)

        def state(connection: Connection) -> dict[str, Any]:
            keys = {(user, org): revoked is not None for user, org, revoked in connection.execute(
                select(ApiKey.user_id, ApiKey.organization_id, ApiKey.revoked_at))}
            grants = {g: (org, revoked is not None) for g, org, revoked in connection.execute(
                select(OAuthGrant.id, OAuthGrant.organization_id, OAuthGrant.revoked_at))}
            consented = sorted(connection.execute(select(OAuthGrantOrganization.grant_id,
                                                         OAuthGrantOrganization.organization_id)).all())
            return {"keys": keys, "grants": grants, "consented": [tuple(row) for row in consented]}

        after = await _on(url, state)
        assert after["keys"][(gone, a.org.id)] is True  # the former member's key: revoked
        assert [revoked for (user, _), revoked in after["keys"].items() if user != gone] == [False] * 3
        assert after["grants"]["g-only-a"] == (None, True)  # consented to that organization alone: revoked
        assert after["grants"]["g-both"] == (None, False)  # still consented to the other: kept, no default
        assert after["grants"]["g-member"] == (b.org.id, False)  # another tenant's member: untouched
        assert ("g-both", second.id) in after["consented"] and ("g-member", b.org.id) in after["consented"]
        assert not any(grant == "g-only-a" or (grant, org) == ("g-both", a.org.id)
                       for grant, org in after["consented"])

        async def added_back(db: Database, client: httpx.AsyncClient) -> Any:
            async with db.write() as session:
                user = (await session.execute(select(User).where(User.email == gone_email))).scalar_one()
                await add_to_organization(session, user, await session.get(Organization, a.org.id), role="viewer")
            return [(await client.get(ME, headers=ws.headers(label))).status_code
                    for ws, label in ((a, "member"), (a, "owner"), (b, "member"))]

        assert await _with_app(url, added_back) == [401, 200, 200]
