"""`config_manage/integrations/...`: an organization imports OpenAPI services as its own integrations and
connects to integrations (its own or the deployment's). docs/integrations.md.

Changes are made in the call's transaction (with its audit entry); once committed, this process rebuilds its
registry before answering, so the caller's next call already sees the new handlers. A description is fetched
(given by URL) and compiled in a child process (prism.integrations.compiling) before that transaction
(`Handler.prepare`): the ledger's batch, which every call of the process waits on, only stores it, and one that
cannot be fetched or compiled is refused by the call itself, so its audit entry says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import orjson
from pydantic import Field, model_validator

from prism.config import Settings
from prism.errors import PrismError
from prism.integrations import service
from prism.integrations.compiling import compile_apart
from prism.integrations.credentials import AUTH_KINDS
from prism.integrations.failures import failure_of
from prism.integrations.openapi import MAX_COST, SpecError
from prism.integrations.runtime import IntegrationRuntime, runtime_of
from prism.kit.outbound import OutboundClient, OutboundFailed, check_url
from prism.kit.paging import Paging, page_of
from prism.registry import AfterCommit, HandlerCall, Params

from prism.apps.integrations.handlers import app  # isort: skip  (the app these handlers belong to)
from prism.kit.secret import URL_WITH_SECRETS, WRITE_ONLY
from prism.ratelimit.limiter import INTEGRATION_CHANGES

MAX_SPEC_BYTES = 20_000_000
# Every change of an organization's integrations makes each process rebuild its registry and search index, work
# every organization shares: counted per organization (PRISM_RATE_LIMIT_INTEGRATION_CHANGES, docs/limits.md).
CHANGES = INTEGRATION_CHANGES
NAME = r"^[a-z][a-z0-9_]{0,39}$"


class ImportParams(Params):
    name: str = Field(..., pattern=NAME, description="The integration's name: handlers are "
                      "integration_call/<name>/<entity>/<operation>.")
    spec: str | dict[str, Any] | None = Field(None, description="The OpenAPI 3.0/3.1 description (JSON object, "
                                              "or JSON/YAML text). Give this or url.")
    url: str | None = Field(None, max_length=2048, description="Where to fetch the description from (HTTPS).",
                            json_schema_extra=URL_WITH_SECRETS)
    default_cost: int = Field(1, ge=0, le=MAX_COST, description="Budget units per call, unless an operation "
                              "declares x-prism-cost.")

    @model_validator(mode="after")
    def _one_source(self) -> ImportParams:
        if (self.spec is None) == (self.url is None):
            raise ValueError("give either spec or url")
        return self


class NameParams(Params):
    name: str = Field(..., pattern=NAME, description="The integration's name.")


class CredentialParams(NameParams):
    """How Prism authenticates to an upstream service: a connection's and an upstream MCP server's."""

    auth_kind: Literal["none", "api_key", "bearer", "basic", "oauth2_client_credentials"] = Field(
        "none", description=f"How calls authenticate: {', '.join(AUTH_KINDS)}.")
    secret: str | None = Field(None, max_length=8192, description="API key, token, password or client secret; "
                               "stored encrypted, never shown again.", json_schema_extra=WRITE_ONLY)
    header: str | None = Field(None, max_length=64, description="api_key: the header that carries it.")
    username: str | None = Field(None, max_length=255, description="basic: the user name.")
    token_url: str | None = Field(None, max_length=2048, description="oauth2_client_credentials: token endpoint.",
                                  json_schema_extra=URL_WITH_SECRETS)
    client_id: str | None = Field(None, max_length=255, description="oauth2_client_credentials: client id.")
    scope: str | None = Field(None, max_length=1000, description="oauth2_client_credentials: scope to ask for.")
    timeout_seconds: int = Field(10, ge=1, le=60, description="Seconds to wait for each answer.")


def _credential_settings(p: CredentialParams) -> dict[str, Any]:
    """The credential's settings the caller gave (its secret apart)."""
    return {k: v for k, v in (("header", p.header), ("username", p.username), ("token_url", p.token_url),
                              ("client_id", p.client_id), ("scope", p.scope)) if v is not None}


class ConnectParams(CredentialParams):
    base_url: str = Field(..., min_length=8, max_length=2048, description="The service's base URL (HTTPS).",
                          json_schema_extra=URL_WITH_SECRETS)
    enabled: bool = Field(True, description="Disabled: the integration's handlers disappear for the organization.")


class ListParams(Paging):
    pass


def _runtime(call: HandlerCall) -> IntegrationRuntime | None:
    return runtime_of(call.registry)


def _then_refresh(call: HandlerCall, data: dict[str, Any]) -> AfterCommit[None]:
    """Answer `data` once this process serves the change (its registry rebuilt after the commit)."""
    runtime = _runtime(call)

    async def refresh() -> None:
        if runtime is not None:
            await runtime.refresh()

    async def answer(done: HandlerCall, outcome: None) -> dict[str, Any]:
        return data

    return AfterCommit(refresh, answer)


