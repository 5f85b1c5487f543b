"""Client input checked against a Pydantic model, refused in the one 400 shape (prism.errors.problem_details)."""

from __future__ import annotations

from dataclasses import dataclass, field
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
_DEFS = "#/$defs/"


@dataclass(eq=False)
class _Shape:
    """One schema (one option of a union), reduced to what `_values_nobody_meant` asks of it: does it admit a
    number, a boolean, a date or time string, and what do its properties and items admit. `matters` says whether a
    value nobody meant can be found in it at all, so a walk stops where none can."""

    number: bool = False
    boolean: bool = False
    temporal: bool = False
    properties: dict[str, list[_Shape]] = field(default_factory=dict)
    additional: list[_Shape] = field(default_factory=list)
    items: list[_Shape] = field(default_factory=list)
    prefix_items: list[list[_Shape]] = field(default_factory=list)
    matters: bool = False
    # A `$ref`: the shapes of the definition it names, which may still be in the making (a model that holds
    # itself); replaced by them once every definition is made.
    refers_to: list[_Shape] | None = None

    def children(self) -> list[list[_Shape]]:
        return [*self.properties.values(), self.additional, self.items, *self.prefix_items]


# Per model: the shapes of its arguments, or None when no value nobody meant can occur in them (no number and no
# date or time anywhere), so most handlers' arguments are never walked.
_SHAPES: dict[type[BaseModel], list[_Shape] | None] = {}


def validated(model: type[M], data: Any, *, whole: str = "arguments") -> M:
    """`data` as `model`, or InvalidArguments listing every problem; `whole` names the input as a whole (the
    field a problem of no one field names, and what must be a JSON object: `null` is not one)."""
    if not isinstance(data, dict):
        raise InvalidArguments(f"{whole}: must be a JSON object", field=whole)
    problems = _values_nobody_meant(model, data)
    try:
        result = model.model_validate(data)
    except ValidationError as exc:
        problems += [{"field": field_path(e["loc"]) or whole,
                      "message": e["msg"].removeprefix("Value error, ")}
                     for e in exc.errors(include_url=False, include_input=False)]
        result = None
    if problems or result is None:
        raise InvalidArguments("; ".join(f"{p['field']}: {p['message']}" for p in problems),
                               details={"errors": problems}) from None
    return result


def field_path(location: tuple[int | str, ...]) -> str:
    """A Pydantic error's location as the documented path of the field at fault: `lines[2].quantity`."""
    path = ""
    for part in location:
        path += f"[{part}]" if isinstance(part, int) else f".{part}" if path else str(part)
    return path


def _values_nobody_meant(model: type[BaseModel], data: dict[str, Any]) -> list[dict[str, str]]:
    """Values Pydantic would read as something nobody meant: a number for a date or time field (read as a Unix
    time; the descriptors, and Prism, say such a field is an ISO 8601 string), and `true` or `false` for a number
    (read as 1 or 0: a budget of `true` is a budget of 1). Judged by the published schema, at any depth: a field of
    an object, of an object in a list (`lines[2].quantity`), a list's items."""
    if model not in _SHAPES:
        _SHAPES[model] = _shapes_that_matter(model.model_json_schema())
    shapes = _SHAPES[model]
    problems: list[dict[str, str]] = []
    if shapes is not None:
        _walk(data, shapes, "", problems)
    return problems


def _walk(value: Any, shapes: list[_Shape], path: str, problems: list[dict[str, str]]) -> None:
    """Adds to `problems` each value nobody meant in `value`, which `shapes` (the options of its schema) admit."""
    if isinstance(value, bool):
        if any(s.number for s in shapes) and not any(s.boolean for s in shapes):
            problems.append({"field": path, "message": "must be a number, not true or false"})
    elif isinstance(value, int | float):
        if any(s.temporal for s in shapes) and not any(s.number for s in shapes):
            problems.append({"field": path, "message": "must be an ISO 8601 string, not a number"})
    elif isinstance(value, dict):
        for key, item in value.items():
            inner = [c for s in shapes if s.matters for c in s.properties.get(key, s.additional)]
            if any(c.matters for c in inner):
                _walk(item, inner, f"{path}.{key}" if path else str(key), problems)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            inner = [c for s in shapes if s.matters
                     for c in (s.prefix_items[index] if index < len(s.prefix_items) else s.items)]
            if any(c.matters for c in inner):
                _walk(item, inner, f"{path}[{index}]", problems)


