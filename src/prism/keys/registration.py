"""POST /api/mcp/api-keys/register/: a user trades email + password for an `mcp_` key.

Which organization the key is bound to (SPEC.md is silent, see docs/limits.md "API-key registration"):
- `organization` in the body (id or slug) picks one of the user's organizations on this host;
- otherwise the user's earliest membership on this host.
On a tenant host only that tenant's organizations count; on the platform (and portal) host every
organization of the user, in any tenant.

The key is minted by the keys handler (`config_manage/keys/key/create`, door `registration`) as the person whose
email and password were checked (credential `password`): `keys.add_key` is checked as on the console and the key
dashboard, and the registration leaves a ledger entry (the arguments' digest, never the key).
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from prism.auth.context import AuthContext
from prism.auth.person import membership_in, person_context
from prism.config import Settings
from prism.errors import BadRequest, NotFound, PermissionDenied, Unauthenticated
from prism.identity.passwords import password_matches
from prism.identity.service import get_user
from prism.keys.service import DEFAULT_KEY_NAME, check_tool_surface
from prism.kit.ids import stored_organization_id
from prism.kit.timeutil import utcnow
from prism.models import Membership, Organization, User
from prism.registry.mega_tools import PLATFORM_SCOPES
from prism.storage import Database
from prism.tenancy.hosts import HostInfo
from prism.tenancy.service import require_tenant

MAX_FIELD_LENGTH = 1024


@dataclass(frozen=True)
class RegistrationRequest:
    email: str
    password: str
    name: str
    organization: str | None
    tool_surface: str | None = None


class BadCredentials(Unauthenticated):
    code = "invalid_credentials"


def _text(body: dict[str, Any], field: str, *, required: bool) -> str | None:
    value = body.get(field)
    if value is None and not required:
        return None
    if not isinstance(value, str) or (required and not value):
        raise BadRequest(f"{field}: required, a string", code="invalid_body", field=field)
    if len(value) > MAX_FIELD_LENGTH:
        raise BadRequest(f"{field}: at most {MAX_FIELD_LENGTH} characters", code="invalid_body",
                         field=field)
    return value


def parse_request(body: dict[str, Any]) -> RegistrationRequest:
    email = _text(body, "email", required=True)
    password = _text(body, "password", required=True)
    name = (_text(body, "name", required=False) or "").strip()[:255] or DEFAULT_KEY_NAME
    organization = _text(body, "organization", required=False)
    tool_surface = check_tool_surface(_text(body, "tool_surface", required=False))
    assert email is not None and password is not None
    return RegistrationRequest(email.strip(), password, name, organization.strip() if organization else None,
                               tool_surface)


async def check_credentials(db: Database, settings: Settings, email: str, password: str) -> User:
    """The person whose email and password these are; the password is checked outside any transaction (the hash
    takes a worker thread tens to hundreds of milliseconds, which a held connection would wait through)."""
    async with db.read() as session:
        user = await get_user(session, email)
    ok = await password_matches(user.password_hash if user else None, password, settings)
    if user is None or not ok:
        raise BadCredentials("invalid email or password")
    if not user.is_active:
        raise BadCredentials("this user is inactive", code="user_inactive")
    return user


async def organizations_on_host(session: AsyncSession, user: User, host: HostInfo) -> list[Organization]:
    stmt = (select(Organization).join(Membership, Membership.organization_id == Organization.id)
            .where(Membership.user_id == user.id).order_by(Membership.created_at, Organization.id))
    if host.kind == "tenant":
        assert host.subdomain is not None
        tenant = await require_tenant(session, host.subdomain)
        stmt = stmt.where(Organization.tenant_id == tenant.id)
    return list((await session.execute(stmt)).scalars())


async def registration_organization(session: AsyncSession, user: User, request: RegistrationRequest, *,
                                    host: HostInfo) -> Organization:
    """The organization the key is for (the module's docstring says which)."""
    organizations = await organizations_on_host(session, user, host)
    if not organizations:
        raise PermissionDenied(f"{user.email} belongs to no organization on {host.hostname or 'this host'}",
                               code="no_organization")
    if request.organization is None:
        return organizations[0]
    stored = stored_organization_id(request.organization)  # org_<hex> or the UUID
    matches = [o for o in organizations if o.id == stored or o.slug == request.organization]
    if not matches:
        raise NotFound(f"organization {request.organization!r} not found among your organizations",
                       code="organization_not_found", field="organization")
    if len(matches) > 1:  # a slug repeated across tenants on the platform host
        raise BadRequest(f"organization {request.organization!r} is ambiguous here; send its id",
                         code="ambiguous_organization", field="organization")
    return matches[0]


async def registrant(session: AsyncSession, user: User, organization: Organization) -> AuthContext:
    """The person whose email and password were just checked, acting in `organization` with their role there
    (credential `password`: one registration, named by a random id in the ledger)."""
    return person_context(user, await membership_in(session, user, organization.id), credential_kind="password",
                          credential_id=f"password:{secrets.token_hex(14)[:27]}", key_name="Key registration",
                          signed_in_at=utcnow())


def key_arguments(request: RegistrationRequest) -> dict[str, Any]:
    """The keys handler's `create` arguments for a registration: every scope, no expiry (DESIGN.md)."""
    return {"name": request.name, "scopes": list(PLATFORM_SCOPES), "expires_days": None,
            "tool_surface": request.tool_surface}
