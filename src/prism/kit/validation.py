"""Client input checked against a Pydantic model, refused in the one 400 shape (prism.errors.problem_details)."""

from __future__ import annotations

from collections.abc import Mapping
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
# The forms a query string gives a boolean in (SPEC: "is_active (true or false)"); see `from_query`.
QUERY_BOOLEANS = {"true": True, "false": False}


@dataclass(eq=False)
class _Shape:
    """One schema (one option of a union), reduced to what `_values_nobody_meant` asks of it: does it admit a
    number, a boolean, a date or time string, and what do its properties and items admit. `matters` says whether a
    value nobody meant can be found in it at all, so a walk stops where none can."""

    number: bool = False
    boolean: bool = False
    other: bool = False  # admits a value that is neither a boolean nor null (text, a number, an object ...)
    temporal: bool = False
    objects: bool = False  # its properties below are what an object holds
    arrays: bool = False  # its items below are what an array holds
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


@dataclass(eq=False)
class _Place:
    """A place in the arguments, every option its schema gives it taken together: what is refused there, and the
    places under it where something can be refused (the others are left out, so a walk never enters them)."""

    refuses_booleans: bool = False  # a number, and never a boolean
    refuses_numbers: bool = False  # a date or time, and never a number
    only_booleans: bool = False  # a boolean (or null), and nothing else
    fields: dict[str, _Place] = field(default_factory=dict)
    fields_without: frozenset[str] = frozenset()  # declared properties where nothing can be refused
    any_field: _Place | None = None  # every other property (`additionalProperties`)
    items: _Place | None = None
    prefix_items: list[_Place | None] = field(default_factory=list)


# What a schema that says nothing admits: anything, `true` and objects and arrays of anything included.
_ANYTHING = _Shape(boolean=True, other=True, objects=True, arrays=True)
_ANYTHING.additional = _ANYTHING.items = [_ANYTHING]


# Per model: the place of its arguments, or None when nothing can be refused in them (no number and no date or
# time anywhere), so most handlers' arguments are never walked.
_PLACES: dict[type[BaseModel], _Place | None] = {}


def validated(model: type[M], data: Any, *, whole: str = "arguments") -> M:
    """`data` as `model`, or InvalidArguments listing every problem; `whole` names the input as a whole (the
    field a problem of no one field names, and what must be a JSON object: `null` is not one)."""
    if not isinstance(data, dict):
        raise InvalidArguments(f"{whole}: must be a JSON object", field=whole)
    problems = _values_nobody_meant(model, data)
    try:
        result = model.model_validate(data)
    except ValidationError as exc:
        named = {p["field"] for p in problems}  # said once: `rerank: "perhaps"` is not also "a valid boolean"
        problems += [problem for problem in _pydantic_problems(exc, whole) if problem["field"] not in named]
        result = None
    if problems or result is None:
        raise InvalidArguments("; ".join(f"{p['field']}: {p['message']}" for p in problems),
                               details={"errors": problems}) from None
    return result


def _pydantic_problems(error: ValidationError, whole: str) -> list[dict[str, str]]:
    return [{"field": field_path(e["loc"]) or whole, "message": e["msg"].removeprefix("Value error, ")}
            for e in error.errors(include_url=False, include_input=False)]


def from_query(model: type[BaseModel], query: Mapping[str, str]) -> dict[str, Any]:
    """A query string's parameters as the JSON `model` validates: `true` and `false` (exactly) are booleans for its
    boolean fields; every other value stays text for the model to judge (`is_active=yes` is refused as not true or
    false, where Pydantic alone would read yes, on, 1 ... as true)."""
    place = _place_for(model)
    fields = place.fields if place is not None else {}
    return {name: QUERY_BOOLEANS.get(value, value) if name in fields and fields[name].only_booleans else value
            for name, value in query.items()}


def field_path(location: tuple[int | str, ...]) -> str:
    """A Pydantic error's location as the documented path of the field at fault: `lines[2].quantity`."""
    path = ""
    for part in location:
        path += f"[{part}]" if isinstance(part, int) else f".{part}" if path else str(part)
    return path


def _values_nobody_meant(model: type[BaseModel], data: dict[str, Any]) -> list[dict[str, str]]:
    """Values Pydantic would read as something nobody meant: a number for a date or time field (read as a Unix
    time; the descriptors, and Prism, say such a field is an ISO 8601 string), `true` or `false` for a number
    (read as 1 or 0: a budget of `true` is a budget of 1), and anything but `true` or `false` for a boolean (read
    `"yes"`, `"off"`, `1` as booleans: `{"is_active": "no"}` is not false, it is a mistake). Judged by the published
    schema, at any depth: a field of an object, of an object in a list (`lines[2].quantity`), a list's items."""
    place = _place_for(model)
    problems: list[dict[str, str]] = []
    if place is not None:
        _walk(data, place, "", problems)
    return problems


def _place_for(model: type[BaseModel]) -> _Place | None:
    if model not in _PLACES:
        _PLACES[model] = _place_of(_shapes_that_matter(model.model_json_schema()), {})
    return _PLACES[model]