def _shapes_that_matter(schema: dict[str, Any]) -> list[_Shape] | None:
    """The shapes of a model's published schema, each marked with whether it matters; None if none does."""
    defs = schema.get("$defs", {})
    root = _resolved(_shapes(schema, defs if isinstance(defs, dict) else {}, {}))
    everything = _every_shape(root)
    # A shape matters if it admits a number or a date or time, or holds one that matters: to a fixed point, since
    # a model may hold itself (a tree of lines).
    changed = True
    while changed:
        changed = False
        for shape in everything:
            if not shape.matters and (shape.number or shape.temporal
                                      or any(c.matters for inner in shape.children() for c in inner)):
                shape.matters = changed = True
    return root if any(s.matters for s in root) else None


def _every_shape(root: list[_Shape]) -> list[_Shape]:
    """Every shape under `root`, each with its references (see `_referenced`) replaced by what they refer to."""
    seen: dict[int, _Shape] = {}
    waiting = list(root)
    while waiting:
        shape = waiting.pop()
        if id(shape) not in seen:
            seen[id(shape)] = shape
            shape.properties = {name: _resolved(inner) for name, inner in shape.properties.items()}
            shape.additional, shape.items = _resolved(shape.additional), _resolved(shape.items)
            shape.prefix_items = [_resolved(inner) for inner in shape.prefix_items]
            waiting += [c for inner in shape.children() for c in inner]
    return list(seen.values())


def _resolved(shapes: list[_Shape], following: frozenset[int] = frozenset()) -> list[_Shape]:
    """`shapes` with each reference replaced by the shapes it refers to (a reference to itself adds none)."""
    resolved: list[_Shape] = []
    for shape in shapes:
        if shape.refers_to is None:
            resolved.append(shape)
        elif id(shape.refers_to) not in following:
            resolved += _resolved(shape.refers_to, following | {id(shape.refers_to)})
    return resolved


def _shapes(schema: Any, defs: dict[str, Any], by_ref: dict[str, list[_Shape]]) -> list[_Shape]:
    """The options a schema admits a value as: its own type, those of its `$ref`, and of each `anyOf`, `oneOf`
    and `allOf` member (counted as options: Pydantic writes `allOf` around a single `$ref`)."""
    if not isinstance(schema, dict):
        return [_Shape(boolean=True)] if schema is True else []  # `true` admits anything, `false` nothing
    options: list[_Shape] = []
    ref = schema.get("$ref")
    if isinstance(ref, str):
        options += _referenced(ref, defs, by_ref)
    for keyword in ("anyOf", "oneOf", "allOf"):
        for member in schema.get(keyword, ()):
            options += _shapes(member, defs, by_ref)
    own = _own_shape(schema, defs, by_ref)
    if own is not None:
        options.append(own)
    elif not options:  # no type, no reference and no options: anything, `true` included
        options.append(_Shape(boolean=True))
    return options


def _referenced(ref: str, defs: dict[str, Any], by_ref: dict[str, list[_Shape]]) -> list[_Shape]:
    """A reference to the shapes of a `$defs` entry, made once: a model that holds itself refers to the list
    still being made, so what it holds is only read once every definition is made (`_resolved`)."""
    if not ref.startswith(_DEFS) or not isinstance(defs.get(ref.removeprefix(_DEFS)), dict):
        return [_Shape(boolean=True)]  # a reference Pydantic does not write: judge nothing under it
    name = ref.removeprefix(_DEFS)
    if name not in by_ref:
        by_ref[name] = []
        by_ref[name] += _shapes(defs[name], defs, by_ref)
    return [_Shape(refers_to=by_ref[name])]


def _own_shape(schema: dict[str, Any], defs: dict[str, Any], by_ref: dict[str, list[_Shape]]) -> _Shape | None:
    """The shape of a schema's own `type` (with its properties and items), or None if it declares none."""
    declared = schema.get("type")
    types = {declared} if isinstance(declared, str) else set(declared or ())
    constants = [*schema.get("enum", ()), *(("const" in schema) * [schema.get("const")])]
    if not types and not constants and not {"properties", "items", "prefixItems"} & schema.keys():
        return None
    shape = _Shape(number=bool(types & _NUMBER_TYPES) or any(_is_number(c) for c in constants),
                   boolean="boolean" in types or any(isinstance(c, bool) for c in constants),
                   temporal=schema.get("format") in _TEMPORAL_FORMATS)
    properties = schema.get("properties")
    if isinstance(properties, dict):
        shape.properties = {name: _shapes(inner, defs, by_ref) for name, inner in properties.items()}
    shape.additional = _shapes(schema.get("additionalProperties", False), defs, by_ref)
    items = schema.get("items")
    shape.items = _shapes(items, defs, by_ref) if items is not None else [_Shape(boolean=True)]
    shape.prefix_items = [_shapes(inner, defs, by_ref) for inner in schema.get("prefixItems", ())]
    return shape


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)
