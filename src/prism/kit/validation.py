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
_TEMPORAL_FIELDS: dict[type[BaseModel], tuple[str, ...]] = {}


def validated(model: type[M], data: Any, *, whole: str = "arguments") -> M:
    """`data` as `model`, or InvalidArguments listing every problem; `whole` names the input as a whole (the
    field a problem of no one field names, and what must be a JSON object: `null` is not one)."""
    if not isinstance(data, dict):
        raise InvalidArguments(f"{whole}: must be a JSON object", field=whole)
    problems = _numbers_for_times(model, data)
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


def _numbers_for_times(model: type[BaseModel], data: dict[str, Any]) -> list[dict[str, str]]:
    """Pydantic reads a number as a Unix time for a date or time field; the descriptors (and Prism) say such a
    field is an ISO 8601 string, so a number is refused rather than read as a moment nobody meant."""
    names = _TEMPORAL_FIELDS.get(model)
    if names is None:
        names = _TEMPORAL_FIELDS[model] = _temporal_fields(model)
    return [{"field": name, "message": "must be an ISO 8601 string, not a number"} for name in names
            if isinstance(data.get(name), int | float) and not isinstance(data.get(name), bool)]


def _temporal_fields(model: type[BaseModel]) -> tuple[str, ...]:
    """The fields whose published schema is a date, time or date-time string: judged by the schema the descriptors
    publish, so every way of writing such a type (datetime, AwareDatetime, date | None ...) is covered."""
    properties = model.model_json_schema().get("properties", {})
    return tuple(name for name, schema in properties.items() if _is_temporal(schema))


def _is_temporal(schema: dict[str, Any]) -> bool:
    if schema.get("format") in _TEMPORAL_FORMATS:
        return True
    return any(_is_temporal(option) for option in schema.get("anyOf", ()) if isinstance(option, dict))
