"""Values nobody meant, at any depth: `true` or `false` for a number nested in an object, in a list of objects
or in a list of numbers is refused naming the field's whole path (`lines[2].quantity`), as it is for a top-level
parameter; Pydantic alone would read it as 1 or 0. So is a number for a nested date."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import date
from typing import Any

import httpx
import pytest
from pydantic import BaseModel, Field
from starlette.applications import Starlette

from prism.config import Settings
from prism.errors import InvalidArguments
from prism.kit.validation import validated
from prism.registry import HandlerApp, HandlerCall, Registry
from tests.apps_support import running_app_with
from tests.factories import Factory, Workspace

orders = HandlerApp("orders", description="Order totals, with nested parameters.")
RUNS: list[dict[str, Any]] = []


class Line(BaseModel):
    sku: str = Field("", max_length=20)
    quantity: int = Field(..., ge=0)
    unit_price: float | None = None
    gift: bool = False
    ship_on: date | None = None


class Discount(BaseModel):
    percent: int = Field(..., ge=0, le=100)


class Bundle(BaseModel):
    weight: float | None = None
    parts: list[Bundle] = []


class OrderParams(BaseModel):
    lines: list[Line] = Field(..., max_length=10)
    discount: Discount | None = None
    scores: list[int] = []
    rates: dict[str, float] = {}
    bundle: Bundle | None = None


@orders.handler("report_query", "order", "total", params=OrderParams, scope="read", permission=None,
                description="The total of an order's lines.")
async def total(call: HandlerCall, p: OrderParams) -> dict[str, Any]:
    RUNS.append(p.model_dump(mode="json"))
    return {"quantity": sum(line.quantity for line in p.lines)}


PATH = "/prism/report_query/orders/order/total"


@pytest.fixture(scope="module")
async def orders_app(settings: Settings) -> AsyncIterator[Starlette]:
    async with running_app_with(settings, orders) as application:
        yield application


@pytest.fixture(scope="module")
async def orders_client(orders_app: Starlette) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=orders_app), base_url="http://localhost") as c:
        yield c


@pytest.fixture(scope="module")
async def ws(orders_app: Starlette) -> Workspace:
    return await Factory(orders_app.state.db).workspace(roles=("owner",))


def fields_of(r: httpx.Response) -> list[str]:
    return [p["field"] for p in r.json()["details"]["errors"]]


async def test_true_for_a_number_in_a_list_of_objects_is_refused_naming_its_path(
        orders_client: httpx.AsyncClient, ws: Workspace) -> None:
    RUNS.clear()
    lines = [{"quantity": 1}, {"quantity": 2, "gift": True}, {"quantity": True}]
    r = await orders_client.post(PATH, headers=ws.headers(), json={"lines": lines})
    assert r.status_code == 400 and r.json()["error"] == "invalid_arguments", r.text
    assert r.json()["details"]["errors"] == [
        {"field": "lines[2].quantity", "message": "must be a number, not true or false"}]
    assert r.json()["message"] == "lines[2].quantity: must be a number, not true or false"
    assert RUNS == []
    ok = await orders_client.post(PATH, headers=ws.headers(), json={"lines": lines[:2]})
    assert ok.status_code == 200 and ok.json()["data"] == {"quantity": 3}, ok.text


async def test_every_nested_place_of_a_number_is_checked(orders_client: httpx.AsyncClient, ws: Workspace) -> None:
    body = {"lines": [{"quantity": 0, "unit_price": False}], "discount": {"percent": True},
            "scores": [3, True], "rates": {"eur": False},
            "bundle": {"parts": [{"weight": 1.5}, {"parts": [{"weight": True}]}]}}
    r = await orders_client.post(PATH, headers=ws.headers(), json=body)
    assert r.status_code == 400, r.text
    assert fields_of(r) == ["lines[0].unit_price", "discount.percent", "scores[1]", "rates.eur",
                            "bundle.parts[1].parts[0].weight"], r.text


async def test_a_number_for_a_nested_date_is_refused_and_pydantic_names_paths_the_same_way(
        orders_client: httpx.AsyncClient, ws: Workspace) -> None:
    r = await orders_client.post(PATH, headers=ws.headers(),
                                 json={"lines": [{"quantity": 1, "ship_on": 1_700_000_000}]})
    assert r.status_code == 400 and "lines[0].ship_on" in fields_of(r), r.text
    r = await orders_client.post(PATH, headers=ws.headers(), json={"lines": [{"quantity": 1}, {"quantity": "x"}]})
    assert r.status_code == 400 and fields_of(r) == ["lines[1].quantity"], r.text


def nested_numbers(schema: dict[str, Any], defs: dict[str, Any], path: tuple[str, ...] = (),
                   following: frozenset[str] = frozenset()) -> list[tuple[str, ...]]:
    """Each path (property names, `[]` for an item, `{}` for any key) to a number that is never a boolean."""
    ref = schema.get("$ref", "")
    if ref:
        name = ref.rsplit("/", 1)[-1]
        return [] if name in following else nested_numbers(defs[name], defs, path, following | {name})
    options = schema.get("anyOf", [])
    types = {schema.get("type")} | {o.get("type") for o in options}
    found = [path] if types & {"integer", "number"} and "boolean" not in types and len(path) > 1 else []
    for option in options:
        if "$ref" in option or option.get("type") in ("object", "array"):
            found += nested_numbers(option, defs, path, following)
    for name, inner in schema.get("properties", {}).items():
        found += nested_numbers(inner, defs, (*path, name), following)
    if isinstance(schema.get("items"), dict):
        found += nested_numbers(schema["items"], defs, (*path, "[]"), following)
    if isinstance(schema.get("additionalProperties"), dict):
        found += nested_numbers(schema["additionalProperties"], defs, (*path, "{}"), following)
    return found


def holding(path: tuple[str, ...], value: Any) -> tuple[Any, str]:
    """A body holding `value` at `path`, and the field a refusal names."""
    if not path:
        return value, ""
    inner, named = holding(path[1:], value)
    step = {"[]": ([inner], "[0]"), "{}": ({"k": inner}, ".k")}.get(path[0], ({path[0]: inner}, f".{path[0]}"))
    return step[0], step[1] + named


async def test_true_is_refused_for_every_nested_number_parameter_of_every_handler(
        orders_client: httpx.AsyncClient, orders_app: Starlette, ws: Workspace) -> None:
    registry: Registry = orders_app.state.registry
    checked = 0
    for handler in registry:
        if handler.people_only:
            continue
        for path in nested_numbers(handler.schema, handler.schema.get("$defs", {})):
            body, named = holding(path, True)
            r = await orders_client.post(f"/prism/{handler.path}", headers=ws.headers(), json=body)
            assert r.status_code == 400, (handler.path, path, r.text)
            assert named.removeprefix(".") in fields_of(r), (handler.path, path, r.text)
            checked += 1
    assert checked >= 6, checked


class Counted(BaseModel):
    count: int


class Flagged(BaseModel):
    count: bool


class Options(BaseModel):
    either: Counted | Flagged | None = None  # `true` is a Flagged's count
    loose: int | Any = None  # and anything at all
    anything: list[Any] = []
    pair: tuple[int, str] | None = None


def test_true_is_taken_where_some_option_of_the_schema_takes_it() -> None:
    taken = validated(Options, {"either": {"count": True}, "loose": True, "anything": [True, {"n": True}]})
    assert isinstance(taken.either, Flagged) and taken.loose is True
    with pytest.raises(InvalidArguments) as refused:
        validated(Options, {"pair": [True, "x"], "either": {"count": 2}})
    assert refused.value.details["errors"] == [{"field": "pair[0]", "message": "must be a number, not true or false"}]


async def test_anything_but_true_or_false_for_a_nested_boolean_is_refused_naming_its_path(
        orders_client: httpx.AsyncClient, ws: Workspace) -> None:
    RUNS.clear()
    lines = [{"quantity": 1, "gift": "yes"}, {"quantity": 2, "gift": 1}, {"quantity": 3, "gift": False}]
    r = await orders_client.post(PATH, headers=ws.headers(), json={"lines": lines})
    assert r.status_code == 400 and r.json()["details"]["errors"] == [
        {"field": "lines[0].gift", "message": "must be true or false"},
        {"field": "lines[1].gift", "message": "must be true or false, not a number"}], r.text
    assert RUNS == []


def test_a_boolean_is_strict_only_where_every_option_is_a_boolean() -> None:
    taken = validated(Options, {"either": {"count": 2}})  # Counted's count takes the number
    assert isinstance(taken.either, Counted)
    with pytest.raises(InvalidArguments) as refused:
        validated(Flagged, {"count": "true"})
    assert refused.value.details["errors"] == [{"field": "count", "message": "must be true or false"}]
