"""keys: the caller's own API keys in the organization (config_manage/keys/key/...).

Seeing one's own keys takes `keys.view_key`, which every seeded role holds (`*.view_*`): a permission, not
none, so that an OAuth token scoped to another app (`spare_parts.view`) cannot list the person's credentials,
as it may call whoami or introspection. Minting (`keys.add_key`) and revoking (`keys.change_key`) are write
operations on the caller's own keys only, which every seeded role holds (a viewer's key can do no more than the
viewer); a tenant's own role without them is refused. Every way of minting or revoking a key goes through these
handlers: the console (`/console/keys/`), the key dashboard (`/keys/`), key registration
(`POST /api/mcp/api-keys/register/`) and the operator's `prism key create|revoke` (door `cli`), so the permission
means the same everywhere (but for the operator's revocation, which a holder's role never stops:
prism.auth.operator) and each leaves a ledger entry. Minting and revoking are for a person (`people_only`): signed
in with a browser session (credential `console`: the console and the dashboard), with an email and password
checked for this one request (credential `password`: registration), or the deployment's operator acting for the
key's holder (credential `operator`). An API key or OAuth token neither sees nor calls them: a leaked or governed
one (with a persona, an AI system) could otherwise make itself an ungoverned key that outlives it, or revoke every
other key of its owner; and a viewer's agent keeps a surface that only reads. The new key's plaintext is in
the answer once; Prism keeps only its hash, and the ledger entry only the digest of the arguments. Another
person's key, or another organization's, is not found.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from prism.apps import shipped_examples
from prism.apps.params import ListParams, Params
from prism.errors import NotFound
from prism.keys.service import create_key, key_status
from prism.kit.paging import envelope
from prism.kit.timeutil import iso, utcnow
from prism.models import ApiKey, Organization, Tenant, User
from prism.registry import HandlerApp, HandlerCall
from prism.tenancy.repository import OrgRepository, text_search

app = HandlerApp("keys", description="Your own API keys in this organization.",
                 examples=shipped_examples())

Scope = Literal["mcp:read", "mcp:write", "mcp:execute"]
KEYWORDS = ("api key", "credential", "token", "access key", "rotate key")


class KeyCreate(Params):
    name: str = Field("", max_length=255, description="A name to recognise the key by.")
    scopes: list[Scope] = Field(..., min_length=1, max_length=3, description="What the key may do.")
    expires_days: int | None = Field(None, ge=1, le=3650, description="Days until it expires; none: never.")
    tool_surface: Literal["mega", "split"] | None = Field(
        None, description="The MCP tools it sees: mega (the 13 doors) or split (read, write and destructive tools "
                          "apart); none: the deployment's setting. A URL's ?tools= overrides it.")
    prefix: Literal["ck", "mcp"] | None = Field(
        None, description="ck or mcp (both authenticate the same); none: how it is minted decides (ck on the console "
                          "and /keys/, mcp on key registration and the command line).")


class KeyRevoke(Params):
    id: str = Field(..., min_length=1, max_length=64, description="The key's id.")


# Who may mint, and the prefix their keys carry unless asked otherwise: a browser session's keys are `ck_`,
# registration's and the operator's `mcp_` (SPEC.md: `mcp_` for operator-issued or registration-issued keys).
PREFIX_BY_PERSON_CREDENTIAL = {"console": "ck", "password": "mcp", "operator": "mcp"}

# What a list of keys may be ordered by; newest first unless asked.
KEY_ORDERING = ("created_at", "name", "last_used_at", "expires_at")


def _repository(call: HandlerCall) -> OrgRepository[ApiKey]:
    return OrgRepository(call.session, ApiKey, call.organization_id, label="key")


def _own(call: HandlerCall) -> Any:
    return _repository(call).base().where(ApiKey.user_id == call.auth.user_id)


def _record(key: ApiKey) -> dict[str, Any]:
    return {"id": key.id, "prefix": key.lookup, "name": key.name, "scopes": key.scopes.split(),
            "tool_surface": key.tool_surface, "created_at": iso(key.created_at), "last_used_at": iso(key.last_used_at),
            "expires_at": iso(key.expires_at), "status": key_status(key, utcnow())}


@app.handler("config_manage", "key", "list", params=ListParams, scope="read", permission="keys.view_key",
             keywords=KEYWORDS, description="List your own API keys in this organization (never their secrets).")
async def list_keys(call: HandlerCall, p: ListParams) -> dict[str, Any]:
    repository = _repository(call)
    stmt = text_search(_own(call), [ApiKey.name, ApiKey.lookup], p.search)
    ordered = repository.ordered(stmt, p.ordering, KEY_ORDERING, "-created_at")  # a bad ordering: 400, no query
    total = await repository.total(stmt)
    keys = (await call.session.execute(ordered.limit(p.page_size).offset(p.offset))).scalars()
    return envelope([_record(k) for k in keys], p.page, p.page_size, total)


@app.handler("config_manage", "key", "create", params=KeyCreate, scope="write", people_only=True,
             keywords=KEYWORDS, description="Mint an API key for yourself in this organization (as a person: the "
                                            "console, /keys/, key registration or the operator's command line, "
                                            "never with a key or token); its plaintext is in this answer once.")
async def create(call: HandlerCall, p: KeyCreate) -> dict[str, Any]:
    prefix = p.prefix or PREFIX_BY_PERSON_CREDENTIAL[call.auth.credential_kind]  # a person: the dispatcher checked
    session = call.session
    tenant, user = await session.get(Tenant, call.auth.tenant_id), await session.get(User, call.auth.user_id)
    organization = await session.get(Organization, call.organization_id)
    assert tenant is not None and user is not None and organization is not None
    minted = await create_key(session, tenant=tenant, user=user, organization=organization, name=p.name or None,
                              scopes=" ".join(p.scopes), expires_days=p.expires_days, prefix=prefix,
                              tool_surface=p.tool_surface)
    return {**_record(minted.key), "api_key": minted.plaintext}


@app.handler("config_manage", "key", "revoke", params=KeyRevoke, scope="write", people_only=True,
             destructive=True, keywords=KEYWORDS,
             description="Revoke one of your own API keys (as a person: the console, /keys/ or the operator's command "
                         "line, never with a key or token): refused on every Prism process within "
                         "PRISM_CREDENTIAL_CACHE_SECONDS (5 s by default).")
async def revoke(call: HandlerCall, p: KeyRevoke) -> dict[str, Any]:
    key = (await call.session.execute(_own(call).where(ApiKey.id == p.id))).scalar_one_or_none()
    if key is None:
        raise NotFound(f"key {p.id!r} not found among your keys", code="not_found")
    if key.revoked_at is None:
        key.revoked_at = utcnow()
        await call.session.flush()
    return _record(key)
