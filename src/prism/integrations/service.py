"""Import, re-import and remove integrations; connect organizations to them. Used by the CLI (for the
deployment) and by the `config_manage/integrations/...` handlers (for the caller's organization)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson
from sqlalchemy import Select, delete, func, or_, select
from sqlalchemy.ext.asyncio import AsyncSession

from prism.config import Settings
from prism.errors import Conflict, InvalidArguments, NotFound, PrismError
from prism.integrations.credentials import checked, seal_secret
from prism.integrations.failures import without_credentials
from prism.integrations.models import IntegrationApp, IntegrationConnection
from prism.integrations.names import app_name_problem
from prism.integrations.openapi import compile_document, parse
from prism.integrations.runtime import bump_generation
from prism.integrations.sealed_urls import seal_urls
from prism.integrations.shown_urls import address_only, shown_url
from prism.kit.ids import new_id
from prism.kit.nul import without_nul
from prism.kit.outbound import check_url
from prism.kit.timeutil import iso
from prism.kit.urls import without_secrets
from prism.models import Organization

# Names the deployment's own apps use (and the registry's mega-tool namespaces): never an integration's.
RESERVED_NAMES = frozenset({"core", "integrations", "prism"})


def _key(operation: dict[str, Any]) -> str:
    return f"{operation['entity']}/{operation['operation']}"


def _fingerprint(operation: dict[str, Any]) -> bytes:
    return orjson.dumps(operation, option=orjson.OPT_SORT_KEYS)


async def _named(session: AsyncSession, name: str, *, for_update: bool = False) -> IntegrationApp | None:
    """The integration called `name`; `for_update` locks its row and reads it afresh (see `locked_app`)."""
    stmt = select(IntegrationApp).where(IntegrationApp.name == name)
    return (await session.execute(_locked(stmt) if for_update else stmt)).scalar_one_or_none()


async def locked_app(session: AsyncSession, app_id: str) -> IntegrationApp | None:
    """The integration, its row locked until the transaction ends and read once the lock is held.

    Every change of an integration's operations bumps its `revision`, which is what each process's built app is
    kept by (prism.integrations.runtime). Two changes racing (an import and a refresh of its upstream's tools,
    two imports) would otherwise both read revision N and both write N + 1 with different operations: a
    process that built the first would keep serving it. PostgreSQL takes the lock; SQLite's writers are
    serialised already."""
    return (await session.execute(_locked(select(IntegrationApp).where(IntegrationApp.id == app_id)))
            ).scalar_one_or_none()


def _locked(stmt: Select[IntegrationApp]) -> Select[IntegrationApp]:
    return stmt.with_for_update().execution_options(populate_existing=True)


def _check_name(name: str, installed: frozenset[str]) -> None:
    problem = app_name_problem(name)
    if problem:
        raise InvalidArguments(problem, details={"field": "name"})
    if name in RESERVED_NAMES or name in installed:
        raise _taken(name)


def _taken(name: str) -> Conflict:
    """The one refusal of a name that is not the caller's to take. Names are coordinates, unique across the
    deployment, so a taken one must be refused; whether an installed app, the deployment or another organization
    holds it is not said: another organization's integration does not exist for the caller."""
    return Conflict(f"the name {name!r} is taken; choose another")


@dataclass(frozen=True, slots=True)
class CompiledImport:
    """An OpenAPI description as Prism stores it. Making it (parsing, resolving references, compiling each
    operation) needs no database and takes seconds for a large description, so it is done before the import's
    transaction: a transaction holds SQLite's one writer, and the ledger's batch holds every call of the
    process."""

    operations: list[dict[str, Any]]
    fingerprints: dict[str, bytes]  # entity/operation -> the operation's canonical JSON (what a re-import compares)
    title: str
    description: str
    default_server: str | None
    skipped: list[dict[str, str]]
    spec_digest: str


def compile_openapi(text: str | bytes, *, default_cost: int = 1) -> CompiledImport:
    """The description `text` compiled; `invalid_openapi` when it offers no operation Prism can call."""
    compiled = compile_document(parse(text), default_cost=default_cost)
    if not compiled.operations:
        raise InvalidArguments("spec: no operation Prism can offer", code="invalid_openapi",
                               details={"field": "spec", "skipped": compiled.skipped[:50]})
    return CompiledImport(compiled.operations, _fingerprints(compiled.operations), compiled.title,
                          compiled.description, compiled.default_server, compiled.skipped,
                          hashlib.sha256(text if isinstance(text, bytes) else text.encode()).hexdigest())


