"""A token acts only in the organizations its user consented it for on the consent page: the default one
without X-Organization-Context, another consented one with it, nowhere else; membership and role are those of
today, read again on every request (the test app caches credentials for 0 seconds)."""

from __future__ import annotations

import re

import httpx
import jwt
from sqlalchemy import delete, select

from prism.identity.service import add_to_organization
from prism.kit.ids import stored_organization_id
from prism.models import Membership, Organization, User
from prism.oauth.models import OAuthGrant, OAuthGrantOrganization
from prism.storage import Database
from tests.factories import Factory, Workspace
from tests.oauth_support import (
    OAUTH,
    authorize_params,
    bearer,
    browser,
    consent,
    offered_organizations,
    pkce,
    register,
    sign_in,
    tokens_for,
)

WHOAMI = "/api/mcp/tools/prism_whoami/"
CANONICAL = "/api/mcp/tools/prism_entity_crud/"
CREATE_PART = {"operation": "create", "app": "spare_parts", "entity": "spare_part",
               "arguments": {"sku": "SKU-CONSENT", "name": "Bolt"}}


async def _join(db: Database, ws: Workspace, org: Organization, role: str = "owner") -> None:
    """The workspace owner becomes a member of `org` (of any tenant) with `role`."""
    async with db.write() as s:
        user = (await s.execute(select(User).where(User.email == ws.emails["owner"]))).scalar_one()
        await add_to_organization(s, user, org, role=role)


async def _leave(db: Database, ws: Workspace, org: Organization) -> None:
    # What an administrator's removal of the member does to the database (Prism has no removal command yet).
    async with db.write() as s:
        user = (await s.execute(select(User).where(User.email == ws.emails["owner"]))).scalar_one()
        await s.execute(delete(Membership).where(Membership.user_id == user.id,
                                                 Membership.organization_id == org.id))


async def _whoami(c: httpx.AsyncClient, token: str, organization: str | None = None) -> httpx.Response:
    headers = bearer(token) | ({"X-Organization-Context": organization} if organization is not None else {})
    return await c.post(WHOAMI, headers=headers, json={})


def _acting_in(answer: httpx.Response) -> str:
    assert answer.status_code == 200, answer.text
    organization_id = stored_organization_id(answer.json()["data"]["organization"]["id"])  # shown as org_<hex>
    assert organization_id is not None
    return organization_id


def _refused(answer: httpx.Response, code: str) -> None:
    assert answer.status_code == 403, answer.text
    assert answer.json()["error"] == code, answer.text


