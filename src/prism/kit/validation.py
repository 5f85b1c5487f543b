"""Client input checked against a Pydantic model, refused in the one 400 shape (prism.errors.problem_details)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, TypeVar

from pydantic import AfterValidator, AwareDatetime, BaseModel, ValidationError

from prism.errors import InvalidArguments

M = TypeVar("M", bound=BaseModel)


def _held_in_utc(value: datetime) -> datetime:
    try:
        value.astimezone(UTC)
    except OverflowError:  # near year 1 or 9999, an offset moves the moment past what datetime holds
        raise ValueError("must be a moment between the years 1 and 9999 in UTC") from None
    return value


# A handler parameter that is a moment: with its zone, and one UTC can hold, since every moment is stored and
# compared in UTC (a naive or unconvertible one reached the database as a 500).
Moment = Annotated[AwareDatetime, AfterValidator(_held_in_utc)]
_TEMPORAL_FORMATS = frozenset({"date", "time", "date-time"})
_NUMBER_TYPES = frozenset({"integer", "number"})
# Per model: its temporal fields, and its number fields (see `_values_nobody_meant`).
_FIELD_KINDS: dict[type[BaseModel], tuple[tuple[str, ...], tuple[str, ...]]] = {}


def validated(model: type[M], data: Any, *, whole: str = "arguments") -> M:
    """`data` as `model`, or InvalidArguments listing every problem; `whole` names the input as a whole (the
    field a problem of no one field names, and what must be a JSON object: `null` is not one)."""
    if not isinstance(data, dict):
        raise InvalidArguments(f"{whole}: must be a JSON object", field=whole)
    problems = _values_nobody_meant(model, data)
    try:
        result = model.model_validate(data)
    except ValidationError as exc:
        problems += [{"field": ".".join(str(p) for p in e["loc"]) or whole,
                      "message": e["msg"].removeprefix("Value error, ")}
                     for e in exc.errors(include_url=False, include_input=False)]
        result = None
    if problems or result is None:
        raise InvalidArguments("; ".join(f"{p['field']}: {p['message']}" for p in problems),
                               details={"errors": problems}) from None
    return result


def _values_nobody_meant(model: type[BaseModel], data: dict[str, Any]) -> list[dict[str, str]]:
    """Values Pydantic would read as something nobody meant: a number for a date or time field (read as a Unix
    time; the descriptors, and Prism, say such a field is an ISO 8601 string), and `true` or `false` for a number
    (read as 1 or 0: a budget of `true` is a budget of 1). Top-level fields, judged by the published schema."""
    fields = _FIELD_KINDS.get(model)
    if fields is None:
        fields = _FIELD_KINDS[model] = _field_kinds(model)
    temporal, numeric = fields
    problems = [{"field": name, "message": "must be an ISO 8601 string, not a number"} for name in temporal
                if isinstance(data.get(name), int | float) and not isinstance(data.get(name), bool)]
    problems += [{"field": name, "message": "must be a number, not true or false"} for name in numeric
                 if isinstance(data.get(name), bool)]
    return problems


def _field_kinds(model: type[BaseModel]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The fields whose published schema is a date, time or date-time string, and those that are a number and
    never a boolean: judged by the schema the descriptors publish, so every way of writing such a type (datetime,
    AwareDatetime, date | None, int | None ...) is covered."""
    properties = model.model_json_schema().get("properties", {})
    return (tuple(name for name, schema in properties.items() if _is_temporal(schema)),
            tuple(name for name, schema in properties.items() if _types_of(schema) & _NUMBER_TYPES
                  and "boolean" not in _types_of(schema)))


def _is_temporal(schema: dict[str, Any]) -> bool:
    if schema.get("format") in _TEMPORAL_FORMATS:
        return True
    return any(_is_temporal(option) for option in schema.get("anyOf", ()) if isinstance(option, dict))


def _types_of(schema: dict[str, Any]) -> set[str]:
    """The JSON types a field's schema admits, its `anyOf` options included."""
    declared = schema.get("type")
    types = {declared} if isinstance(declared, str) else set(declared or ())
    for option in schema.get("anyOf", ()):
        if isinstance(option, dict):
            types |= _types_of(option)
    return types
