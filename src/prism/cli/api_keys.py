"""`prism key`: a tenant's API keys, minted, listed and revoked by the operator."""

from __future__ import annotations

from typing import Any

import typer
from sqlalchemy.ext.asyncio import AsyncSession

from prism.cli.output import JSON_OPT, emit
from prism.cli.transaction import in_transaction
from prism.errors import PrismError
from prism.identity.service import memberships_in_tenant, require_user
from prism.keys.service import ListedKey, create_key, key_status, revoke_key, tenant_keys
from prism.kit.ids import public_organization_id
from prism.kit.timeutil import iso, utcnow
from prism.tenancy.service import find_organization, require_tenant

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
    """Mint an API key bound to one user and one organization. The plaintext is shown once."""
    async def work(session: AsyncSession) -> dict[str, Any]:
        t = await require_tenant(session, tenant)
        user = await require_user(session, email)
        if org:
            organization = await find_organization(session, t, org)
        else:
            orgs = await memberships_in_tenant(session, user, t.id)
            if not orgs:
                raise PrismError(f"{email} belongs to no organization of {tenant}", code="not_a_member",
                                 status=403)
            organization = orgs[0]
        minted = await create_key(session, tenant=t, user=user, organization=organization, name=name,
                                  scopes=scopes, expires_days=expires_days, prefix=prefix,
                                  tool_surface=tool_surface)
        k = minted.key
        return {"api_key": minted.plaintext, "key_id": k.id, "key_prefix": k.lookup, "name": k.name,
                "scopes": k.scopes.split(), "tool_surface": k.tool_surface,
                "organization": public_organization_id(organization.id),
                "organization_name": organization.name, "expires_at": iso(k.expires_at)}

    out = in_transaction(as_json, work)
    emit(as_json, out, f"{out['api_key']}\n(key {out['key_prefix']} for {email} in {out['organization_name']}; "
                       "shown once)")


@key_cli.command("revoke")
def key_revoke(key: str = typer.Argument(..., help="Key id or displayed prefix."),
               tenant: str = typer.Option(..., "--tenant"), as_json: bool = JSON_OPT) -> None:
    """Revoke an API key."""

    async def work(session: AsyncSession) -> dict[str, Any]:
        k = await revoke_key(session, tenant=await require_tenant(session, tenant), key_ref=key)
        return {"key_id": k.id, "key_prefix": k.lookup, "revoked_at": iso(k.revoked_at)}

    out = in_transaction(as_json, work)
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
        listed = [_listed(found, key_status(found.key, now))
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
