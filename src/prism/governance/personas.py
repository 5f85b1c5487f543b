"""Persona service: create, change, delete and attach personas (shared by the config_manage handlers and the CLI).

Every change bumps the persona's `version`, which is what compiled matchers are cached by, with the persona's
row locked: concurrent changes get one version each, never one version for two sets of rules. A persona
attached to keys or OAuth clients cannot be deleted: detaching it silently would lift every restriction it
imposed. A key carries its persona and AI system itself; an OAuth client gets them per organization
(`ClientGovernance`), since one client's tokens may act in any organization whose user consented.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator
from sqlalchemy import func, or_, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from prism.errors import Conflict, NotFound
from prism.governance.models import AiSystem, ClientGovernance, Persona
from prism.governance.policy import MAX_PATTERNS, validate_pattern
from prism.kit.timeutil import utcnow
from prism.models import ApiKey
from prism.oauth.models import OAuthClient, OAuthGrant, OAuthGrantOrganization
from prism.tenancy.repository import OrgRepository, sent_changes, to_record
from prism.tenancy.scope import across_organizations

Priority = Literal["low", "normal", "high", "critical"]
# What `prism persona attach none` means: detach. No persona may be named so (in any case), or attaching it
# by name would lift the key's persona instead.
DETACH_WORD = "none"


class PersonaChanges(BaseModel):
    """Fields of a persona a caller may set; every one optional (an update changes only what it names)."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    description: str | None = Field(None, max_length=2000)
    allow: list[str] | None = Field(None, max_length=MAX_PATTERNS,
                                    description="Coordinate patterns allowed, e.g. entity_crud/finance/invoice/*.")
    deny: list[str] | None = Field(None, max_length=MAX_PATTERNS,
                                   description="Coordinate patterns refused; deny wins over allow.")
    oversight: list[str] | None = Field(None, max_length=MAX_PATTERNS,
                                        description="Coordinate patterns that need a human's approval.")
    default: Literal["allow", "deny"] | None = Field(None, description="Effect when no pattern matches.")
    # strict: JSON's true is not the number 1 (pydantic's lax mode would take it as one).
    cost_cap: int | None = Field(None, ge=0, le=10**9, strict=True,
                                 description="Highest declared cost one call may have.")
    oversight_priority: Priority | None = None
    oversight_sla_seconds: int | None = Field(None, ge=1, le=30 * 86400, strict=True,
                                              description="Time a human has to decide an oversight request.")
    # strict: JSON's true and false only, not 1, 0 or "yes".
    require_mission: bool | None = Field(None, strict=True,
                                         description="Refuse calls that name no mission (X-Prism-Mission or "
                                                     "mission_id), except read-only calls of cost 0 and "
                                                     "whoami, introspection and capability search.")

    @field_validator("allow", "deny", "oversight")
    @classmethod
    def _patterns(cls, value: list[str] | None) -> list[str] | None:
        if value is not None:
            for pattern in value:
                validate_pattern(pattern)
        return value

    @field_validator("name", mode="before", check_fields=False)
    @classmethod
    def _unpadded(cls, value: Any) -> Any:
        return unpadded_name(value)

    @field_validator("name", check_fields=False)
    @classmethod
    def _not_the_detach_word(cls, value: str | None) -> str | None:
        if value is not None and value.lower() == DETACH_WORD:
            raise ValueError(f"{value!r} is reserved: `prism persona attach {DETACH_WORD}` detaches a persona")
        return value


def unpadded_name(value: Any) -> Any:
    """A name (of a persona, of an AI system) as sent, refused if it begins or ends with white space. Refused
    rather than stripped: the CLI and the console find one by the name as typed, and a name kept other than it was
    sent would not be found by it."""
    if isinstance(value, str) and value != value.strip():
        raise ValueError(f"{value!r} begins or ends with white space; send the name without it")
    return value


def _name(default: Any) -> Any:
    return Field(default, min_length=1, max_length=100, pattern=r"^[A-Za-z0-9]([A-Za-z0-9 _.-]*[A-Za-z0-9_.-])?$",
                 description="Letters, digits, spaces, _ . -; begins with a letter or digit, ends with no space.")


