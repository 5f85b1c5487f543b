"""`find_organization` (every `--org` of the CLI): an id, else a slug, within the tenant."""

from __future__ import annotations

from prism.storage import Database
from prism.tenancy.service import create_organization, find_organization
from tests.factories import Factory, ledger_keys


async def test_a_slug_spelled_like_another_organizations_id_finds_the_organization_of_that_id(
        db: Database, factory: Factory) -> None:
    """Matching id or slug in one query found two rows, and `scalar_one_or_none` raised: a traceback in the CLI."""
    ws = await factory.workspace()
    async with db.write() as s:
        twin = await create_organization(s, ws.tenant, name="Twin", keys=ledger_keys(), slug=ws.org.id)
    assert twin.slug == ws.org.id
    async with db.read() as s:
        assert (await find_organization(s, ws.tenant, ws.org.id)).id == ws.org.id
        assert (await find_organization(s, ws.tenant, twin.id)).id == twin.id
