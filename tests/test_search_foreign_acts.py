"""An everyday act that no operation is named for ("merge", "translate", "reserve" ...) asks for something the catalog
does not offer: the best handler's words may match well (`work_order/create` for "merge WO 7710 and 7712 into one
job"), and the confidence says it cannot do the act, unless its description says the verb."""

from __future__ import annotations

from typing import Any

import pytest

from prism.registry import HandlerApp, HandlerCall, Params, semantic
from prism.registry.capability import FOREIGN, asked_act, find
from prism.registry.registry import Registry, build_registry
from prism.registry.search import index_for

NEAR_MISSES = (
    "Merge WO 7710 and 7712 into one job - same hydraulic leak, two people reported it",
    "translate this safety notice into Polish for the night shift drivers",
    "reserve 4 of part 220 for next week's shutdown so nobody else grabs them",
    "schedule Maria for PT Tue/Thu 9am for the next 6 weeks",
)


@pytest.fixture(scope="module")
def registry() -> Registry:
    return build_registry()


@pytest.mark.parametrize("query", NEAR_MISSES)
def test_an_act_no_operation_is_named_for_is_foreign(registry: Registry, query: str) -> None:
    act = asked_act(index_for(registry), query)
    assert act is not None and act.kind == FOREIGN


@pytest.mark.parametrize("model", [True, False])
def test_a_foreign_act_is_flagged(registry: Registry, model: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(semantic, "AVAILABLE", model and semantic.AVAILABLE)
    for query in NEAR_MISSES:
        found = find(index_for(registry), query, tuple(registry), limit=5)
        assert found.no_match, (query, [(h.handler.path, round(h.confidence, 3)) for h in found.hits[:3]])
    # An act the catalog names is answered.
    found = find(index_for(registry), "put work order 5120 on hold", tuple(registry), limit=5)
    assert not found.no_match and asked_act(index_for(registry), "put work order 5120 on hold") is None


async def _noop(call: HandlerCall, params: Params) -> dict[str, Any]:
    return {}


def test_a_handler_whose_description_says_the_verb_may_do_it() -> None:
    app = HandlerApp("calendar", description="Meetings with customers")
    app.handler("entity_crud", "meeting", "create", params=Params, scope="write",
                description="Schedule a meeting with a customer at a time and place.")(_noop)
    app.handler("entity_crud", "meeting", "list", params=Params, scope="read",
                description="List meetings with customers, by date.")(_noop)
    registry = Registry()
    registry.add_app(app)
    registry.freeze()
    index = index_for(registry)
    found = find(index, "schedule a meeting with Acme for Tuesday at 10", tuple(registry), limit=5, rerank=False)
    cannot = {h.handler.coordinate.operation: h.features[6] for h in found.hits}
    assert cannot == {"create": 0.0, "list": 1.0}
