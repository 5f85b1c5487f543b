"""JSON Schema of a parameter model, straight from its declared fields — pydantic's output, faster.

Every handler's schema is generated once at start-up. Pydantic derives a JSON Schema from the model's
*core schema*, which it must first build (the validator's blueprint); for 10,000 distinct models that
costs seconds of start-up, although a validator is only needed once a handler is called. Parameter
models are declared with `defer_build` (prism.registry.Params), and this module writes the schema
from `model_fields` for the plain shapes handler parameters take: scalars, dates, Literal, Optional
and unions of those, lists and dicts of them, with the usual constraints.

The output equals `model_json_schema()` (a test compares them over every built-in model and the
benchmark's shapes). Anything outside that set — nested models, enums, aliases, validators that
change the schema, custom schema hooks — returns None and the caller uses pydantic itself, so
unusual models cost time, never correctness.
"""

from __future__ import annotations

import datetime as dt
import inspect
import types
import typing
from typing import Any

import annotated_types as at
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined


class _Unsupported(Exception):
    pass


_SCALARS: dict[Any, dict[str, Any]] = {
    str: {"type": "string"}, int: {"type": "integer"}, float: {"type": "number"}, bool: {"type": "boolean"},
    dt.date: {"format": "date", "type": "string"}, dt.datetime: {"format": "date-time", "type": "string"},
    type(None): {"type": "null"}, Any: {},
}
_JSON_SCALARS = (str, int, float, bool, type(None))
# Constraint metadata → JSON Schema keyword, per kind of schema it applies to.
_NUMERIC = {at.Ge: ("ge", "minimum"), at.Le: ("le", "maximum"), at.Gt: ("gt", "exclusiveMinimum"),
            at.Lt: ("lt", "exclusiveMaximum"), at.MultipleOf: ("multiple_of", "multipleOf")}
_LENGTH = {"string": ("minLength", "maxLength"), "array": ("minItems", "maxItems"),
           "object": ("minProperties", "maxProperties")}


def fast_model_schema(model: type[BaseModel]) -> dict[str, Any] | None:
    """The model's JSON Schema, or None when its shape needs pydantic's own generator."""
    try:
        return _model_schema(model)
    except _Unsupported:
        return None


def _model_schema(model: type[BaseModel]) -> dict[str, Any]:
    if _customises_schema(model):
        raise _Unsupported
    properties: dict[str, Any] = {}
    required: list[str] = []
    for name, field in model.model_fields.items():
        if field.alias is not None and field.alias != name:
            raise _Unsupported
        properties[name] = _field_schema(name, field)
        if field.is_required():
            required.append(name)
    schema: dict[str, Any] = {"properties": properties}
    if model.model_config.get("extra") == "forbid":
        schema["additionalProperties"] = False
    if required:
        schema["required"] = required
    schema["title"] = model.model_config.get("title") or model.__name__
    schema["type"] = "object"
    if model.__doc__:
        schema["description"] = inspect.cleandoc(model.__doc__)
    # Pydantic sorts every object's keys except a model's property names: same order, same bytes.
    return dict(sorted(schema.items()))


def _customises_schema(model: type[BaseModel]) -> bool:
    config = model.model_config
    if config.get("json_schema_extra") or config.get("alias_generator") or config.get("json_schema_mode_override"):
        return True
    decorators = model.__pydantic_decorators__
    if decorators.field_serializers or decorators.model_serializers or decorators.computed_fields:
        return True
    # A before/wrap/plain field validator can declare its own JSON Schema input type.
    if any(d.info.mode != "after" for d in decorators.field_validators.values()):
        return True
    return "__get_pydantic_json_schema__" in model.__dict__ or "model_json_schema" in model.__dict__



