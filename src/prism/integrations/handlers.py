"""Registry handlers for an imported integration's stored operations (OpenAPI operations and upstream MCP
tools alike).

Every operation shares one parameter class (`OperationArguments`, which takes any object) and checks its
arguments against the service's own JSON Schema (`Handler.check_arguments`), compiled on its first call:
declaring a Pydantic model per operation costs ~0.14 ms each, seconds at the scale imports reach.

The check runs on the event loop with a schema Prism did not write (an imported description, or whatever an
upstream MCP server lists), so it must cost little whatever the schema and the arguments: it is jsonschema-rs,
whose patterns run in linear time, or stopped after a bounded number of steps (prism.integrations.patterns): with
Python's `re`, `^(a+)+$` against 30 letters and a `!` held the whole process for a minute. Remote `$ref`s are
never fetched.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import jsonschema_rs
from pydantic import BaseModel, ConfigDict

from prism.integrations.mcp_upstream import call_tool_operation
from prism.integrations.names import words
from prism.integrations.patterns import PATTERNS
from prism.integrations.upstream import call_operation
from prism.registry import Coordinate, Handler, HandlerApp

SHAPE_ONLY: dict[str, Any] = {"type": "object"}
MESSAGE_CHARACTERS = 300
Kind = jsonschema_rs.ValidationErrorKind


class OperationArguments(BaseModel):
    """The arguments of an imported operation, as sent; checked against its schema by `check_arguments`."""

    model_config = ConfigDict(extra="allow")


def argument_checker(schema: dict[str, Any]) -> Callable[[dict[str, Any]], list[dict[str, str]]]:
    """The arguments' problems: none, or the first one found. (jsonschema-rs lists every error before handing
    back the first: 2 s of the loop for an array of 300,000 wrong items, where the first costs 10 ms.)"""
    validator: list[jsonschema_rs.Validator] = []

    def check(arguments: dict[str, Any]) -> list[dict[str, str]]:
        if not validator:
            validator.append(_validator(schema))
        try:
            validator[0].validate(arguments)
        except jsonschema_rs.ValidationError as error:
            return [{"field": _field(error), "message": error.message[:MESSAGE_CHARACTERS]}]
        except ValueError as exc:  # a value JSON cannot carry (a lone surrogate sent through a door that allowed it)
            return [{"field": "arguments", "message": f"not JSON text: {exc}"[:MESSAGE_CHARACTERS]}]
        return []

    return check


def _field(error: jsonschema_rs.ValidationError) -> str:
    """The argument at fault, dotted: for a missing or an unexpected property, that property."""
    path = [str(part) for part in error.instance_path]
    if isinstance(error.kind, Kind.Required):
        path.append(str(error.kind.property))
    elif isinstance(error.kind, Kind.AdditionalProperties) and error.kind.unexpected:
        path.append(str(error.kind.unexpected[0]))
    return ".".join(path) or "arguments"


def _validator(schema: dict[str, Any]) -> jsonschema_rs.Validator:
    """The service's own schema, when it is one. A schema that is itself invalid (an unknown type, a pattern
    no engine reads, `properties` that are not an object, a reference to nothing or to another document) would
    fail every call: only the arguments' shape is checked then. Built on the operation's first call, because
    building every imported schema while building the registry would cost seconds at 10,000 handlers."""
    try:
        return jsonschema_rs.Draft202012Validator(schema, retriever=_never_fetched, pattern_options=PATTERNS)
    except (jsonschema_rs.ValidationError, jsonschema_rs.ReferencingError, ValueError, RecursionError):
        return jsonschema_rs.Draft202012Validator(SHAPE_ONLY)


def _never_fetched(uri: str) -> Any:
    """A `$ref` to another document points at nothing: Prism fetches nothing a schema names."""
    raise LookupError(f"{uri} is not fetched")


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