async def store_openapi(session: AsyncSession, settings: Settings, name: str, compiled: CompiledImport, *,
                        source: str, owner_organization_id: str | None, installed: frozenset[str]) -> dict[str, Any]:
    """Create or update the integration `name` from a compiled description; what changed, operation by operation.

    `owner_organization_id` None imports for the deployment (the CLI). An integration of another owner with
    that name is a conflict (names are global: they are coordinates)."""
    _check_name(name, installed)
    return await _store(session, settings, name, "openapi", compiled.operations, compiled.fingerprints, source=source,
                        spec_digest=compiled.spec_digest, title=compiled.title, description=compiled.description,
                        default_server=compiled.default_server, owner_organization_id=owner_organization_id,
                        skipped=compiled.skipped)


async def add_mcp(session: AsyncSession, settings: Settings, name: str, url: str, operations: list[dict[str, Any]],
                  *, owner_organization_id: str | None, installed: frozenset[str], title: str = "") -> dict[str, Any]:
    """Create or update the integration `name` from an upstream MCP server's tools (prism.integrations.mcp_upstream)."""
    _check_name(name, installed)
    digest = hashlib.sha256(orjson.dumps(operations, option=orjson.OPT_SORT_KEYS)).hexdigest()
    # Its title and description reach every organization that connects: where the server is, never a token
    # or a credential written into its URL.
    return await _store(session, settings, name, "mcp", operations, _fingerprints(operations), source=url,
                        spec_digest=digest, title=title or address_only(url),
                        description=f"Tools of the MCP server at {address_only(url)}.", default_server=url,
                        owner_organization_id=owner_organization_id, skipped=[])


def _fingerprints(operations: list[dict[str, Any]]) -> dict[str, bytes]:
    return {_key(o): _fingerprint(o) for o in operations}


async def _store(session: AsyncSession, settings: Settings, name: str, kind: str, operations: list[dict[str, Any]],
                 after: dict[str, bytes], *, source: str, spec_digest: str, title: str, description: str,
                 default_server: str | None, owner_organization_id: str | None,
                 skipped: list[dict[str, str]]) -> dict[str, Any]:
    title, description = without_nul(title), without_nul(description)  # an upstream's text, in text columns
    existing = await _named(session, name, for_update=True)
    if existing is not None and (existing.owner_organization_id != owner_organization_id or existing.kind != kind):
        raise _taken(name)
    if owner_organization_id is not None:
        refusal = await over_handler_limit(session, settings, owner_organization_id, existing, len(operations))
        if refusal is not None:
            raise refusal
    before = _fingerprints(existing.operations if existing is not None else [])
    report: dict[str, Any] = {
        "name": name, "kind": kind, "created": existing is None, "handlers": len(after),
        "added": sorted(k for k in after if k not in before),
        "removed": sorted(k for k in before if k not in after),
        "changed": sorted(k for k in after if k in before and before[k] != after[k]),
        "skipped": skipped,
    }
    report["unchanged"] = len(after) - len(report["added"]) - len(report["changed"])
    changed = existing is None or bool(report["added"] or report["removed"] or report["changed"])
    app_id = new_id() if existing is None else existing.id
    # A token in a URL's query string is sealed as a connection's secret is (prism.integrations.sealed_urls).
    kept_source, kept_server = without_secrets(source)[:2048], without_secrets(default_server or "")[:2048] or None
    sealed = seal_urls(settings, app_id, {"source": source, "default_server": default_server})
    if existing is None:
        session.add(IntegrationApp(id=app_id, name=name, kind=kind, title=title[:255], description=description,
                                   source=kept_source, spec_digest=spec_digest, default_server=kept_server,
                                   sealed_urls=sealed, operations=operations,
                                   owner_organization_id=owner_organization_id))
    elif changed:
        existing.operations, existing.revision = operations, existing.revision + 1
        existing.title, existing.description = title[:255], description
        existing.source, existing.spec_digest = kept_source, spec_digest
        existing.default_server, existing.sealed_urls = kept_server, sealed
    if existing is not None:  # what is stored is what was just read: an upstream's announced change is caught up
        existing.status = "ok"
    if changed:
        await bump_generation(session)
    report["revision"] = 1 if existing is None else existing.revision
    return report


