"""core: the platform's own handlers — who am I, what exists, which events are there."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from prism.apps.params import Params
from prism.events.catalog import API_VERSION, EVENT_TYPES
from prism.kit.timeutil import iso
from prism.registry import HandlerApp, HandlerCall
from prism.registry.introspect import IntrospectParams, introspect

app = HandlerApp("core", description="The platform itself: identity, introspection, event registry.")


class WhoamiParams(Params):
    pass


class WebhookEventList(Params):
    group: Literal["governance", "platform"] | None = Field(None, description="Only this group of events.")


@app.handler("report_query", "caller", "whoami", params=WhoamiParams, scope="read", permission=None,
             description="Who is calling: key, user, organization, tenant, role and scopes.",
             keywords=("identity", "me", "current user", "my permissions"))
async def whoami(call: HandlerCall, _: WhoamiParams) -> dict[str, Any]:
    a = call.auth
    return {
        "authenticated": True,
        "key": {"prefix": a.key_prefix, "name": a.key_name, "created_at": iso(a.key_created_at),
                "last_used_at": iso(a.usage.last_used_at), "scopes": sorted(a.scopes)},
        "user": {"id": a.user_id, "email": a.user_email},
        "organization": {"id": a.organization_id, "name": a.organization_name, "role": a.role},
        "tenant": {"id": a.tenant_id, "name": a.tenant_name, "subdomain": a.tenant_subdomain},
    }


@app.handler("report_query", "registry", "introspect", params=IntrospectParams, scope="read",
             permission=None, description="Explore the handler tree: mega-tools, apps, entities, "
             "operations, schemas, stats, capability search and paths, and the guide.",
             keywords=("discover", "help", "what can I do", "schema", "search capabilities"))
async def introspect_handler(call: HandlerCall, p: IntrospectParams) -> dict[str, Any]:
    return introspect(call.registry, call.auth, p)


@app.handler("entity_crud", "webhook_event", "list", params=WebhookEventList, scope="read",
             permission=None, description="The registry of event types Prism delivers to webhooks.",
             keywords=("webhooks", "events", "subscriptions", "event types"))
async def list_webhook_events(call: HandlerCall, p: WebhookEventList) -> dict[str, Any]:
    items = [{"event_type": e.event_type, "group": e.group, "description": e.description,
              "event_id_prefix": e.id_prefix, "api_version": API_VERSION}
             for e in EVENT_TYPES if p.group is None or e.group == p.group]
    return {"items": items, "page": 1, "page_size": len(items), "total": len(items)}
