"""The base class for handler parameter models: declare yours as `class QuoteParams(Params): ...`."""

from __future__ import annotations

import re
import types
from datetime import date
from functools import cache
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, model_validator

from prism.errors import InvalidArguments

_DAY = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")


class Params(BaseModel):
    """Unknown arguments are refused: an agent's typo should fail loudly, not be ignored. A date field takes a
    day, YYYY-MM-DD, only: pydantic would also take a date-time at midnight (dropping its zone, which may make
    it another day) or a number of seconds."""

    # defer_build: a model's validator is built on its first call, not when its class is declared. With
    # thousands of handlers most are never called by a given process, and start-up pays only for their
    # schemas (prism.registry.fast_schema writes those from the declared fields, without a validator).
    model_config = ConfigDict(extra="forbid", defer_build=True)

    @model_validator(mode="before")
    @classmethod
    def _days_are_days(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for name in _day_fields(cls):
                value = data.get(name)
                if value is not None and not isinstance(value, date) and not (
                        isinstance(value, str) and _DAY.fullmatch(value)):
                    raise InvalidArguments(f"{name}: must be a date, YYYY-MM-DD", field=name)
        return data


@cache
def _day_fields(model: type[BaseModel]) -> tuple[str, ...]:
    """The fields declared as a date (or a date or None): not a date-time, which is a date's subclass."""
    def is_day(annotation: Any) -> bool:
        if get_origin(annotation) in (Union, types.UnionType):
            return any(is_day(a) for a in get_args(annotation) if a is not type(None))
        return annotation is date
    return tuple(name for name, f in model.model_fields.items() if is_day(f.annotation))
