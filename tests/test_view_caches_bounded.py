"""The per-view caches of the catalog tree and capability search keep their most recently used views when more
views than they hold come by: one caller's view stays cached while others pass through, rather than every view
being dropped at once when the cache fills."""

from __future__ import annotations

import pytest

import prism.registry.paths as paths
from prism.registry.paths import tree_view
from prism.registry.registry import build_registry
from prism.registry.search import index_for

pytestmark = pytest.mark.engine_independent


def test_tree_views_keep_the_one_in_use_when_others_pass_through() -> None:
    registry = build_registry()
    handlers = tuple(registry)
    kept = handlers[:5]
    first = tree_view(registry, kept)
    for i in range(600):  # far more distinct views than the cache holds, the kept one asked for in between
        tree_view(registry, (*handlers[:6 + i % 300], handlers[i % len(handlers)]))
        assert tree_view(registry, kept) is first


def test_tree_views_keep_at_most_their_handler_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    """Many distinct large views (OAuth clients may choose scopes so that each grant sees a different surface)
    keep at most TREE_VIEW_HANDLERS_KEPT handlers' worth of tree views, the most recent ones."""
    registry = build_registry()
    handlers = tuple(registry)
    monkeypatch.setattr(paths, "TREE_VIEW_HANDLERS_KEPT", 3 * len(handlers), raising=False)
    views = [handlers[:i] + handlers[i + 1:] for i in range(10)]  # ten distinct views, each nearly everything
    built = [tree_view(registry, visible) for visible in views]
    kept = paths._VIEWS[registry].values()
    assert sum(len(visible) for visible, _ in kept) <= 3 * len(handlers)
    assert len(kept) == 3
    assert tree_view(registry, views[-1]) is built[-1]  # the newest stay


def test_search_masks_keep_the_one_in_use_when_others_pass_through() -> None:
    registry = build_registry()
    index = index_for(registry)
    handlers = tuple(registry)
    kept = handlers[:5]
    first = index.mask(kept)
    for i in range(600):
        index.mask((*handlers[:6 + i % 300], handlers[i % len(handlers)]))
        assert index.mask(kept) is first
