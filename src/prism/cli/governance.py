"""`prism persona …` and `prism governance audit`: the security team's levers from the command line.

The commands call the same services as the config_manage / governance_review handlers.
"""

from __future__ import annotations

from typing import Any

import typer
from sqlalchemy import or_, select
from sqlalchemy.ext.asyncio import AsyncSession

from prism.cli.output import JSON_OPT, emit
from prism.cli.transaction import in_transaction
from prism.errors import InvalidArguments, NotFound, PrismError
from prism.governance import personas
from prism.governance.models import Persona
from prism.governance.post_hoc_audit import MAX_HOURS, run_audit
from prism.models import ApiKey, Organization, Tenant
from prism.tenancy.service import find_organization, list_organizations, require_tenant

TENANT_OPT = typer.Option(..., "--tenant", help="Tenant subdomain.")
ORG_OPT = typer.Option(None, "--org", help="Organization slug or id (default: the tenant's only organization).")
ALLOW_OPT = typer.Option(None, "--allow", help="Allowed coordinate pattern (repeatable).")
DENY_OPT = typer.Option(None, "--deny", help="Denied coordinate pattern (repeatable); deny wins.")
OVERSIGHT_OPT = typer.Option(None, "--oversight", help="Pattern that needs human approval (repeatable).")
DEFAULT_OPT = typer.Option(None, "--default", help="allow or deny when no pattern matches.")
COST_CAP_OPT = typer.Option(None, "--cost-cap", help="Highest declared cost of one call.")
REQUIRE_MISSION_OPT = typer.Option(None, "--require-mission/--no-require-mission",
                                   help="Refuse calls that name no mission (read-only cost-0 calls and "
                                        "whoami/introspection/search excepted).")

persona_cli = typer.Typer(help="Personas: allow/deny/oversight policies attached to keys and OAuth clients.",
                          no_args_is_help=True)
governance_cli = typer.Typer(help="Governance: the post-hoc audit.", no_args_is_help=True)


