"""What a call of an imported operation reads and writes besides its upstream: the caller's organization's
connection to the integration, and the record of the upstream call (`integration_calls`).

Both are on every forwarded call's path, so they are prepared Core statements (prism.storage.prepared): the
ORM's select of two entities and its unit of work for one insert cost several times the statements themselves
(bench/README.md, "Federation"). The organization is bound in each statement, since prepared statements do not
go through the session's organization criterion.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import bindparam, insert, select

from prism.errors import ToolNotFound
from prism.integrations.models import IntegrationApp, IntegrationCall, IntegrationConnection
from prism.integrations.sealed_urls import opened_urls
from prism.kit.ids import new_id
from prism.kit.nul import without_nul
from prism.kit.timeutil import utcnow
from prism.registry import HandlerCall
from prism.storage.prepared import PreparedRead, PreparedWrite


@dataclass(frozen=True, slots=True)
class Connection:
    """One organization's enabled connection to an integration, with what a call needs of the integration."""

    id: str
    base_url: str
    auth_kind: str
    auth_settings: dict[str, Any]
    secret_encrypted: str | None
    timeout_seconds: int
    integration_id: str
    default_server: str | None
    owner_organization_id: str | None  # the integration's: None for the deployment's


_CONNECTION = PreparedRead(
    select(IntegrationConnection.id, IntegrationConnection.base_url, IntegrationConnection.auth_kind,
           IntegrationConnection.auth_settings, IntegrationConnection.secret_encrypted,
           IntegrationConnection.timeout_seconds, IntegrationConnection.integration_id, IntegrationApp.default_server,
           IntegrationApp.owner_organization_id, IntegrationConnection.sealed_urls,
           IntegrationApp.sealed_urls.label("app_sealed_urls"))
    .join(IntegrationApp, IntegrationApp.id == IntegrationConnection.integration_id)
    .where(IntegrationConnection.organization_id == bindparam("organization_id"),
           IntegrationApp.name == bindparam("integration"), IntegrationConnection.enabled.is_(True))
    .limit(1))

_RECORDED = ("id", "organization_id", "coordinate", "method", "path", "arguments_digest", "upstream_status",
             "outcome", "attempts", "duration_ms", "error", "actor_email", "created_at")
_INSERT_CALL = PreparedWrite(insert(IntegrationCall), column_keys=_RECORDED)


async def connection_for(call: HandlerCall, integration: str) -> Connection:
    """The caller's organization's enabled connection to `integration`; none, and the operation does not exist
    for the caller. Its URLs are whole (a token in a query string unsealed): a request is about to be sent."""
    row = await _CONNECTION.one(call.session, {"organization_id": call.organization_id, "integration": integration})
    if row is None:
        raise ToolNotFound(f"no handler {call.handler.path}; see /api/v1/dev/introspect/ for what exists",
                           code="operation_not_found")
    fields = dict(row)
    own = opened_urls(call.settings, fields["id"], fields.pop("sealed_urls"))
    of_app = opened_urls(call.settings, fields["integration_id"], fields.pop("app_sealed_urls"))
    fields["base_url"] = own.get("base_url", fields["base_url"])
    if "token_url" in own:
        fields["auth_settings"] = {**fields["auth_settings"], "token_url": own["token_url"]}
    fields["default_server"] = of_app.get("default_server", fields["default_server"])
    return Connection(**fields)


async def keep_record(call: HandlerCall, *, method: str, path: str, arguments_digest: str,
                      upstream_status: int | None, outcome: str, attempts: int, duration_ms: int,
                      error: str) -> None:
    """The upstream call's record, in the call's recording transaction."""
    await _INSERT_CALL.run(call.session, [{
        "id": new_id(), "organization_id": call.organization_id, "coordinate": call.handler.path,
        "method": method, "path": without_nul(path)[:2048], "arguments_digest": arguments_digest,
        "upstream_status": upstream_status, "outcome": outcome, "attempts": attempts, "duration_ms": duration_ms,
        "error": without_nul(error)[:1000], "actor_email": call.auth.user_email or "", "created_at": utcnow()}])
