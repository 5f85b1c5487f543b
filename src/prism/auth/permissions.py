"""Role permissions are patterns over `<app>.<verb>_<model>` with `*` wildcards."""

from __future__ import annotations

from fnmatch import fnmatchcase
from weakref import WeakValueDictionary

BUILTIN_ROLES: dict[str, tuple[str, ...]] = {
    "owner": ("*",),
    "admin": ("*",),
    "member": ("*.view_*", "*.add_*", "*.change_*"),
    # Self-service on one's own keys (the keys handlers touch only the caller's own, and a viewer's key can do
    # no more than the viewer): minting and revoking need the same permission on every path.
    "viewer": ("*.view_*", "keys.add_key", "keys.change_key"),
}


class PermissionSet:
    """Immutable, hashable, with a memo: the same role answers the same question once per process."""

    __slots__ = ("__weakref__", "_memo", "patterns")

    def __init__(self, patterns: tuple[str, ...]) -> None:
        self.patterns = patterns
        self._memo: dict[str, bool] = {}

    def allows(self, permission: str | None) -> bool:
        if permission is None:
            return True
        hit = self._memo.get(permission)
        if hit is None:
            hit = any(fnmatchcase(permission, p) for p in self.patterns)
            self._memo[permission] = hit
        return hit

    def __repr__(self) -> str:
        return f"PermissionSet({self.patterns!r})"


# The one PermissionSet of each role's patterns among the credentials in use: cached keys and tokens share it (and
# its memo, up to one entry per permission of the registry). Weak, so a role's set goes with the last cached
# credential holding it: a server that sees many custom roles (or a role's patterns edited many times) keeps only
# those of credentials used lately (prism.kit.expiring), not every set it ever built.
_SHARED: WeakValueDictionary[tuple[str, ...], PermissionSet] = WeakValueDictionary()


def permission_set(patterns: tuple[str, ...]) -> PermissionSet:
    found = _SHARED.get(patterns)
    if found is None:
        found = _SHARED[patterns] = PermissionSet(patterns)
    return found
