"""core: the platform's own handlers — who am I, what exists, which events are there."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any, Literal

from pydantic import BaseModel, Field

from prism.apps import shipped_examples
from prism.apps.params import Params
from prism.events.catalog import API_VERSION, EVENT_TYPES
from prism.kit.ids import public_organization_id
from prism.kit.paging import Paging, page_of
from prism.kit.timeutil import iso
from prism.registry import AfterCommit, HandlerApp, HandlerCall, search
from prism.registry.answer import SearchParams
from prism.registry.introspect import IntrospectParams, check_search, introspect, search_answer, search_narrowing
from prism.registry.registry import Registry
from prism.registry.visibility import enabled_integrations

app = HandlerApp("core", description="The platform itself: identity, introspection, event registry.",
                 examples=shipped_examples())


class WhoamiParams(Params):
    pass


class WhoamiKey(BaseModel):
    prefix: str
    name: str
    created_at: str | None
    last_used_at: str | None
    scopes: list[str]


class WhoamiUser(BaseModel):
    id: str
    email: str


class WhoamiOrganization(BaseModel):
    id: str
    name: str
    role: str


class WhoamiTenant(BaseModel):
    id: str
    name: str | None
    subdomain: str


class WhoamiResult(BaseModel):
    """What whoami answers (published as prism_whoami's MCP output schema)."""

    authenticated: bool
    key: WhoamiKey
    user: WhoamiUser
    organization: WhoamiOrganization
    tenant: WhoamiTenant


class WebhookEventList(Paging):
    group: Literal["governance", "platform"] | None = Field(None, description="Only this group of events.")


@app.handler("report_query", "caller", "whoami", params=WhoamiParams, scope="read", permission=None,
             result=WhoamiResult,
             description="Who is calling: the key in use, its user and account, organization, tenant, role and "
                         "scopes (what the caller is allowed to do).",
             keywords=("identity", "me", "current user", "my account", "my permissions", "which key am I using"))
async def whoami(call: HandlerCall, _: WhoamiParams) -> dict[str, Any]:
    a = call.auth
    return {
        "authenticated": True,
        "key": {"prefix": a.key_prefix, "name": a.key_name, "created_at": iso(a.key_created_at),
                "last_used_at": iso(a.usage.last_used_at), "scopes": sorted(a.scopes)},
        "user": {"id": a.user_id, "email": a.user_email},
        "organization": {"id": public_organization_id(a.organization_id), "name": a.organization_name,
                         "role": a.role},
        "tenant": {"id": a.tenant_id, "name": a.tenant_name, "subdomain": a.tenant_subdomain},
    }


@app.handler("report_query", "registry", "introspect", params=IntrospectParams, scope="read",
             permission=None, description="Explore the handler tree: mega-tools, apps, entities, "
             "operations, schemas, stats, capability search and paths, and the guide.",
             keywords=("discover", "help", "what can I do", "schema", "search capabilities"))
async def introspect_handler(call: HandlerCall, p: IntrospectParams) -> dict[str, Any] | AfterCommit[None]:
    enabled = enabled_integrations(call.registry, call.auth)
    if p.dimension == "capability_search" and search.pending(call.registry, embeddings=p.rerank, enabled=enabled):
        # The registry's first search builds its index (or, for a semantic rerank, embeds every handler): about
        # a second at 10,000 handlers; an organization's first semantic rerank works out its corpus's centres and
        # row norms (5-20 ms at 10,000: docs/search.md, "Whose statistics"). Both on the index builder's thread
        # (search.on_index_builder) after the call is committed, so neither the event loop nor the ledger's
        # transaction waits for it. Its refusals (no query, unknown filters) are found now, inside the audited call.
        check_search(call.registry, call.auth, p)
        registry, auth = call.registry, call.auth

        async def answer(_call: HandlerCall, _done: None) -> dict[str, Any]:
            return introspect(registry, auth, p)

        return AfterCommit(_preparing(registry, embeddings=p.rerank, enabled=enabled), answer)
    return introspect(call.registry, call.auth, p)


@app.handler("report_query", "registry", "search", params=SearchParams, scope="read", permission=None,
             description="Which handler does this? The best handlers for a plain-language request, each with its "
             "confidence, argument schema and a ready call; an ordered plan for a request of several steps; "
             "no_match when nothing fits.",
             keywords=("find a tool", "which handler", "how do I", "capability search"))
async def search_handler(call: HandlerCall, p: SearchParams) -> dict[str, Any] | AfterCommit[None]:
    enabled = enabled_integrations(call.registry, call.auth)
    if search.pending(call.registry, embeddings=True, enabled=enabled):
        # As for introspect: the index and the embeddings are built on the index builder's thread after the call is
        # committed; the filters are checked now.
        check_search(call.registry, call.auth, search_narrowing(p))
        registry, auth = call.registry, call.auth

        async def answer(_call: HandlerCall, _done: None) -> dict[str, Any]:
            return search_answer(registry, auth, p)

        return AfterCommit(_preparing(registry, embeddings=True, enabled=enabled), answer)
    return search_answer(call.registry, call.auth, p)


def _preparing(registry: Registry, *, embeddings: bool, enabled: frozenset[str]) -> Callable[[], Awaitable[None]]:
    async def prepare() -> None:
        await search.on_index_builder(partial(search.warm, [registry], embeddings=embeddings, enabled=enabled))

    return prepare


@app.handler("entity_crud", "webhook_event", "list", params=WebhookEventList, scope="read",
             permission=None, description="The registry of event types Prism delivers to webhooks.",
             keywords=("webhooks", "events", "subscriptions", "event types"))
async def list_webhook_events(call: HandlerCall, p: WebhookEventList) -> dict[str, Any]:
    items = [{"event_type": e.event_type, "group": e.group, "description": e.description,
              "event_id_prefix": e.id_prefix, "api_version": API_VERSION}
             for e in EVENT_TYPES if p.group is None or e.group == p.group]
    return page_of(items, p)