def _walk(value: Any, place: _Place, path: str, problems: list[dict[str, str]]) -> None:
    """Adds to `problems` each value nobody meant in `value`, found at `place`."""
    if isinstance(value, bool):
        if place.refuses_booleans:
            problems.append({"field": path, "message": "must be a number, not true or false"})
    elif place.only_booleans:
        if value is not None:
            problems.append({"field": path, "message": "must be true or false" + _other_kind(value)})
    elif isinstance(value, int | float):
        if place.refuses_numbers:
            problems.append({"field": path, "message": "must be an ISO 8601 string, not a number"})
    elif isinstance(value, dict):
        _walk_fields(value, place, path, problems)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            inner = place.prefix_items[index] if index < len(place.prefix_items) else place.items
            if inner is not None:
                _walk(item, inner, f"{path}[{index}]", problems)


def _other_kind(value: Any) -> str:
    """What a value that is not a boolean is, for a refusal's message. Text is not named: a query string (see
    `from_query`) has nothing but text, and "yes" or "1" there is as wrong as in JSON."""
    if isinstance(value, str):
        return ""
    if isinstance(value, int | float):
        return ", not a number"
    return ", not an array" if isinstance(value, list) else ", not an object"


def _walk_fields(value: dict[Any, Any], place: _Place, path: str, problems: list[dict[str, str]]) -> None:
    if place.any_field is None:  # the common case: only the declared fields where something can be refused
        for name, inner in place.fields.items():
            if name in value:
                _walk(value[name], inner, f"{path}.{name}" if path else name, problems)
        return
    for name, item in value.items():
        found = place.fields.get(name) or (None if name in place.fields_without else place.any_field)
        if found is not None:
            _walk(item, found, f"{path}.{name}" if path else str(name), problems)


def _place_of(shapes: list[_Shape], made: dict[frozenset[int], _Place | None]) -> _Place | None:
    """The place whose options are `shapes`, or None if nothing can be refused there; made once per set of
    options (`made`), so a model that holds itself makes a place that holds itself."""
    if not any(s.matters for s in shapes):
        return None
    options = frozenset(id(s) for s in shapes)
    if options in made:
        return made[options]
    place = made[options] = _Place(
        refuses_booleans=any(s.number for s in shapes) and not any(s.boolean for s in shapes),
        refuses_numbers=any(s.temporal for s in shapes) and not any(s.number for s in shapes),
        only_booleans=any(s.boolean for s in shapes) and not any(s.other for s in shapes))
    objects, arrays = [s for s in shapes if s.objects], [s for s in shapes if s.arrays]  # `null` holds nothing
    fields = {name: _place_of([c for s in objects for c in s.properties.get(name, s.additional)], made)
              for name in dict.fromkeys(name for s in objects for name in s.properties)}
    place.fields = {name: inner for name, inner in fields.items() if inner is not None}
    place.fields_without = frozenset(name for name, inner in fields.items() if inner is None)
    place.any_field = _place_of([c for s in objects for c in s.additional], made)
    place.items = _place_of([c for s in arrays for c in s.items], made)
    place.prefix_items = [
        _place_of([c for s in arrays for c in (s.prefix_items[i] if i < len(s.prefix_items) else s.items)], made)
        for i in range(max((len(s.prefix_items) for s in arrays), default=0))]
    return place


def _shapes_that_matter(schema: dict[str, Any]) -> list[_Shape]:
    """The shapes of a model's published schema, each marked with whether it matters."""
    defs = schema.get("$defs", {})
    root = _resolved(_shapes(schema, defs if isinstance(defs, dict) else {}, {}))
    everything = _every_shape(root)
    # A shape matters if it admits a number, a date or time, or only booleans, or holds one that matters: to a
    # fixed point, since a model may hold itself (a tree of lines).
    changed = True
    while changed:
        changed = False
        for shape in everything:
            if not shape.matters and (shape.number or shape.temporal or (shape.boolean and not shape.other)
                                      or any(c.matters for inner in shape.children() for c in inner)):
                shape.matters = changed = True
    return root


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
        return [_ANYTHING] if schema is True else []  # `true` admits anything, `false` nothing
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
        options.append(_ANYTHING)
    return options


def _referenced(ref: str, defs: dict[str, Any], by_ref: dict[str, list[_Shape]]) -> list[_Shape]:
    """A reference to the shapes of a `$defs` entry, made once: a model that holds itself refers to the list
    still being made, so what it holds is only read once every definition is made (`_resolved`)."""
    if not ref.startswith(_DEFS) or not isinstance(defs.get(ref.removeprefix(_DEFS)), dict):
        return [_ANYTHING]  # a reference Pydantic does not write: judge nothing under it
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
                   other=bool(types - {"boolean", "null"}) or any(c is not None and not isinstance(c, bool)
                                                                  for c in constants)
                   or (not types and bool({"properties", "items", "prefixItems"} & schema.keys())),
                   temporal=schema.get("format") in _TEMPORAL_FORMATS,
                   objects="object" in types or (not types and "properties" in schema),
                   arrays="array" in types or (not types and bool({"items", "prefixItems"} & schema.keys())))
    properties = schema.get("properties")
    if isinstance(properties, dict):
        shape.properties = {name: _shapes(inner, defs, by_ref) for name, inner in properties.items()}
    shape.additional = _shapes(schema.get("additionalProperties", False), defs, by_ref)
    items = schema.get("items")
    shape.items = _shapes(items, defs, by_ref) if items is not None else [_ANYTHING]
    shape.prefix_items = [_shapes(inner, defs, by_ref) for inner in schema.get("prefixItems", ())]
    return shape


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)