def _installed(call: HandlerCall) -> frozenset[str]:
    """Apps of the deployment's own code: an integration cannot take their names."""
    return frozenset(name for name, a in call.registry.apps.items()
                     if not any(h.integration is not None for h in a.handlers))


@dataclass(frozen=True, slots=True)
class Described:
    """A description to import, compiled, and where it came from."""

    compiled: service.CompiledImport
    source: str


async def _described(p: ImportParams, settings: Settings) -> Described:
    """The description fetched (given by URL) and compiled, before the call's ledger unit (`Handler.prepare`).

    Before it, not after its commit: the call's one audit entry must say what its answer says, and a description
    that cannot be fetched or compiled is a refusal of the call (the handler never runs). The fetch is a GET under
    the outbound rules, made once scopes, role and arguments are checked."""
    if p.spec is not None:
        text: str | bytes = p.spec if isinstance(p.spec, str) else _as_text(p.spec)
        source = "(inline)"
    else:
        assert p.url is not None
        source = await check_url(p.url, field="url", allow_private_networks=settings.webhook_allow_private_networks)
        text = await _fetched(source, settings)
    compiled = await compile_apart(text, default_cost=p.default_cost, seconds=settings.integration_compile_seconds,
                                   memory_mb=settings.integration_compile_memory_mb)
    return Described(compiled, source)


async def _fetched(url: str, settings: Settings) -> bytes:
    """The description at `url`; a 502 when it cannot be had whole."""
    try:
        async with OutboundClient(allow_private_networks=settings.webhook_allow_private_networks,
                                  ca_bundle=settings.webhook_ca_bundle, max_connections=1) as client:
            answer = await client.send("GET", url, headers={"Accept": "application/json, application/yaml"},
                                       body=None, timeout_seconds=30.0, read_at_most=MAX_SPEC_BYTES)
    except OutboundFailed as exc:  # its text, without what the URL's query string holds
        raise PrismError(f"url: could not fetch the description: {failure_of(exc, urls=(url,)).detail}",
                         code="upstream_unreachable", status=502) from None
    if answer.status != 200 or answer.truncated:
        raise PrismError(f"url: the description could not be fetched (HTTP {answer.status}"
                         + (f", larger than {MAX_SPEC_BYTES} bytes" if answer.truncated else "") + ")",
                         code="upstream_error", status=502, details={"upstream_status": answer.status})
    return answer.body


@app.handler("config_manage", "integration", "importOpenapi", params=ImportParams, scope="write",
             permission="integrations.manage_integration", cost=1, prepare=_described, limit=CHANGES,
             description="Import an OpenAPI 3.0/3.1 service as this organization's integration: each operation "
                         "becomes a governed handler integration_call/<name>/<entity>/<operation>. Importing "
                         "again updates it in place and reports what changed.",
             keywords=("openapi import", "add api", "bring your own api", "swagger", "connect service"))
async def import_openapi(call: HandlerCall, p: ImportParams) -> AfterCommit[None]:
    described: Described = call.prepared
    report = await service.store_openapi(call.session, call.settings, p.name, described.compiled,
                                         source=described.source, owner_organization_id=call.organization_id,
                                         installed=_installed(call))
    return _then_refresh(call, report)


def _as_text(spec: dict[str, Any]) -> bytes:
    """A description given as a JSON object, as the text the import reads (and digests)."""
    try:
        return orjson.dumps(spec)
    except orjson.JSONEncodeError:  # nested past what orjson encodes; it could not be stored either
        raise SpecError("spec: nested too deeply to read") from None


class AddMcpParams(CredentialParams):
    url: str = Field(..., min_length=8, max_length=2048, description="The MCP server's endpoint (HTTPS).",
                     json_schema_extra=URL_WITH_SECRETS)
    transport: Literal["streamable_http", "sse"] = Field("streamable_http", description="streamable_http, or sse "
                                                         "for the legacy HTTP+SSE transport.")
    default_cost: int = Field(1, ge=0, le=MAX_COST, description="Budget units per call.")


@dataclass(frozen=True, slots=True)
class UpstreamRead:
    """An upstream MCP server's tools as stored operations, and the connection they were read with."""

    operations: list[dict[str, Any]]
    connection: service.CheckedConnection


async def _read_upstream(p: AddMcpParams, settings: Settings) -> UpstreamRead | PrismError:
    """The upstream's URL and credential checked and its tools read, before the call's ledger unit
    (`Handler.prepare`): the call's one audit entry then says what its answer says (a server that cannot be read
    refuses the call, and nothing is stored). The refusal is returned, not raised: the handler raises it after the
    caller's own refusals (a name that is not the caller's to take)."""
    from prism.integrations.credentials import Credential
    from prism.integrations.mcp_upstream import operations_of, read_tools

    try:
        checked = await service.checked_connection(settings, base_url=p.url, auth_kind=p.auth_kind,
                                                   auth_settings=_credential_settings(p), secret=p.secret,
                                                   timeout_seconds=p.timeout_seconds, field="url")
        credential = Credential(p.auth_kind, checked.auth_settings, checked.secret)
        tools = await read_tools(settings, p.url, p.transport, credential, float(p.timeout_seconds))
    except PrismError as exc:
        return exc
    return UpstreamRead(operations_of(tools, p.transport, p.default_cost), checked)


