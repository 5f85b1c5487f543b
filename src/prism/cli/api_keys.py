"""`prism key`: a tenant's API keys, minted, listed and revoked by the operator.

Minting and revoking go through the keys handlers, as on the console, the key dashboard and key registration, so
each leaves a ledger entry in the key's organization (door `cli`, credential `operator`; prism.auth.operator
says what the operator may do)."""

from __future__ import annotations

from typing import Any

import typer
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from prism.auth.operator import minting_context, revoking_context
from prism.auth.person import MembershipRow, memberships
from prism.cli.dispatching import dispatch_as_operator
from prism.cli.output import JSON_OPT, emit
from prism.cli.transaction import in_transaction, on_database
from prism.config import Settings
from prism.errors import PrismError
from prism.identity.service import memberships_in_tenant, require_user
from prism.keys.service import (
    ListedKey,
    check_key_options,
    check_tool_surface,
    find_tenant_key,
    normalize_scopes,
    tenant_keys,
)
from prism.kit.ids import public_organization_id
from prism.kit.timeutil import iso, utcnow
from prism.models import ApiKey, Organization, User
from prism.storage import Database
from prism.tenancy.service import find_organization, require_tenant

CREATE, REVOKE = "config_manage/keys/key/create", "config_manage/keys/key/revoke"

key_cli = typer.Typer(help="API keys.", no_args_is_help=True)


@key_cli.command("create")
def key_create(tenant: str = typer.Option(..., "--tenant"), email: str = typer.Option(..., "--email"),
               org: str | None = typer.Option(None, "--org", help="Default: the user's first organization."),
               scopes: str | None = typer.Option(None, "--scopes", help='Default "mcp:read mcp:write mcp:execute".'),
               name: str | None = typer.Option(None, "--name"),
               expires_days: int | None = typer.Option(None, "--expires-days"),
               prefix: str = typer.Option("mcp", "--prefix", help="ck or mcp."),
               tool_surface: str | None = typer.Option(
                   None, "--tool-surface", help="The MCP tool surface of this key: mega (13 doors) or split "
                                                "(_read/_write/_destructive). Default: PRISM_MCP_TOOL_SURFACE."),
               as_json: bool = JSON_OPT) -> None:
    """Mint an API key bound to one user and one organization. The plaintext is shown once. It is minted through
    config_manage/keys/key/create for the user, with their role there (door cli, credential operator)."""
    async def work(db: Database, settings: Settings) -> dict[str, Any]:
        async with db.read() as session:
            user, membership = await _holder(session, tenant, email, org)
        # Checked here for the command's own error codes (the handler would answer invalid_arguments).
        check_key_options(prefix, expires_days)
        arguments = {"name": (name or "").strip()[:255], "scopes": normalize_scopes(scopes).split(),
                     "expires_days": expires_days, "tool_surface": check_tool_surface(tool_surface), "prefix": prefix}
        minted = await dispatch_as_operator(db, settings, minting_context(user, membership), CREATE, arguments)
        return {"api_key": minted["api_key"], "key_id": minted["id"], "key_prefix": minted["prefix"],
                "name": minted["name"], "scopes": minted["scopes"], "tool_surface": minted["tool_surface"],
                "organization": public_organization_id(membership.id), "organization_name": membership.name,
                "expires_at": minted["expires_at"]}

    out = on_database(as_json, work)
    emit(as_json, out, f"{out['api_key']}\n(key {out['key_prefix']} for {email} in {out['organization_name']}; "
                       "shown once)")


async def _holder(session: AsyncSession, tenant: str, email: str, org: str | None) -> tuple[User, MembershipRow]:
    """The user a key is minted for and their membership in the organization named (default: their first in the
    tenant); not_a_member when they have none there."""
    t = await require_tenant(session, tenant)
    user = await require_user(session, email)
    if org:
        organization = await find_organization(session, t, org)
    else:
        orgs = await memberships_in_tenant(session, user, t.id)
        if not orgs:
            raise PrismError(f"{email} belongs to no organization of {tenant}", code="not_a_member", status=403)
        organization = orgs[0]
    membership = (await session.execute(memberships(user).where(Organization.id == organization.id))).one_or_none()
    if membership is None:
        raise PrismError(f"{email} is not a member of {organization.slug}", code="not_a_member", status=403)
    return user, membership


@key_cli.command("revoke")
def key_revoke(key: str = typer.Argument(..., help="Key id or displayed prefix."),
               tenant: str = typer.Option(..., "--tenant"), as_json: bool = JSON_OPT) -> None:
    """Revoke an API key, through config_manage/keys/key/revoke for its holder (door cli, credential operator):
    the operator may revoke any key of the tenant, whatever its holder's role."""

    async def work(db: Database, settings: Settings) -> dict[str, Any]:
        async with db.read() as session:
            t = await require_tenant(session, tenant)
            found = await find_tenant_key(session, tenant=t, key_ref=key)
            holder = await session.get(User, found.user_id)
            organization = await session.get(Organization, found.organization_id)
            assert holder is not None and organization is not None  # the key's foreign keys
        revoked = await dispatch_as_operator(db, settings, revoking_context(holder, organization, t), REVOKE,
                                             {"id": found.id})
        async with db.read() as session:
            revoked_at = (await session.execute(select(ApiKey.revoked_at).where(ApiKey.id == found.id))).scalar_one()
        return {"key_id": revoked["id"], "key_prefix": revoked["prefix"], "revoked_at": iso(revoked_at)}

    out = on_database(as_json, work)
    emit(as_json, out, f"key {out['key_prefix']} revoked")


@key_cli.command("list")
def key_list(tenant: str = typer.Option(..., "--tenant"),
             org: str | None = typer.Option(None, "--org", help="Only this organization's keys (id or slug)."),
             email: str | None = typer.Option(None, "--email", help="Only this user's keys."),
             active: bool = typer.Option(False, "--active", help="Only keys that still authenticate."),
             as_json: bool = JSON_OPT) -> None:
    """List a tenant's API keys, newest first: prefix, status, holder, organization, name, last use. Never a
    secret: Prism keeps only each key's hash."""

    async def work(session: AsyncSession) -> dict[str, Any]:
        t = await require_tenant(session, tenant)
        organization = await find_organization(session, t, org) if org else None
        user = await require_user(session, email) if email else None
        now = utcnow()
        listed = [_listed(found, found.status(now))
                  for found in await tenant_keys(session, tenant=t, organization=organization, user=user)]
        return {"keys": [k for k in listed if k["status"] == "active" or not active]}

    out = in_transaction(as_json, work, read_only=True)
    emit(as_json, out, "\n".join(
        f"{k['prefix']}\t{k['status']}\t{k['user']}\t{k['organization_slug']}\t{k['name']}\t"
        f"last used {k['last_used_at'] or 'never'}" for k in out["keys"]) or "no keys")


def _listed(found: ListedKey, status: str) -> dict[str, Any]:
    k = found.key
    return {"key_id": k.id, "prefix": k.lookup, "name": k.name, "status": status, "user": found.email,
            "organization": public_organization_id(found.organization.id),
            "organization_slug": found.organization.slug, "scopes": k.scopes.split(), "tool_surface": k.tool_surface,
            "created_at": iso(k.created_at), "last_used_at": iso(k.last_used_at), "expires_at": iso(k.expires_at),
            "revoked_at": iso(k.revoked_at)}