async def over_handler_limit(session: AsyncSession, settings: Settings, organization_id: str,
                             existing: IntegrationApp | None, handlers: int) -> PrismError | None:
    """The refusal of `handlers` operations for the organization's integration `existing` (None: a new one) when
    its integrations would then offer more than PRISM_INTEGRATION_HANDLERS_PER_ORGANIZATION. Every process holds
    every organization's imported handlers (registry, search index), connected or not, so one organization must
    not fill every process's memory: the rate of changes alone bounds how fast, not how far. A change that does
    not add handlers passes, so an organization over a lowered limit may still shrink."""
    limit = settings.integration_handlers_per_organization
    had = len(existing.operations) if existing is not None else 0
    if handlers <= had:
        return None
    # Imports of one organization take turns from here to their commit, so that two at once cannot each count
    # without the other (PostgreSQL; SQLite's writers already take turns). NO KEY UPDATE: a governed call's
    # ledger batch holds the row FOR KEY SHARE, which this lock leaves free.
    await session.execute(select(Organization.id).where(Organization.id == organization_id)
                          .with_for_update(key_share=True))
    others = (await session.execute(
        select(func.coalesce(func.sum(func.json_array_length(IntegrationApp.operations)), 0))
        .where(IntegrationApp.owner_organization_id == organization_id,
               IntegrationApp.id != (existing.id if existing is not None else None)))).scalar_one()
    total = int(others) + handlers
    if total <= limit:
        return None
    return PrismError(f"this organization's integrations would offer {total:,} handlers ({handlers:,} in this one, "
                      f"{int(others):,} in its others), over its limit of {limit:,} "
                      "(PRISM_INTEGRATION_HANDLERS_PER_ORGANIZATION); remove an integration, or import fewer "
                      "operations", code="integration_handlers_exceeded", status=409,
                      details={"limit": limit, "handlers": total})


async def remove(session: AsyncSession, name: str, *, owner_organization_id: str | None) -> dict[str, Any]:
    """Remove an integration, its handlers and every organization's connection to it."""
    existing = await _named(session, name)
    if existing is None or existing.owner_organization_id != owner_organization_id:
        raise NotFound(f"no integration {name!r}")
    count = len(existing.operations)
    # Its connections (every organization's) go with it: ON DELETE CASCADE.
    await session.execute(delete(IntegrationApp).where(IntegrationApp.id == existing.id))
    await bump_generation(session)
    return {"name": name, "removed": True, "handlers": count}


async def check_available(session: AsyncSession, name: str, organization_id: str, kind: str,
                          installed: frozenset[str]) -> None:
    """Refuse `name` unless this organization may import under it (as `store_openapi` and `add_mcp` would):
    before anything is read from an upstream."""
    _check_name(name, installed)
    existing = await _named(session, name)
    if existing is not None and (existing.owner_organization_id != organization_id or existing.kind != kind):
        raise _taken(name)


def describe(app: IntegrationApp, *, seen_by: str | None) -> dict[str, Any]:
    """What anyone who may connect to an integration may know of it, its status included: `stale` when its
    upstream announced a tool list that was not stored (`last_error` says why, as it does when a refresh could
    not read the list; the stored one serves).

    `seen_by` is the organization looking (None: the deployment's operator, through the CLI). Its URLs never
    show credentials written into them (`shown_url`); an organization looking at the deployment's integration
    sees only where it is (`address_only`): the operator may have put a token in its query string."""
    shown = url_view(app, seen_by)
    title = shown(app.title) if app.title == app.source else app.title  # an MCP server's title is its URL
    return {"name": app.name, "kind": app.kind, "title": title, "source": shown(app.source),
            "revision": app.revision, "handlers": len(app.operations),
            "owner": "deployment" if app.owner_organization_id is None else "organization",
            "default_server": shown(app.default_server) if app.default_server else app.default_server,
            "updated_at": app.updated_at.isoformat().replace("+00:00", "Z"),
            "status": app.status, "last_error": shown_error(app), "last_error_at": iso(app.last_error_at)}


def shown_error(app: IntegrationApp) -> str | None:
    """Its `last_error`, kept without credentials (prism.integrations.failures): a deployment's as a reason in
    Prism's words, an organization's own as the failure's text. Whatever a URL of the integration holds besides
    its address is withheld again here, for a text kept before that was so."""
    return without_credentials(app.last_error, urls=(app.source, app.default_server or "")) or None


def url_view(app: IntegrationApp, seen_by: str | None) -> Callable[[str], str]:
    """How `seen_by` is shown the integration's URLs: its own (or the operator, all) without credentials, the
    deployment's as their address only."""
    if seen_by is not None and app.owner_organization_id != seen_by:
        return address_only
    return shown_url


async def usable(session: AsyncSession, organization_id: str) -> list[IntegrationApp]:
    """The integrations an organization may connect to: the deployment's and its own."""
    rows = await session.execute(select(IntegrationApp).where(or_(
        IntegrationApp.owner_organization_id.is_(None),
        IntegrationApp.owner_organization_id == organization_id)).order_by(IntegrationApp.name))
    return list(rows.scalars())


async def usable_named(session: AsyncSession, organization_id: str, name: str) -> IntegrationApp:
    app = await _named(session, name)
    if app is None or app.owner_organization_id not in (None, organization_id):
        raise NotFound(f"no integration {name!r}")
    return app