async def test_a_token_acts_in_each_consented_organization_and_by_default_in_the_first_listed(
        app: object, db: Database, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    second = await factory.second_org(ws, "Second org")
    await _join(db, ws, second, role="viewer")
    async with browser(app, ws.host) as c:
        # Chosen in the other order than the page lists them: the page's order decides the default.
        tokens = await tokens_for(c, ws, organizations=[second.id, ws.org.id])
        token = tokens["access_token"]
        default = await _whoami(c, token)
        hexadecimal = second.id.replace("-", "")
        forms = [await _whoami(c, token, value) for value in (
            second.id, second.id.upper(), hexadecimal, f"org_{hexadecimal}", f"org_{second.id}", f"  {second.id} ")]
        write_in_second = await c.post(CANONICAL, json=CREATE_PART, headers={
            **bearer(token), "X-Organization-Context": second.id})
        garbage = await _whoami(c, token, "accounting")
        userinfo = await c.get(f"{OAUTH}/userinfo/", headers=bearer(token))
    assert _acting_in(default) == ws.org.id  # "Main org" is listed before "Second org"
    assert [_acting_in(answer) for answer in forms] == [second.id] * len(forms)
    assert forms[0].json()["data"]["organization"]["role"] == "viewer"
    _refused(write_in_second, "permission_denied")  # the role in that organization applies there
    assert garbage.status_code == 400 and garbage.json()["error"] == "invalid_organization_context"
    assert userinfo.json()["org"] == ws.org.id


async def test_a_token_is_refused_in_an_organization_of_its_user_it_was_not_consented_for(
        app: object, db: Database, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    sandbox, production = await factory.second_org(ws, "Sandbox"), await factory.second_org(ws, "Production")
    await _join(db, ws, sandbox)
    await _join(db, ws, production)
    stranger = await factory.workspace(roles=("owner",))
    async with browser(app, ws.host) as c:
        token = (await tokens_for(c, ws, organizations=[sandbox.id]))["access_token"]
        default = await _whoami(c, token)
        to_production = await _whoami(c, token, production.id)
        to_main = await _whoami(c, token, ws.org.id)
        to_someone_elses = await _whoami(c, token, stranger.org.id)
        write = await c.post(CANONICAL, json=CREATE_PART, headers={
            **bearer(token), "X-Organization-Context": production.id})
        on_the_path_door = await c.post("/prism/entity_crud/spare_parts/spare_part/list", json={}, headers={
            **bearer(token), "X-Organization-Context": production.id})
        on_the_mcp_door = await c.post("/api/mcp/sse", json={"jsonrpc": "2.0", "id": 1, "method": "initialize",
                                                              "params": {}}, headers={
            **bearer(token), "X-Organization-Context": production.id, "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream"})
    assert _acting_in(default) == sandbox.id
    for answer in (to_production, to_main, to_someone_elses, write, on_the_path_door):
        _refused(answer, "organization_not_consented")
    assert on_the_mcp_door.status_code == 403, on_the_mcp_door.text
    assert on_the_mcp_door.json()["error"]["data"]["error"] == "organization_not_consented"


async def test_a_platform_host_token_is_refused_in_another_tenants_organization_it_was_not_consented_for(
        app: object, db: Database, factory: Factory) -> None:
    ws, other = await factory.workspace(roles=("owner",)), await factory.workspace(roles=("owner",))
    await _join(db, ws, other.org)  # the user is a member in both tenants
    async with browser(app, "localhost") as c:
        client = await register(c)
        await sign_in(c, ws.emails["owner"])
        page = await c.get(f"{OAUTH}/authorize/", params=authorize_params(client["client_id"], pkce()[1]))
        only_first = (await tokens_for(c, ws, client=client, organizations=[ws.org.id]))["access_token"]
        both = (await tokens_for(c, ws, client=client, organizations=[ws.org.id, other.org.id]))["access_token"]
        refused = await _whoami(c, only_first, other.org.id)
        in_other_tenant = await _whoami(c, both, other.org.id)
        in_first_tenant = await _whoami(c, both)
    # The page says plainly which tenants' organizations it offers, grouped by tenant.
    offered = re.sub(r"\s+", " ", page.text)
    for tenant in (ws.tenant, other.tenant):
        assert f"<strong>{tenant.name}</strong> ({tenant.subdomain})" in offered
        assert f'data-tenant="{tenant.subdomain}"' in page.text
    assert set(offered_organizations(page.text)) == {ws.org.id, other.org.id}
    _refused(refused, "organization_not_consented")
    assert _acting_in(in_other_tenant) == other.org.id
    assert in_other_tenant.json()["data"]["tenant"]["subdomain"] == other.tenant.subdomain
    assert _acting_in(in_first_tenant) in (ws.org.id, other.org.id)


async def test_a_tenant_host_offers_only_that_tenants_organizations_and_refuses_another(
        app: object, db: Database, factory: Factory) -> None:
    ws, other = await factory.workspace(roles=("owner",)), await factory.workspace(roles=("owner",))
    await _join(db, ws, other.org)
    async with browser(app, ws.host) as c:
        client = await register(c)
        await sign_in(c, ws.emails["owner"])
        page = await c.get(f"{OAUTH}/authorize/", params=authorize_params(client["client_id"], pkce()[1]))
        smuggled = await consent(c, authorize_params(client["client_id"], pkce()[1]), email=ws.emails["owner"],
                                 organizations=[ws.org.id, other.org.id])
    assert offered_organizations(page.text) == [ws.org.id]
    assert "platform host" not in page.text
    assert smuggled.status_code == 400 and "location" not in smuggled.headers


async def test_allowing_without_choosing_an_organization_shows_the_consent_page_again(
        app: object, db: Database, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    await _join(db, ws, await factory.second_org(ws, "Second org"))
    async with browser(app, ws.host) as c:
        client = await register(c)
        answer = await consent(c, authorize_params(client["client_id"], pkce()[1]), email=ws.emails["owner"],
                               organizations=[])
    assert answer.status_code == 400 and "location" not in answer.headers
    assert 'id="consent-error"' in answer.text and "Choose at least one organization" in answer.text
    assert len(offered_organizations(answer.text)) == 2  # the same choice, offered again


async def test_removing_the_user_from_an_organization_ends_the_tokens_power_there_at_once(
        app: object, db: Database, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    second = await factory.second_org(ws, "Second org")
    await _join(db, ws, second, role="admin")  # not its owner: the last owner keeps that role
    async with browser(app, ws.host) as c:
        token = (await tokens_for(c, ws, organizations=[ws.org.id, second.id]))["access_token"]
        assert _acting_in(await _whoami(c, token, second.id)) == second.id
        await _join(db, ws, second, role="viewer")  # a role changed is seen by the next request
        demoted = await c.post(CANONICAL, json=CREATE_PART, headers={
            **bearer(token), "X-Organization-Context": second.id})
        await _leave(db, ws, second)
        left_second = await _whoami(c, token, second.id)
        still_default = await _whoami(c, token)
        await _leave(db, ws, ws.org)
        left_all = [await _whoami(c, token), await _whoami(c, token, ws.org.id), await _whoami(c, token, second.id)]
    _refused(demoted, "permission_denied")
    _refused(left_second, "organization_forbidden")
    assert _acting_in(still_default) == ws.org.id
    for answer in left_all:
        _refused(answer, "organization_forbidden")


async def test_a_refreshed_token_keeps_the_consented_organizations(
        app: object, db: Database, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    second, third = await factory.second_org(ws, "Second org"), await factory.second_org(ws, "Third org")
    await _join(db, ws, second)
    await _join(db, ws, third)
    async with browser(app, ws.host) as c:
        tokens = await tokens_for(c, ws, organizations=[ws.org.id, second.id])
        refreshed = await c.post(f"{OAUTH}/token/", data={
            "grant_type": "refresh_token", "refresh_token": tokens["refresh_token"],
            "client_id": tokens["client"]["client_id"]})
        assert refreshed.status_code == 200, refreshed.text
        token = refreshed.json()["access_token"]
        answers = [await _whoami(c, token), await _whoami(c, token, second.id), await _whoami(c, token, third.id)]
    assert [_acting_in(a) for a in answers[:2]] == [ws.org.id, second.id]
    _refused(answers[2], "organization_not_consented")


async def test_the_grant_records_the_chosen_organizations_and_nothing_else(
        app: object, db: Database, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    second = await factory.second_org(ws, "Second org")
    await _join(db, ws, second)
    await _join(db, ws, await factory.second_org(ws, "Not chosen"))
    async with browser(app, ws.host) as c:
        token = (await tokens_for(c, ws, organizations=[ws.org.id, second.id]))["access_token"]
    grant_id = jwt.decode(token, options={"verify_signature": False})["sid"]
    async with db.read() as s:
        recorded = set((await s.execute(select(OAuthGrantOrganization.organization_id).where(
            OAuthGrantOrganization.grant_id == grant_id))).scalars())
        default = (await s.execute(select(OAuthGrant.organization_id).where(OAuthGrant.id == grant_id))).scalar_one()
    assert recorded == {ws.org.id, second.id} and default == ws.org.id
