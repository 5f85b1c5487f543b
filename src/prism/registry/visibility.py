"""Which handlers a caller may call: scope + RBAC + the imported integrations its organization enabled + whether
a person is at the controls.

A grant (scopes, role patterns, enabled integrations, person or not) is what a credential carries; a `View` is
what it sees. Many grants see the same handlers — an OAuth client may ask for any set of well-formed scopes,
including ones naming apps that do not exist — so every per-caller cache downstream (tool lists, the catalog,
the tenant descriptor) is keyed by `View.key`, a digest of the visible handlers: equal views share one entry
whatever scopes produced them. Both maps here are bounded LRUs, so no sequence of grants grows memory.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from prism.auth.context import AuthContext
from prism.kit.lru import LRU
from prism.registry.mega_tools import scopes_allow
from prism.registry.model import Handler
from prism.registry.registry import Registry

Grant = tuple[frozenset[str], tuple[str, ...], frozenset[str], bool]
NOTHING_ENABLED: frozenset[str] = frozenset()
# Grants whose view is remembered: a miss costs one pass over the registry (a few ms at 10,000 handlers).
GRANTS_KEPT = 256
# Distinct views kept, shared by every grant that sees them: at most this many handler tuples (8 bytes a handler,
# so under 20 MB at 10,000 handlers even when every one differs).
VIEWS_KEPT = 256


@dataclass(frozen=True, slots=True, eq=False)
class View:
    """The handlers a caller may call, in registry order, and `key`: equal for equal handler sets."""

    handlers: tuple[Handler, ...]
    key: str


class Views:
    """Per registry: grant -> view, and view key -> the one shared view object (equal views share a tuple)."""

    __slots__ = ("by_grant", "by_key")

    def __init__(self) -> None:
        self.by_grant: LRU[Grant, View] = LRU(GRANTS_KEPT)
        self.by_key: LRU[str, View] = LRU(VIEWS_KEPT)


def enabled_integrations(registry: Registry, auth: AuthContext) -> frozenset[str]:
    return registry.enablement.get(auth.organization_id, NOTHING_ENABLED)


def grant_of(registry: Registry, auth: AuthContext) -> Grant:
    """What decides which handlers a caller sees."""
    return auth.scopes, auth.permissions.patterns, enabled_integrations(registry, auth), auth.is_person


def may_call(auth: AuthContext, handler: Handler, enabled: frozenset[str] = NOTHING_ENABLED) -> bool:
    return (scopes_allow(auth.scopes, handler.scope, handler.permission) and auth.permissions.allows(handler.permission)
            and (handler.integration is None or handler.integration in enabled)
            and (auth.is_person or not handler.people_only))


def view_of(registry: Registry, auth: AuthContext) -> View:
    """This caller's view: a lookup by grant, computed once per grant while it stays among the recent ones."""
    views = registry.visibility_memo
    if views is None:
        views = registry.visibility_memo = Views()
    grant = grant_of(registry, auth)
    hit = views.by_grant.get(grant)
    if hit is None:
        handlers = tuple(h for h in registry if may_call(auth, h, grant[2]))
        key = view_key(handlers)
        hit = views.by_key.get(key) or views.by_key.put(key, View(handlers, key))
        views.by_grant.put(grant, hit)
    return hit


def visible_handlers(registry: Registry, auth: AuthContext) -> tuple[Handler, ...]:
    """Handlers this caller may call, in registry order."""
    return view_of(registry, auth).handlers


def view_key(handlers: tuple[Handler, ...]) -> str:
    """A digest of the handler paths (unique in a registry), so the key is short whatever the view's size."""
    digest = hashlib.sha256()
    for handler in handlers:
        digest.update(handler.path.encode())
        digest.update(b"\n")
    return digest.hexdigest()
