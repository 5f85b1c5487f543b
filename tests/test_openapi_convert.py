"""JSON Schema 2020-12 (Pydantic) → OpenAPI 3.0.3 Schema Objects."""

from __future__ import annotations

from datetime import date
from typing import Any, Literal

from openapi_spec_validator import validate
from pydantic import BaseModel, Field

from prism.openapi.convert import Components, to_openapi30


class Line(BaseModel):
    sku: str
    quantity: int = Field(gt=0, lt=1000)


class Order(BaseModel):
    lines: list[Line]
    backup: Line | None = None
    kind: Literal["rush"] = "rush"
    tags: tuple[str, int] | None = None
    due: date | int | None = None
    meta: dict[str, Any] = Field(default_factory=dict, examples=[{"a": 1}])


def _as_document(schema: dict[str, Any], components: Components) -> dict[str, Any]:
    return {"openapi": "3.0.3", "info": {"title": "t", "version": "1"}, "paths": {"/x": {"post": {
        "requestBody": {"content": {"application/json": {"schema": schema}}},
        "responses": {"200": {"description": "ok"}}}}}, "components": {"schemas": components.schemas}}


def test_pydantic_schema_becomes_valid_openapi_303() -> None:
    components = Components()
    schema = to_openapi30(Order.model_json_schema(), components)
    validate(_as_document(schema, components))
    props = schema["properties"]
    assert props["lines"]["items"] == {"$ref": "#/components/schemas/Line"}
    assert props["backup"] == {"allOf": [{"$ref": "#/components/schemas/Line"}], "nullable": True, "default": None}
    assert props["kind"]["enum"] == ["rush"] and "const" not in props["kind"]
    assert props["tags"]["nullable"] is True and props["tags"]["items"] == {}  # prefixItems has no 3.0.3 form
    assert props["due"]["nullable"] is True and len(props["due"]["anyOf"]) == 2
    assert props["meta"]["example"] == {"a": 1} and "examples" not in props["meta"]
    quantity = components.schemas["Line"]["properties"]["quantity"]
    assert quantity == {"exclusiveMinimum": True, "minimum": 0, "exclusiveMaximum": True, "maximum": 1000,
                        "title": "Quantity", "type": "integer"}


def test_type_arrays_become_one_type_with_nullable() -> None:
    components = Components()
    converted = to_openapi30({"type": "object", "properties": {
        "a": {"type": ["string", "null"]}, "b": {"type": "null"}, "c": {"type": ["integer", "string"]},
        "d": {"enum": ["x", "y"], "type": ["string", "null"]}}}, components)
    assert converted["properties"]["a"] == {"type": "string", "nullable": True}
    assert converted["properties"]["b"] == {"enum": [None], "nullable": True}
    assert converted["properties"]["c"] == {"anyOf": [{"type": "integer"}, {"type": "string"}]}
    assert converted["properties"]["d"] == {"enum": ["x", "y", None], "type": "string", "nullable": True}


def test_two_handlers_defining_the_same_name_differently_get_distinct_components() -> None:
    components = Components()
    first = to_openapi30({"$defs": {"Item": {"type": "string"}}, "properties": {"i": {"$ref": "#/$defs/Item"}}},
                         components)
    second = to_openapi30({"$defs": {"Item": {"type": "integer"}}, "properties": {"i": {"$ref": "#/$defs/Item"}}},
                          components)
    same = to_openapi30({"$defs": {"Item": {"type": "string"}}, "properties": {"i": {"$ref": "#/$defs/Item"}}},
                        components)
    assert first["properties"]["i"] == {"$ref": "#/components/schemas/Item"}
    assert second["properties"]["i"] == {"$ref": "#/components/schemas/Item_2"}
    assert same["properties"]["i"] == {"$ref": "#/components/schemas/Item"}
    assert components.schemas == {"Item": {"type": "string"}, "Item_2": {"type": "integer"}}
