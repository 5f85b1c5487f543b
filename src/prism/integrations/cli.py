"""`prism integration …`: the deployment's imported integrations and organizations' connections to them.

An import made here belongs to the deployment (any organization may connect to it); running servers pick it
up within PRISM_INTEGRATIONS_REFRESH_SECONDS, without a restart. A connection's secret is read from the
PRISM_CONNECTION_SECRET environment variable or standard input, never from the command line (where the
process list and the shell's history would keep it).
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from prism.cli.output import JSON_OPT, emit, fail
from prism.cli.preflight import check_apps, load_settings
from prism.cli.transaction import in_transaction
from prism.errors import InvalidArguments, NotFound, PrismError
from prism.integrations import service
from prism.integrations.credentials import Credential, checked
from prism.integrations.failures import failure_of, kept_text
from prism.integrations.models import IntegrationApp
from prism.integrations.openapi import MAX_COST
from prism.integrations.sealed_urls import opened_urls
from prism.kit.outbound import OutboundClient, OutboundFailed, check_url
from prism.kit.timeutil import utcnow

MAX_SPEC_BYTES = 50_000_000

integration_cli = typer.Typer(help="Imported integrations: OpenAPI services as governed handlers.",
                              no_args_is_help=True)


def _run(as_json: bool, work: Any, *, read_only: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = in_transaction(as_json, work, read_only=read_only)
    return out


def _installed_apps(as_json: bool) -> frozenset[str]:
    """The apps this deployment runs (an import may not take one's name); PRISM_APPS checked as `serve` checks it."""
    from prism.registry.registry import build_registry

    settings = load_settings()
    try:
        check_apps(settings)
    except PrismError as exc:
        fail(as_json, exc)
    return frozenset(build_registry(s for s in settings.apps.split(",") if s.strip()).apps)


def _read_spec(as_json: bool, spec: str) -> tuple[bytes, str]:
    """The description's bytes, from a file or an HTTPS URL (fetched under the outbound rules)."""
    if not spec.startswith(("https://", "http://")):
        path = Path(spec)
        try:
            if not path.is_file():
                fail(as_json, InvalidArguments(f"spec: no file {spec}", details={"field": "spec"}))
            return path.read_bytes(), str(path.resolve())
        except OSError as exc:  # unreadable, or a name the file system refuses
            fail(as_json, InvalidArguments(f"spec: cannot read {spec}: {exc.strerror or exc}",
                                           details={"field": "spec"}))

    settings = load_settings()

    async def fetch() -> bytes:
        url = await check_url(spec, field="spec", allow_private_networks=settings.webhook_allow_private_networks)
        async with OutboundClient(allow_private_networks=settings.webhook_allow_private_networks,
                                  ca_bundle=settings.webhook_ca_bundle, max_connections=1) as client:
            answer = await client.send("GET", url, headers={"Accept": "application/json, application/yaml"},
                                       body=None, timeout_seconds=60.0, read_at_most=MAX_SPEC_BYTES)
        if answer.status != 200 or answer.truncated:
            raise PrismError(f"spec: {url} answered HTTP {answer.status}"
                             + (" (too large)" if answer.truncated else ""), code="upstream_error", status=502)
        return answer.body

    try:
        return asyncio.run(fetch()), spec
    except (PrismError, OutboundFailed) as exc:
        fail(as_json, exc if isinstance(exc, PrismError) else PrismError(str(exc), code="upstream_unreachable"))


@integration_cli.command("import-openapi")
def import_openapi(spec: str = typer.Argument(..., help="OpenAPI 3.0/3.1 file (JSON or YAML) or URL."),
                   app: str = typer.Option(..., "--app", help="The integration's name (its handlers' app)."),
                   cost: int = typer.Option(1, "--cost", min=0, max=MAX_COST,
                                            help="Budget units per call (unless an operation declares x-prism-cost)."),
                   as_json: bool = JSON_OPT) -> None:
    """Import (or re-import) an OpenAPI service for the deployment; reports what changed."""
    text, source = _read_spec(as_json, spec)
    installed = _installed_apps(as_json)
    try:  # before the transaction, which would hold SQLite's one writer while the description is compiled
        compiled = service.compile_openapi(text, default_cost=cost)
    except PrismError as exc:
        fail(as_json, exc)

    async def work(session: AsyncSession) -> dict[str, Any]:
        return await service.store_openapi(session, load_settings(), app, compiled, source=source,
                                           owner_organization_id=None, installed=installed)

    out = _run(as_json, work)
    verb = "imported" if out["created"] else "re-imported"
    emit(as_json, out, f"{app} {verb}: {out['handlers']} handlers (added {len(out['added'])}, changed "
                       f"{len(out['changed'])}, removed {len(out['removed'])}, skipped {len(out['skipped'])})")


@integration_cli.command("list")
def list_integrations(as_json: bool = JSON_OPT) -> None:
    """Every imported integration (the deployment's and organizations' own) and its status."""

    async def work(session: AsyncSession) -> dict[str, Any]:
        rows = (await session.execute(select(IntegrationApp).order_by(IntegrationApp.name))).scalars()
        return {"integrations": [service.describe(r, seen_by=None) for r in rows]}

    out = _run(as_json, work, read_only=True)
    emit(as_json, out, "\n".join(f"{i['name']}\t{i['kind']}\t{i['handlers']} handlers\t{i['owner']}\t{i['source']}"
                                 f"\t{i['status']}" + (f" (last error, {i['last_error_at']}: {i['last_error']})"
                                                      if i["last_error"] else "")
                                 for i in out["integrations"]) or "no integrations")


@integration_cli.command("remove")
def remove(name: str, as_json: bool = JSON_OPT) -> None:
    """Remove one of the deployment's integrations: its handlers and every connection to it."""

    async def work(session: AsyncSession) -> dict[str, Any]:
        return await service.remove(session, name, owner_organization_id=None)

    out = _run(as_json, work)
    emit(as_json, out, f"{name} removed ({out['handlers']} handlers)")


@integration_cli.command("connect")
def connect(name: str,
            tenant: str = typer.Option(..., "--tenant", help="Tenant subdomain."),
            org: str | None = typer.Option(None, "--org", help="Organization slug or id (default: the only one)."),
            base_url: str = typer.Option(..., "--base-url", help="The service's base URL."),
            auth_kind: str = typer.Option("none", "--auth", help="none, api_key, bearer, basic or "
                                          "oauth2_client_credentials."),
            header: str | None = typer.Option(None, "--header", help="api_key: the header that carries it."),
            username: str | None = typer.Option(None, "--username", help="basic: the user name."),
            token_url: str | None = typer.Option(None, "--token-url", help="oauth2: the token endpoint."),
            client_id: str | None = typer.Option(None, "--client-id", help="oauth2: the client id."),
            scope: str | None = typer.Option(None, "--scope", help="oauth2: the scope to ask for."),
            timeout: int = typer.Option(10, "--timeout", min=1, max=60, help="Seconds to wait for an answer."),
            secret_stdin: bool = typer.Option(False, "--secret-stdin", help="Read the secret from standard input "
                                              "(else PRISM_CONNECTION_SECRET)."),
            as_json: bool = JSON_OPT) -> None:
    """Connect an organization to an integration; its handlers then appear for that organization."""
    from prism.cli.governance import _organization

    secret = sys.stdin.readline().rstrip("\r\n") if secret_stdin else os.environ.get("PRISM_CONNECTION_SECRET")
    settings = load_settings()
    auth_settings = {k: v for k, v in (("header", header), ("username", username), ("token_url", token_url),
                                       ("client_id", client_id), ("scope", scope)) if v is not None}

    async def check() -> service.CheckedConnection | PrismError:
        try:
            return await service.checked_connection(settings, base_url=base_url, auth_kind=auth_kind,
                                                    auth_settings=auth_settings, secret=secret,
                                                    timeout_seconds=timeout)
        except PrismError as exc:  # refused once the integration is found, as a handler refuses it
            return exc

    # Checked before the transaction: resolving the URLs' hosts may take seconds, during which SQLite's write lock
    # would hold up a running server's writers.
    checked_connection = asyncio.run(check())

    async def work(session: AsyncSession) -> dict[str, Any]:
        _, organization = await _organization(session, tenant, org)
        return await service.store_connection(session, settings, organization.id, name, checked_connection)

    out = _run(as_json, work)
    emit(as_json, out, f"{name} connected at {out['base_url']} ({out['auth_kind']})")


@integration_cli.command("disconnect")
def disconnect(name: str, tenant: str = typer.Option(..., "--tenant", help="Tenant subdomain."),
               org: str | None = typer.Option(None, "--org", help="Organization slug or id."),
               as_json: bool = JSON_OPT) -> None:
    """Remove an organization's connection to an integration."""
    from prism.cli.governance import _organization

    async def work(session: AsyncSession) -> dict[str, Any]:
        _, organization = await _organization(session, tenant, org)
        return await service.disconnect(session, organization.id, name)

    out = _run(as_json, work)
    emit(as_json, out, f"{name} disconnected")


def _credential(as_json: bool, auth_kind: str, header: str | None, username: str | None, token_url: str | None,
                client_id: str | None, scope: str | None, secret_stdin: bool) -> Credential:
    secret = sys.stdin.readline().rstrip("\r\n") if secret_stdin else os.environ.get("PRISM_CONNECTION_SECRET")
    given = {k: v for k, v in (("header", header), ("username", username), ("token_url", token_url),
                               ("client_id", client_id), ("scope", scope)) if v is not None}
    try:
        kept, secret_text = checked(auth_kind, given, secret)
    except PrismError as exc:
        fail(as_json, exc)
    return Credential(auth_kind, kept, secret_text)


def _tools(as_json: bool, url: str, transport: str, credential: Credential,
           on_failure: Callable[[PrismError], None] | None = None) -> list[dict[str, Any]]:
    from prism.integrations.mcp_upstream import read_tools

    try:
        return asyncio.run(read_tools(load_settings(), url, transport, credential))
    except PrismError as exc:
        if on_failure is not None:
            on_failure(exc)
        fail(as_json, exc)


def _keep_refresh_failure(as_json: bool, name: str, exc: PrismError) -> None:
    """A refresh that could not read the list: the stored one keeps serving, and the integration says why to
    every organization that may connect to it — in Prism's words only (`failure_of`): the operator has the
    whole text in the command's own answer."""

    async def work(session: AsyncSession) -> dict[str, Any]:
        row = (await session.execute(select(IntegrationApp).where(IntegrationApp.name == name))).scalar_one_or_none()
        if row is None:  # removed meanwhile
            return {}
        why = kept_text(failure_of(exc), owner_organization_id=row.owner_organization_id)
        row.last_error = f"the tool list could not be read again: {why}; revision {row.revision} still serves"
        row.last_error_at = utcnow()
        return {}

    _run(as_json, work)


@integration_cli.command("add-mcp")
def add_mcp(url: str = typer.Argument(..., help="The MCP server's endpoint (HTTPS)."),
            app: str = typer.Option(..., "--app", help="The integration's name (integration_call/<app>/tool/…)."),
            transport: str = typer.Option("streamable_http", "--transport", help="streamable_http or sse (legacy)."),
            auth_kind: str = typer.Option("none", "--auth", help="none, api_key, bearer, basic or "
                                          "oauth2_client_credentials (to read the tool list; organizations "
                                          "connect with their own)."),
            header: str | None = typer.Option(None, "--header", help="api_key: the header that carries it."),
            username: str | None = typer.Option(None, "--username", help="basic: the user name."),
            token_url: str | None = typer.Option(None, "--token-url", help="oauth2: the token endpoint."),
            client_id: str | None = typer.Option(None, "--client-id", help="oauth2: the client id."),
            scope: str | None = typer.Option(None, "--scope", help="oauth2: the scope to ask for."),
            cost: int = typer.Option(1, "--cost", min=0, max=MAX_COST, help="Budget units per call."),
            secret_stdin: bool = typer.Option(False, "--secret-stdin", help="Read the secret from standard input "
                                              "(else PRISM_CONNECTION_SECRET)."),
            as_json: bool = JSON_OPT) -> None:
    """Add (or refresh) an upstream MCP server for the deployment: each of its tools becomes a handler."""
    from prism.integrations.mcp_upstream import operations_of

    credential = _credential(as_json, auth_kind, header, username, token_url, client_id, scope, secret_stdin)
    tools = _tools(as_json, url, transport, credential)
    installed = _installed_apps(as_json)

    async def work(session: AsyncSession) -> dict[str, Any]:
        return await service.add_mcp(session, load_settings(), app, url, operations_of(tools, transport, cost),
                                     owner_organization_id=None, installed=installed)

    out = _run(as_json, work)
    emit(as_json, out, f"{app}: {out['handlers']} tools (added {len(out['added'])}, changed {len(out['changed'])}, "
                       f"removed {len(out['removed'])})")


@integration_cli.command("refresh")
def refresh(name: str,
            auth_kind: str = typer.Option("none", "--auth", help="As for add-mcp."),
            header: str | None = typer.Option(None, "--header"),
            username: str | None = typer.Option(None, "--username"),
            token_url: str | None = typer.Option(None, "--token-url"),
            client_id: str | None = typer.Option(None, "--client-id"),
            scope: str | None = typer.Option(None, "--scope"),
            secret_stdin: bool = typer.Option(False, "--secret-stdin"), as_json: bool = JSON_OPT) -> None:
    """Read an upstream MCP integration's tool list again (from the URL it was added from) and update it."""
    from prism.integrations.mcp_upstream import operations_of

    async def current(session: AsyncSession) -> dict[str, Any]:
        row = (await session.execute(select(IntegrationApp).where(IntegrationApp.name == name))).scalar_one_or_none()
        if row is None or row.kind != "mcp" or row.owner_organization_id is not None:
            raise NotFound(f"no upstream MCP integration {name!r} of the deployment")
        first = row.operations[0] if row.operations else {}
        urls = opened_urls(load_settings(), row.id, row.sealed_urls)  # the URL as added, token included
        url = urls.get("default_server") or row.default_server or urls.get("source") or row.source
        return {"url": url, "transport": first.get("transport", "streamable_http"),
                "cost": int(first.get("cost", 1))}

    found = _run(as_json, current, read_only=True)
    credential = _credential(as_json, auth_kind, header, username, token_url, client_id, scope, secret_stdin)
    tools = _tools(as_json, found["url"], found["transport"], credential,
                   on_failure=lambda exc: _keep_refresh_failure(as_json, name, exc))
    installed = _installed_apps(as_json)

    async def work(session: AsyncSession) -> dict[str, Any]:
        operations = operations_of(tools, found["transport"], found["cost"])
        return await service.add_mcp(session, load_settings(), name, found["url"], operations,
                                     owner_organization_id=None, installed=installed)

    out = _run(as_json, work)
    emit(as_json, out, f"{name}: {out['handlers']} tools (added {len(out['added'])}, changed {len(out['changed'])}, "
                       f"removed {len(out['removed'])})")
