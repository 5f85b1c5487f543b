"""What the edge learned about a request, typed, for the doors: one object per request.

The edge (prism.edge.stack) builds it before routing; a door reads it with `request_context(scope)`. It is the
only thing the edge and the doors share: no other key of the scope carries a protocol between them.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from dataclasses import dataclass
from typing import Any

from starlette.datastructures import Headers

from prism.auth.context import AuthContext
from prism.errors import PrismError, Unauthenticated
from prism.ratelimit.verdict import Verdict
from prism.tenancy.hosts import HostInfo

# The scope entry holding the context, as Starlette keeps "app" and "router" in the scope.
SCOPE_KEY = "prism.request"


@dataclass(slots=True)
class RequestContext:
    headers: Headers
    host: HostInfo
    # The address limits and the lockout count against: the peer, or X-Forwarded-For from a trusted proxy.
    address: str
    # The caller, when the path takes a Bearer credential and it was accepted.
    auth: AuthContext | None = None
    # Why there is no caller (no credential, a refused one, an unknown tenant host) on a path that takes one.
    auth_error: PrismError | None = None
    # A refusal decided before the door runs (lockout, a limit, a malformed request line): the door renders it.
    refusal: PrismError | None = None
    # The last rate-limit window this request was counted in (the MCP door reports it on every answer).
    verdict: Verdict | None = None
    # The request's id (X-Request-ID, prism.observability.request_id): on its answer, its log line, its ledger entry.
    request_id: str = ""
    # Set by the dispatcher when the request dispatched a call: its door, mega-tool and coordinate, for the access
    # line and the request counts (prism.observability).
    door: str | None = None
    tool: str | None = None
    coordinate: str | None = None
    # A credential checked by the page itself failed (an OAuth client's secret): a security event whatever the
    # status (400 when the secret came in the form, SPEC's status for bad OAuth credentials).
    authentication_failed: bool = False

    def caller(self) -> AuthContext:
        """The authenticated caller; the reason there is none as a PrismError (401, 404 tenant_not_found)."""
        if self.auth is not None:
            return self.auth
        raise self.auth_error or Unauthenticated("Authorization: Bearer <key> is required",
                                                 code="authentication_required")


def request_context(scope: MutableMapping[str, Any]) -> RequestContext:
    context: RequestContext = scope[SCOPE_KEY]
    return context