class PersonaCreate(PersonaChanges):
    name: str = _name(...)


class PersonaUpdate(PersonaChanges):
    name: str | None = _name(None)


def repository(session: AsyncSession, organization_id: str) -> OrgRepository[Persona]:
    return OrgRepository(session, Persona, organization_id, label="persona")


def persona_record(persona: Persona) -> dict[str, Any]:
    record = to_record(persona)
    record["default"] = record.pop("default_effect")
    return record


def _apply(persona: Persona, changes: PersonaChanges) -> None:
    values = changes.model_dump(exclude_unset=True, exclude={"name"})
    for field, value in values.items():
        if value is None and field not in ("cost_cap",):
            continue
        setattr(persona, "default_effect" if field == "default" else field, value)


async def create_persona(session: AsyncSession, *, organization_id: str, tenant_id: str,
                         fields: PersonaCreate) -> dict[str, Any]:
    persona = repository(session, organization_id).add(
        tenant_id=tenant_id, name=fields.name, description="", allow=[], deny=[], oversight=[], default_effect="deny",
        cost_cap=None, oversight_priority="normal", oversight_sla_seconds=3600, require_mission=False,
        version=1)
    _apply(persona, fields)
    await _flush_unique(session, fields.name)
    return persona_record(persona)


async def update_persona(session: AsyncSession, *, organization_id: str, persona_id: str,
                         changes: PersonaChanges) -> dict[str, Any]:
    # Locked: two updates racing (the CLI and the API, say) would otherwise both read version N and both write
    # N + 1 with different rules, and a process that compiled the first would serve it under N + 1 for good.
    persona = await repository(session, organization_id).get(persona_id, for_update=True)
    # The fields sent, and only those: null clears (description, patterns, cost_cap); name, default, the
    # oversight settings and require_mission cannot be cleared.
    for column, value in sent_changes(changes, Persona, rename={"default": "default_effect"}).items():
        setattr(persona, column, value)
    persona.version += 1
    persona.updated_at = utcnow()
    await _flush_unique(session, persona.name)
    return persona_record(persona)


async def delete_persona(session: AsyncSession, *, organization_id: str, persona_id: str) -> dict[str, Any]:
    persona = await repository(session, organization_id).get(persona_id)
    keys, clients = await holders(session, organization_id, "persona_id", persona_id)
    if keys or clients:
        raise Conflict(f"persona {persona.name!r} is attached to {keys} key(s) and {clients} OAuth client(s); "
                       "detach it first", code="persona_in_use")
    await session.delete(persona)
    await session.flush()
    return {"id": persona_id, "deleted": True}


async def find_key(session: AsyncSession, organization_id: str, key_ref: str) -> ApiKey:
    """A key of the organization by id or by its displayed prefix; another organization's key is not found."""
    key = (await session.execute(OrgRepository(session, ApiKey, organization_id).base().where(
        or_(ApiKey.id == key_ref, ApiKey.lookup == key_ref)))).scalar_one_or_none()
    if key is None:
        raise NotFound(f"key {key_ref!r} not found", code="not_found")
    return key


async def holders(session: AsyncSession, organization_id: str, column: str, value: str) -> tuple[int, int]:
    """How many keys and OAuth clients of the organization carry this persona (or AI system) now."""
    keys = (await session.execute(select(func.count()).select_from(ApiKey).where(
        ApiKey.organization_id == organization_id, getattr(ApiKey, column) == value))).scalar_one()
    clients = (await session.execute(select(func.count()).select_from(ClientGovernance).where(
        ClientGovernance.organization_id == organization_id, getattr(ClientGovernance, column) == value))).scalar_one()
    return int(keys), int(clients)


