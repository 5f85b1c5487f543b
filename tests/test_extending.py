"""A user's own package adds handlers through the `prism.apps` entry point (examples/shipping_rates)."""

from __future__ import annotations

from importlib.metadata import entry_points

import httpx
import pytest

from prism.registry import HandlerApp
from prism.registry.registry import build_registry, load_app
from tests.factories import Factory


def test_example_app_is_discovered_through_its_entry_point() -> None:
    names = {ep.name for ep in entry_points(group="prism.apps")}
    assert "shipping" in names
    registry = build_registry()
    assert registry.get_path("report_query/shipping/rate/quote") is not None
    assert registry.get_path("report_query/shipping/rate/quote").permission == "shipping.view_rate"  # type: ignore[union-attr]


def test_entry_points_can_be_switched_off_and_apps_named_explicitly() -> None:
    registry = build_registry(include_entry_points=False)
    assert registry.get_path("report_query/shipping/rate/quote") is None
    registry = build_registry(["prism_shipping.handlers:app"], include_entry_points=False)
    assert registry.get_path("report_query/shipping/rate/quote") is not None


def test_a_spec_that_is_not_a_handler_app_is_refused() -> None:
    with pytest.raises(TypeError):
        load_app("prism.config:Settings")


def test_two_declarations_of_one_coordinate_are_refused() -> None:
    from prism_shipping.handlers import app as shipping

    registry = build_registry(include_entry_points=False)
    registry_twice = HandlerApp("shipping", handlers=list(shipping.handlers))
    registry.frozen = False
    registry.add_app(shipping)
    with pytest.raises(ValueError, match="declared twice"):
        registry.add_app(registry_twice)


async def test_example_handler_runs_through_every_door(client: httpx.AsyncClient, factory: Factory) -> None:
    ws = await factory.workspace()
    args = {"weight_kg": 2.4, "zone": "europe", "express": False}
    canonical = await client.post("/api/mcp/tools/prism_report_query/", headers=ws.headers(), json={
        "app": "shipping", "entity": "rate", "operation": "quote", "arguments": args})
    by_path = await client.post("/prism/report_query/shipping/rate/quote", headers=ws.headers(), json=args)
    sandbox = await client.post("/api/v1/dev/call", headers=ws.headers(), json={
        "name": "prism_report_query",
        "arguments": {"app": "shipping", "entity": "rate", "operation": "quote", "arguments": args}})
    expected = {"zone": "europe", "billable_kg": 3, "express": False, "price_cents": 1490 + 3 * 380,
                "currency": "EUR"}
    assert canonical.json()["data"] == expected
    assert by_path.json()["data"] == expected
    assert sandbox.json() == expected