@app.handler("config_manage", "integration", "addMcp", params=AddMcpParams, scope="write",
             permission="integrations.manage_integration", prepare=_read_upstream, limit=CHANGES,
             description="Add an upstream MCP server as this organization's integration and connect to it: each of "
                         "its tools becomes a governed handler integration_call/<name>/tool/<tool>. Adding it again "
                         "reads its tools again and reports what changed.",
             keywords=("mcp federation", "upstream mcp server", "add mcp tools", "connect mcp"))
async def add_mcp(call: HandlerCall, p: AddMcpParams) -> AfterCommit[None]:
    installed = _installed(call)
    await service.check_available(call.session, p.name, call.organization_id, "mcp", installed)
    read: UpstreamRead | PrismError = call.prepared
    if isinstance(read, PrismError):
        raise read
    report = await service.add_mcp(call.session, call.settings, p.name, p.url, read.operations,
                                   owner_organization_id=call.organization_id, installed=installed)
    await service.store_connection(call.session, call.settings, call.organization_id, p.name, read.connection)
    return _then_refresh(call, report)


@app.handler("config_manage", "integration", "remove", params=NameParams, scope="write",
             permission="integrations.manage_integration", destructive=True, limit=CHANGES,
             description="Remove one of this organization's integrations: its handlers and connections go.",
             keywords=("delete integration", "uninstall api"))
async def remove_integration(call: HandlerCall, p: NameParams) -> AfterCommit[None]:
    return _then_refresh(call, await service.remove(call.session, p.name,
                                                    owner_organization_id=call.organization_id))


@app.handler("config_manage", "integration", "list", params=ListParams, scope="read",
             permission="integrations.view_integration",
             description="The integrations this organization may connect to (the deployment's and its own), and "
                         "whether it is connected.", keywords=("imported apis", "connected services"))
async def list_integrations(call: HandlerCall, p: ListParams) -> dict[str, Any]:
    connected = {c["integration"]: c for c in await service.connections(call.session, call.organization_id)}
    return page_of([_as_listed(call, a, connected)
                    for a in await service.usable(call.session, call.organization_id)], p)


@app.handler("config_manage", "integration", "read", params=NameParams, scope="read",
             permission="integrations.view_integration",
             description="One integration this organization may connect to: what it offers, whether it is "
                         "connected, and its status (stale, with the last error, when its upstream MCP server "
                         "announced a tool list that was not stored).",
             keywords=("integration status", "integration error", "tool list changed"))
async def read_integration(call: HandlerCall, p: NameParams) -> dict[str, Any]:
    found = await service.usable_named(call.session, call.organization_id, p.name)
    return _as_listed(call, found, {c["integration"]: c for c in await service.connections(call.session,
                                                                                            call.organization_id)})


def _as_listed(call: HandlerCall, integration: Any, connected: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return {**service.describe(integration, seen_by=call.organization_id), "connected": integration.name in connected,
            "enabled": bool(connected.get(integration.name, {}).get("enabled"))}


async def _checked_connection(p: ConnectParams, settings: Settings) -> service.CheckedConnection | PrismError:
    """The connection's URLs checked (their hosts resolved) before the call's ledger unit (`Handler.prepare`); the
    refusal is returned, raised by the handler once the integration is found."""
    try:
        return await service.checked_connection(settings, base_url=p.base_url, auth_kind=p.auth_kind,
                                                auth_settings=_credential_settings(p), secret=p.secret,
                                                timeout_seconds=p.timeout_seconds)
    except PrismError as exc:
        return exc


@app.handler("config_manage", "connection", "set", params=ConnectParams, scope="write",
             permission="integrations.manage_connection", prepare=_checked_connection,
             description="Connect this organization to an integration: base URL and credential (stored "
                         "encrypted, never returned). Its handlers then appear for the organization.",
             keywords=("api credentials", "enable integration", "configure connection"))
async def set_connection(call: HandlerCall, p: ConnectParams) -> AfterCommit[None]:
    record = await service.store_connection(call.session, call.settings, call.organization_id, p.name,
                                            call.prepared, enabled=p.enabled)
    return _then_refresh(call, record)


@app.handler("config_manage", "connection", "remove", params=NameParams, scope="write",
             permission="integrations.manage_connection", destructive=True,
             description="Disconnect this organization from an integration: its handlers disappear for it.",
             keywords=("disable integration", "revoke api credentials"))
async def remove_connection(call: HandlerCall, p: NameParams) -> AfterCommit[None]:
    return _then_refresh(call, await service.disconnect(call.session, call.organization_id, p.name))


@app.handler("config_manage", "connection", "list", params=ListParams, scope="read",
             permission="integrations.view_connection",
             description="This organization's connections (base URL, credential kind; never the secret).",
             keywords=("integration credentials",))
async def list_connections(call: HandlerCall, p: ListParams) -> dict[str, Any]:
    return page_of(await service.connections(call.session, call.organization_id), p)