async def attach(session: AsyncSession, *, organization_id: str, column: str, value: str | None,
                 key_ref: str | None = None, client_id: str | None = None, tenant_id: str | None = None,
                 ) -> dict[str, Any]:
    """Set the `persona_id` or `ai_system_id` (None unties it) of a key of the organization, or of an OAuth
    client's tokens in the organization (`client_id`, with the organization's `tenant_id`). The persona or AI
    system must belong to the organization. `changed` in the answer says whether anything was different
    before: detaching what is not attached is a no-op, not an error."""
    if value is not None:
        model, label = (Persona, "persona") if column == "persona_id" else (AiSystem, "AI system")
        await OrgRepository(session, model, organization_id, label=label).get(value)
    if client_id is not None:
        assert tenant_id is not None, "a client's governance is recorded with its organization's tenant"
        return await _attach_client(session, organization_id, tenant_id, client_id, column, value)
    assert key_ref is not None, "attach names a key or a client"
    key = await find_key(session, organization_id, key_ref)
    before = getattr(key, column)
    await session.execute(update(ApiKey).where(ApiKey.id == key.id, ApiKey.organization_id == organization_id)
                          .values({column: value}).execution_options(synchronize_session=False))
    row = (await session.execute(select(ApiKey.persona_id, ApiKey.ai_system_id).where(ApiKey.id == key.id))).one()
    return {"key_id": key.id, "key_prefix": key.lookup, "persona_id": row.persona_id,
            "ai_system_id": row.ai_system_id, "changed": before != value}


async def _attach_client(session: AsyncSession, organization_id: str, tenant_id: str, client_id: str, column: str,
                         value: str | None) -> dict[str, Any]:
    client_name = (await session.execute(select(OAuthClient.client_name).where(
        OAuthClient.client_id == client_id))).scalar_one_or_none()
    row = (await session.execute(select(ClientGovernance).where(
        ClientGovernance.organization_id == organization_id, ClientGovernance.client_id == client_id))
           ).scalar_one_or_none()
    if client_name is None or (row is None and not await _authorized_in(session, organization_id, client_id)):
        # Registrations are shared by every tenant: one no member of this organization ever authorized is
        # another tenant's business, and answering as if it did not exist tells nothing about it.
        raise NotFound(f"OAuth client {client_id!r} not found", code="not_found")
    before = getattr(row, column) if row is not None else None
    if row is None:
        if value is None:
            return _client_record(client_id, client_name, None, None, changed=False)
        row = ClientGovernance(organization_id=organization_id, tenant_id=tenant_id, client_id=client_id)
        session.add(row)
    setattr(row, column, value)
    row.updated_at = utcnow()
    persona_id, ai_system_id = row.persona_id, row.ai_system_id
    if persona_id is None and ai_system_id is None:  # nothing left to say about this client here
        await session.delete(row)
    await session.flush()
    return _client_record(client_id, client_name, persona_id, ai_system_id, changed=before != value)


async def _authorized_in(session: AsyncSession, organization_id: str, client_id: str) -> bool:
    """Whether the client's tokens may act in the organization: one of its grants was consented for it (a grant
    may name several organizations; its tokens act in those alone, docs/oauth.md)."""
    # Across organizations on purpose: the grant may belong to another organization (its default) and still name
    # this one; only whether one exists is read, never the grant itself.
    named = OAuthGrantOrganization
    consented = select(named.grant_id).join(OAuthGrant, OAuthGrant.id == named.grant_id).where(
        OAuthGrant.client_id == client_id, named.organization_id == organization_id)
    found = (await session.execute(across_organizations(consented.limit(1)))).first()
    return found is not None


def _client_record(client_id: str, client_name: str, persona_id: str | None, ai_system_id: str | None, *,
                   changed: bool) -> dict[str, Any]:
    return {"client_id": client_id, "client_name": client_name, "persona_id": persona_id,
            "ai_system_id": ai_system_id, "changed": changed}


async def list_personas(session: AsyncSession, organization_id: str) -> list[dict[str, Any]]:
    rows = (await session.execute(repository(session, organization_id).base().order_by(Persona.name))).scalars()
    return [persona_record(p) for p in rows]


async def _flush_unique(session: AsyncSession, name: str) -> None:
    try:
        async with session.begin_nested():
            await session.flush()
    except IntegrityError:
        raise Conflict(f"a persona named {name!r} already exists", code="conflict") from None
