"""Which handlers a caller may call: scope + RBAC + the imported integrations its organization enabled + whether
a person is at the controls, memoised per grant (scopes, role patterns, enabled integrations, person or not)."""

from __future__ import annotations

from prism.auth.context import AuthContext
from prism.registry.mega_tools import scopes_allow
from prism.registry.model import Handler
from prism.registry.registry import Registry

Grant = tuple[frozenset[str], tuple[str, ...], frozenset[str], bool]
NOTHING_ENABLED: frozenset[str] = frozenset()


def enabled_integrations(registry: Registry, auth: AuthContext) -> frozenset[str]:
    return registry.enablement.get(auth.organization_id, NOTHING_ENABLED)


def grant_of(registry: Registry, auth: AuthContext) -> Grant:
    """What decides which handlers a caller sees: every cache of a per-caller view is keyed by it."""
    return auth.scopes, auth.permissions.patterns, enabled_integrations(registry, auth), auth.is_person


def may_call(auth: AuthContext, handler: Handler, enabled: frozenset[str] = NOTHING_ENABLED) -> bool:
    return (scopes_allow(auth.scopes, handler.scope, handler.permission) and auth.permissions.allows(handler.permission)
            and (handler.integration is None or handler.integration in enabled)
            and (auth.is_person or not handler.people_only))


def visible_handlers(registry: Registry, auth: AuthContext) -> tuple[Handler, ...]:
    """Handlers this caller may call, in registry order; computed once per distinct grant."""
    memo = registry.visibility_memo
    grant = grant_of(registry, auth)
    hit = memo.get(grant)
    if hit is None:
        hit = tuple(h for h in registry if may_call(auth, h, grant[2]))
        memo[grant] = hit
    return hit