def connection_record(connection: IntegrationConnection, name: str) -> dict[str, Any]:
    """What may be shown of a connection: never its secret, only whether it has one."""
    return {"id": connection.id, "integration": name, "base_url": connection.base_url,
            "auth_kind": connection.auth_kind, "auth_settings": dict(connection.auth_settings),
            "has_secret": connection.secret_encrypted is not None, "timeout_seconds": connection.timeout_seconds,
            "enabled": connection.enabled}


async def checked_credential(settings: Settings, auth_kind: str, auth_settings: dict[str, Any],
                             secret: str | None) -> tuple[dict[str, Any], str]:
    """The credential's settings and secret as kept (`checked`), its token endpoint checked like every outbound
    URL: Prism posts the client's credentials there, before the upstream's own URL is ever asked."""
    kept, secret_text = checked(auth_kind, auth_settings, secret)
    if kept.get("token_url"):
        kept["token_url"] = await check_url(kept["token_url"], field="token_url",
                                            allow_private_networks=settings.webhook_allow_private_networks)
    return kept, secret_text


@dataclass(frozen=True, slots=True)
class CheckedConnection:
    """A connection's settings as far as they are checked without the database: its URLs' hosts resolved under the
    outbound rules, its credential's form. Made before a call's transaction (`checked_connection`), which every
    call of the process may wait on, so a host whose DNS answers slowly holds only its own caller."""

    base_url: str
    auth_kind: str
    auth_settings: dict[str, Any]
    secret: str
    timeout_seconds: int


async def checked_connection(settings: Settings, *, base_url: str, auth_kind: str = "none",
                             auth_settings: dict[str, Any] | None = None, secret: str | None = None,
                             timeout_seconds: int = 10, field: str = "base_url") -> CheckedConnection:
    """A connection's settings checked (base URL and token URL like every outbound URL); `field` names the base
    URL's parameter in a refusal."""
    url = await check_url(base_url.rstrip("/"), field=field,
                          allow_private_networks=settings.webhook_allow_private_networks)
    kept, secret_text = await checked_credential(settings, auth_kind, auth_settings or {}, secret)
    if not 1 <= timeout_seconds <= 60:
        raise InvalidArguments("timeout_seconds: between 1 and 60", details={"field": "timeout_seconds"})
    return CheckedConnection(url, auth_kind, kept, secret_text, timeout_seconds)


async def store_connection(session: AsyncSession, settings: Settings, organization_id: str, name: str,
                           checked: CheckedConnection | PrismError, *, enabled: bool = True) -> dict[str, Any]:
    """Create or replace the organization's connection to `name` with settings `checked_connection` made (or its
    refusal, raised once the integration is found)."""
    app = await usable_named(session, organization_id, name)
    if isinstance(checked, PrismError):
        raise checked
    connection = (await session.execute(select(IntegrationConnection).where(
        IntegrationConnection.organization_id == organization_id,
        IntegrationConnection.integration_id == app.id))).scalar_one_or_none()
    if connection is None:
        connection = IntegrationConnection(id=new_id(), organization_id=organization_id, integration_id=app.id)
        session.add(connection)
    kept, url = checked.auth_settings, checked.base_url
    # A token in a URL's query string is sealed as the secret is (prism.integrations.sealed_urls).
    connection.sealed_urls = seal_urls(settings, connection.id, {"base_url": url, "token_url": kept.get("token_url")})
    if kept.get("token_url"):
        kept = {**kept, "token_url": without_secrets(kept["token_url"])}
    connection.base_url, connection.auth_kind, connection.auth_settings = (without_secrets(url)[:2048],
                                                                           checked.auth_kind, kept)
    connection.secret_encrypted = seal_secret(settings, connection.id, checked.secret)
    connection.timeout_seconds, connection.enabled = checked.timeout_seconds, enabled
    await bump_generation(session)
    await session.flush()
    return connection_record(connection, name)


async def disconnect(session: AsyncSession, organization_id: str, name: str) -> dict[str, Any]:
    app = await usable_named(session, organization_id, name)
    result = await session.execute(delete(IntegrationConnection).where(
        IntegrationConnection.organization_id == organization_id, IntegrationConnection.integration_id == app.id))
    if not getattr(result, "rowcount", 0):
        raise NotFound(f"no connection to {name!r}")
    await bump_generation(session)
    return {"integration": name, "removed": True}


async def connections(session: AsyncSession, organization_id: str) -> list[dict[str, Any]]:
    rows = await session.execute(
        select(IntegrationConnection, IntegrationApp.name)
        .join(IntegrationApp, IntegrationApp.id == IntegrationConnection.integration_id)
        .where(IntegrationConnection.organization_id == organization_id).order_by(IntegrationApp.name))
    return [connection_record(c, name) for c, name in rows.all()]