def _run(as_json: bool, work: Any, *, read_only: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = in_transaction(as_json, work, read_only=read_only)
    return out


async def _organization(session: AsyncSession, tenant: str, org: str | None) -> tuple[Tenant, Organization]:
    t = await require_tenant(session, tenant)
    if org:
        return t, await find_organization(session, t, org)
    orgs = await list_organizations(session, t)
    if len(orgs) != 1:
        raise PrismError(f"tenant {tenant} has {len(orgs)} organizations; name one with --org",
                         code="organization_required", status=400)
    return t, orgs[0]


async def _persona(session: AsyncSession, organization_id: str, ref: str) -> Persona:
    """By id, else by name: a persona may be named like another one's id, and the id is what names one for sure."""
    personas_here = personas.repository(session, organization_id).base()
    found = (await session.execute(personas_here.where(Persona.id == ref))).scalar_one_or_none()
    if found is None:
        found = (await session.execute(personas_here.where(Persona.name == ref))).scalar_one_or_none()
    if found is None:
        raise NotFound(f"persona {ref!r} not found", code="not_found")
    return found


def _changes(allow: list[str] | None, deny: list[str] | None, oversight: list[str] | None, default: str | None,
             cost_cap: int | None, require_mission: bool | None) -> dict[str, Any]:
    values: dict[str, Any] = {"allow": allow, "deny": deny, "oversight": oversight, "default": default,
                              "cost_cap": cost_cap, "require_mission": require_mission}
    return {k: v for k, v in values.items() if v is not None}


def _validated(model: type[personas.PersonaChanges], values: dict[str, Any]) -> Any:
    from pydantic import ValidationError

    try:
        return model.model_validate(values)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        field = ".".join(str(p) for p in first["loc"]) or "arguments"
        raise InvalidArguments(f"{field}: {first['msg']}", field=field) from None


@persona_cli.command("create")
def persona_create(name: str, tenant: str = TENANT_OPT, org: str | None = ORG_OPT, allow: list[str] | None = ALLOW_OPT,
                   deny: list[str] | None = DENY_OPT, oversight: list[str] | None = OVERSIGHT_OPT,
                   default: str | None = DEFAULT_OPT, cost_cap: int | None = COST_CAP_OPT,
                   require_mission: bool | None = REQUIRE_MISSION_OPT, as_json: bool = JSON_OPT) -> None:
    """Create a persona."""
    async def work(session: AsyncSession) -> dict[str, Any]:
        fields = _validated(personas.PersonaCreate,
                            {"name": name, **_changes(allow, deny, oversight, default, cost_cap, require_mission)})
        t, o = await _organization(session, tenant, org)
        return await personas.create_persona(session, organization_id=o.id, tenant_id=t.id, fields=fields)

    out = _run(as_json, work)
    emit(as_json, out, f"persona {out['name']} ({out['id']}) created")


@persona_cli.command("list")
def persona_list(tenant: str = TENANT_OPT, org: str | None = ORG_OPT, as_json: bool = JSON_OPT) -> None:
    """List the personas of an organization."""

    async def work(session: AsyncSession) -> dict[str, Any]:
        _, o = await _organization(session, tenant, org)
        return {"personas": await personas.list_personas(session, o.id)}

    out = _run(as_json, work, read_only=True)
    emit(as_json, out, "\n".join(f"{p['name']}\t{p['id']}\tdefault {p['default']}\tdeny {p['deny']}"
                                 + ("\tmission required" if p["require_mission"] else "")
                                 for p in out["personas"]) or "no personas")


@persona_cli.command("update")
def persona_update(persona: str, tenant: str = TENANT_OPT, org: str | None = ORG_OPT,
                   allow: list[str] | None = ALLOW_OPT, deny: list[str] | None = DENY_OPT,
                   oversight: list[str] | None = OVERSIGHT_OPT, default: str | None = DEFAULT_OPT,
                   cost_cap: int | None = COST_CAP_OPT, require_mission: bool | None = REQUIRE_MISSION_OPT,
                   as_json: bool = JSON_OPT) -> None:
    """Change a persona (by id or name); each given list replaces the current one."""
    async def work(session: AsyncSession) -> dict[str, Any]:
        changes = _validated(personas.PersonaChanges,
                             _changes(allow, deny, oversight, default, cost_cap, require_mission))
        _, o = await _organization(session, tenant, org)
        found = await _persona(session, o.id, persona)
        return await personas.update_persona(session, organization_id=o.id, persona_id=found.id, changes=changes)

    out = _run(as_json, work)
    emit(as_json, out, f"persona {out['name']} is now version {out['version']}")


@persona_cli.command("delete")
def persona_delete(persona: str, tenant: str = TENANT_OPT, org: str | None = ORG_OPT,
                   as_json: bool = JSON_OPT) -> None:
    """Delete a persona no key uses."""

    async def work(session: AsyncSession) -> dict[str, Any]:
        _, o = await _organization(session, tenant, org)
        found = await _persona(session, o.id, persona)
        return await personas.delete_persona(session, organization_id=o.id, persona_id=found.id)

    out = _run(as_json, work)
    emit(as_json, out, f"persona {out['id']} deleted")


@persona_cli.command("attach")
def persona_attach(persona: str = typer.Argument(..., help="Persona id or name; 'none' detaches."),
                   key: str | None = typer.Option(None, "--key", help="Key id or displayed prefix."),
                   client: str | None = typer.Option(None, "--client",
                                                     help="OAuth client id: its tokens acting in --org."),
                   tenant: str = TENANT_OPT, org: str | None = ORG_OPT, as_json: bool = JSON_OPT) -> None:
    """Attach a persona to an API key (in the key's own organization), or to an OAuth client's tokens acting
    in an organization."""

    async def work(session: AsyncSession) -> dict[str, Any]:
        if (key is None) == (client is None):
            raise InvalidArguments("name exactly one of --key and --client")
        if client is not None:
            t, o = await _organization(session, tenant, org)
            organization_id = o.id
        else:
            t = await require_tenant(session, tenant)
            found = (await session.execute(select(ApiKey.organization_id).where(
                ApiKey.tenant_id == t.id, or_(ApiKey.id == key, ApiKey.lookup == key)))).scalar_one_or_none()
            if found is None:
                raise NotFound(f"key {key!r} not found in tenant {tenant}", code="not_found")
            organization_id = found
        # "none" is never a persona's name (prism.governance.personas.DETACH_WORD), so it always means detach.
        persona_id = None if persona == personas.DETACH_WORD else (await _persona(session, organization_id, persona)).id
        return await personas.attach(session, organization_id=organization_id, column="persona_id",
                                     value=persona_id, key_ref=key, client_id=client, tenant_id=t.id)

    out = _run(as_json, work)
    holder = f"key {out['key_prefix']}" if "key_prefix" in out else f"OAuth client {out['client_id']}"
    emit(as_json, out, f"{holder} now has persona {out['persona_id'] or 'none'}")


@governance_cli.command("audit")
def governance_audit(tenant: str = TENANT_OPT, org: str | None = ORG_OPT,
                     hours: float = typer.Option(24, "--hours", min=0.001, max=MAX_HOURS,
                                                 help="How far back to re-check (at most 90 days)."),
                     as_json: bool = JSON_OPT) -> None:
    """Re-check recent ledger entries against the current personas; report (and emit) new violations."""

    async def work(session: AsyncSession) -> dict[str, Any]:
        t, o = await _organization(session, tenant, org)
        report = await run_audit(session, organization_id=o.id, tenant_id=t.id, hours=hours)
        return {"organization": o.slug, **report}

    out = _run(as_json, work)
    lines = [f"{out['organization']}: {out['checked']} entries re-checked, {len(out['violations'])} new violations"]
    lines += [f"  {v['severity']}\tseq {v['audit_seq']}\t{v['coordinate']}\t{v['reason']}" for v in out["violations"]]
    emit(as_json, out, "\n".join(lines))
