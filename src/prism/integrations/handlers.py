"""Registry handlers for an imported integration's stored operations (OpenAPI operations and upstream MCP
tools alike).

Every operation shares one parameter class (`OperationArguments`, which takes any object) and checks its
arguments against the service's own JSON Schema (`Handler.check_arguments`), compiled on its first call:
declaring a Pydantic model per operation costs ~0.14 ms each, seconds at the scale imports reach.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from pydantic import BaseModel, ConfigDict

from prism.integrations.mcp_upstream import call_tool_operation
from prism.integrations.names import words
from prism.integrations.upstream import call_operation
from prism.kit.json_pointer import fragment_target
from prism.registry import Coordinate, Handler, HandlerApp

MAX_PROBLEMS = 20
SHAPE_ONLY: dict[str, Any] = {"type": "object"}


class OperationArguments(BaseModel):
    """The arguments of an imported operation, as sent; checked against its schema by `check_arguments`."""

    model_config = ConfigDict(extra="allow")


def _field(error: Any) -> str:
    path = ".".join(str(p) for p in error.absolute_path)
    if error.validator == "required" and isinstance(error.instance, dict):
        missing = next((m for m in error.validator_value if m not in error.instance), None)
        if missing is not None:
            path = f"{path}.{missing}" if path else str(missing)
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        allowed = set(error.schema.get("properties") or {})
        extra = next((k for k in error.instance if k not in allowed), None)
        if extra is not None:
            path = f"{path}.{extra}" if path else str(extra)
    return path or "arguments"


def argument_checker(schema: dict[str, Any]) -> Callable[[dict[str, Any]], list[dict[str, str]]]:
    validator: list[Draft202012Validator] = []

    def check(arguments: dict[str, Any]) -> list[dict[str, str]]:
        if not validator:
            validator.append(_validator(schema))
        problems = []
        for error in validator[0].iter_errors(arguments):
            problems.append({"field": _field(error), "message": error.message[:300]})
            if len(problems) >= MAX_PROBLEMS:
                break
        return problems

    return check


def _validator(schema: dict[str, Any]) -> Draft202012Validator:
    """The service's own schema, when it is one. A schema that is itself invalid (an unknown type, a pattern
    Python cannot compile, `properties` that are not an object, a reference to nothing) would fail every call
    while validating: only the arguments' shape is checked then. Checked here, on the operation's first call,
    because checking every imported schema while building the registry would cost ~2 ms each."""
    return Draft202012Validator(schema if _usable(schema) else SHAPE_ONLY)


def _usable(schema: dict[str, Any]) -> bool:
    try:
        Draft202012Validator.check_schema(schema)  # its format checker compiles every `pattern`
        return all(_resolves(schema, reference) for reference in _references(schema))
    except (SchemaError, RecursionError):  # nested deeper than Python recurses
        return False


def _references(node: Any) -> Iterator[str]:
    """Every `$ref` string, data included: one in an `enum` or `default` that points at nothing costs only a
    shape-only check, never a failed call."""
    if isinstance(node, list):
        for item in node:
            yield from _references(item)
    elif isinstance(node, dict):
        for key, value in node.items():
            if key in ("$ref", "$dynamicRef") and isinstance(value, str):
                yield value
            else:
                yield from _references(value)


def _resolves(schema: dict[str, Any], reference: str) -> bool:
    """Whether a reference points into the schema itself (`#`, `#/$defs/Item`). Another document's is never
    fetched, and an anchor's is not followed here: both count as pointing at nothing."""
    try:
        fragment_target(schema, reference)
    except LookupError:
        return False
    return True


def permission_for(app: str, entity: str, method: str) -> str:
    verb = "view" if method in ("GET", "HEAD", "OPTIONS") else "delete" if method == "DELETE" else "change"
    return f"{app}.{verb}_{entity}"


def build_app(name: str, description: str, operations: list[dict[str, Any]]) -> HandlerApp:
    app = HandlerApp(name, description=description)
    for operation in operations:
        read_only = bool(operation["read_only"])
        upstream_mcp = operation["method"] == "MCP"
        run = call_tool_operation if upstream_mcp else call_operation
        app.handlers.append(Handler(
            coordinate=Coordinate("integration_call", name, operation["entity"], operation["operation"]),
            params=OperationArguments, func=partial(run, operation), description=operation["description"],
            category=name, scope="read" if read_only else "execute",
            permission=(f"{name}.{operation['permission_verb']}_tool" if upstream_mcp
                        else permission_for(name, operation["entity"], operation["method"])),
            cost=int(operation["cost"]), read_only=read_only, destructive=bool(operation["destructive"]),
            keywords=tuple(dict.fromkeys(w for w in (operation.get("tag") or "", " ".join(words(name))) if w)),
            examples=tuple(operation.get("examples", ())),
            schema=operation["schema"], integration=name, check_arguments=argument_checker(operation["schema"])))
    return app