def _field_schema(name: str, field: FieldInfo) -> dict[str, Any]:
    if field.json_schema_extra is not None or field.examples is not None or field.discriminator is not None:
        raise _Unsupported
    schema = _annotation_schema(field.annotation, list(field.metadata))
    if field.default is not PydanticUndefined:
        schema["default"] = _json_default(field.default)
    elif field.default_factory is not None:
        pass  # pydantic publishes no default for a factory
    if field.description is not None:
        schema["description"] = field.description
    if field.deprecated:
        raise _Unsupported
    schema["title"] = field.title or name.replace("_", " ").title()
    return dict(sorted(schema.items()))


def _annotation_schema(annotation: Any, metadata: list[Any]) -> dict[str, Any]:
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        inner, *extra = typing.get_args(annotation)
        return _annotation_schema(inner, [*extra, *metadata])
    if origin in (typing.Union, types.UnionType):
        options = typing.get_args(annotation)
        non_null = [o for o in options if o is not type(None)]
        # Constraints of an Optional[X] field belong to X, as pydantic places them.
        branches = [_annotation_schema(o, metadata if len(non_null) == 1 else []) for o in non_null]
        if len(non_null) > 1 and metadata:
            raise _Unsupported
        if len(non_null) < len(options):
            branches.append({"type": "null"})
        return {"anyOf": branches}
    if origin is typing.Literal:
        return _literal_schema(typing.get_args(annotation), metadata)
    if origin in (list, typing.List):  # noqa: UP006 - both spellings reach here
        (item,) = typing.get_args(annotation) or (Any,)
        return _constrained({"items": _annotation_schema(item, []), "type": "array"}, metadata)
    if origin in (dict, typing.Dict):  # noqa: UP006
        key, value = typing.get_args(annotation) or (str, Any)
        if key is not str:
            raise _Unsupported
        value_schema = _annotation_schema(value, [])
        return _constrained({"additionalProperties": value_schema if value_schema else True, "type": "object"},
                            metadata)
    if annotation in (list, dict):
        return _annotation_schema(annotation[Any], metadata)
    scalar = _SCALARS.get(annotation) if isinstance(annotation, type) or annotation is Any else None
    if scalar is None:
        raise _Unsupported
    return _constrained(dict(scalar), metadata)


def _literal_schema(values: tuple[Any, ...], metadata: list[Any]) -> dict[str, Any]:
    if metadata or not values:
        raise _Unsupported
    kinds = {type(v) for v in values}
    if len(kinds) != 1 or not kinds <= {str, int, bool}:
        raise _Unsupported
    kind = {str: "string", int: "integer", bool: "boolean"}[kinds.pop()]
    if len(values) == 1:
        return {"const": values[0], "type": kind}
    return {"enum": list(values), "type": kind}


def _constrained(schema: dict[str, Any], metadata: list[Any]) -> dict[str, Any]:
    for item in metadata:
        numeric = _NUMERIC.get(type(item))
        if numeric is not None:
            if schema.get("type") not in ("integer", "number"):
                raise _Unsupported
            schema[numeric[1]] = getattr(item, numeric[0])
        elif isinstance(item, at.MinLen | at.MaxLen):
            keys = _LENGTH.get(schema.get("type", ""))
            if keys is None:
                raise _Unsupported
            schema[keys[0] if isinstance(item, at.MinLen) else keys[1]] = (
                item.min_length if isinstance(item, at.MinLen) else item.max_length)
        elif type(item).__name__ == "_PydanticGeneralMetadata" and set(vars(item)) == {"pattern"}:
            if schema.get("type") != "string":
                raise _Unsupported
            schema["pattern"] = item.pattern
        else:
            raise _Unsupported
    return dict(sorted(schema.items()))


def _json_default(value: Any) -> Any:
    if isinstance(value, _JSON_SCALARS):
        return value
    if isinstance(value, list | tuple) and all(isinstance(v, _JSON_SCALARS) for v in value):
        return list(value)
    if isinstance(value, dict) and all(isinstance(k, str) and isinstance(v, _JSON_SCALARS) for k, v in value.items()):
        return dict(value)
    raise _Unsupported
