"""Handler schemas written from declared fields must equal pydantic's own, or defer to it."""

from __future__ import annotations

import datetime as dt
from typing import Any, Literal

import pytest
from bench.synthetic_app import SHAPES
from pydantic import BaseModel, Field, create_model, field_validator

from prism.apps.params import Params
from prism.registry.fast_schema import fast_model_schema
from prism.registry.registry import build_registry


def _models() -> dict[str, type[BaseModel]]:
    models = {h.params.__name__: h.params for h in build_registry()}
    models.update({f"Synthetic{name}": create_model(f"Synthetic{name}", __base__=Params, **fields)
                   for name, fields in SHAPES.items()})
    return models


@pytest.mark.parametrize("model", list(_models().values()), ids=list(_models()))
def test_every_parameter_model_gets_exactly_pydantics_schema(model: type[BaseModel]) -> None:
    fast = fast_model_schema(model)
    if fast is not None:  # None means: pydantic generates it (checked below to be rare)
        assert fast == model.model_json_schema()


def test_the_plain_parameter_shapes_handlers_use_take_the_fast_path() -> None:
    slow = [name for name, model in _models().items() if name.startswith("Synthetic") and
            fast_model_schema(model) is None]
    assert slow == []


class _Plain(Params):
    """Documented model."""

    a: Literal["x"] = "x"
    b: Literal["x", "y"] = "x"
    c: list[str] = Field(default_factory=list)
    d: dt.date | None = None
    e: float = Field(0.5, gt=0, lt=1, multiple_of=0.1)
    f: str = Field("", pattern="^a")
    g: dict[str, int] = Field(default_factory=dict)
    h: list[int] | None = Field(None, min_length=1, max_length=3)
    i: bool = False
    j: int | str = 1
    k: dt.datetime
    m: dict[str, Any] | None = None
    n: Literal[1, 2] = Field(1, description="A number.", title="En")


def test_a_model_using_every_supported_shape_matches_pydantic() -> None:
    assert fast_model_schema(_Plain) == _Plain.model_json_schema()


class _Nested(Params):
    inner: _Plain


class _Aliased(Params):
    value: int = Field(0, alias="Value")


class _Validated(Params):
    when: str

    @field_validator("when", mode="before")
    @classmethod
    def _strip(cls, value: object) -> object:
        return value


class _Extra(Params):
    x: int = Field(0, json_schema_extra={"x-unit": "kg"})


@pytest.mark.parametrize("model", [_Nested, _Aliased, _Validated, _Extra])
def test_shapes_it_does_not_know_are_left_to_pydantic(model: type[BaseModel]) -> None:
    assert fast_model_schema(model) is None
