"""An entity's list, count and breakdown take `search` exactly when the entity names columns to search: work order
parts have no text, so a search term is refused as an unknown field (it used to be taken and silently ignored,
every part listed for a term that matches nothing), and the descriptors do not offer it."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from prism.apps.crud import Entity, crud
from prism.apps.maintenance.models import WorkOrderPart
from prism.apps.params import ListParams
from prism.registry.declare import HandlerApp
from tests.factories import Factory


async def _call(client: httpx.AsyncClient, headers: dict[str, str], path: str, args: dict[str, Any]) -> httpx.Response:
    return await client.post(f"/prism/{path}", headers=headers, json=args)


@pytest.mark.parametrize("tool", ["entity_crud/maintenance/work_order_part/list",
                                  "entity_crud/maintenance/work_order_part/count",
                                  "report_query/maintenance/work_order_part/breakdown"])
async def test_a_search_of_work_order_parts_is_refused_not_ignored(client: httpx.AsyncClient, factory: Factory,
                                                                   tool: str) -> None:
    ws = await factory.workspace(roles=("owner",))
    answer = await _call(client, ws.headers(), tool,
                         {"search": "no-such-thing"})
    assert answer.status_code == 400 and answer.json()["error"] == "invalid_arguments", answer.text
    assert "search" in answer.text
    listed = await _call(client, ws.headers(), "entity_crud/maintenance/work_order_part/list", {})
    assert listed.status_code == 200, listed.text


def test_the_parameters_offer_search_only_where_it_searches(app: Any) -> None:
    """What every descriptor and tools/list describe: the handler's parameter model."""
    registry = app.state.registry
    for tool, operation in (("entity_crud", "list"), ("entity_crud", "count"), ("report_query", "breakdown")):
        parts = registry.get_path(f"{tool}/maintenance/work_order_part/{operation}")
        orders = registry.get_path(f"{tool}/maintenance/work_order/{operation}")
        assert "search" not in parts.params.model_fields and "search" in orders.params.model_fields


def test_an_entity_without_search_columns_cannot_take_a_search_term() -> None:
    app = HandlerApp("scratch")
    entity = Entity(WorkOrderPart, "scratch_part", "scratch parts", ListParams, search=(), orderable=("created_at",),
                    default_ordering="created_at")
    with pytest.raises(ValueError, match="search"):
        crud(app, entity)
