"""Which handlers a caller may call: scope + RBAC, memoised per (scopes, role patterns)."""

from __future__ import annotations

from prism.auth.context import AuthContext
from prism.registry.mega_tools import scopes_allow
from prism.registry.model import Handler
from prism.registry.registry import Registry


def may_call(auth: AuthContext, handler: Handler) -> bool:
    return scopes_allow(auth.scopes, handler.scope, handler.permission) and auth.permissions.allows(handler.permission)


def visible_handlers(registry: Registry, auth: AuthContext) -> tuple[Handler, ...]:
    """Handlers this caller may call, in registry order; computed once per distinct grant."""
    memo = registry.visibility_memo
    grant = (auth.scopes, auth.permissions.patterns)
    hit = memo.get(grant)
    if hit is None:
        hit = tuple(h for h in registry if may_call(auth, h))
        memo[grant] = hit
    return hit
