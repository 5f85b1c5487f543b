"""An imported operation's arguments are checked against a schema Prism did not write, on the event loop: the check
must stay cheap whatever the schema's patterns and the arguments are, fetch nothing, and answer every input."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from prism.integrations.handlers import argument_checker
from prism.integrations.openapi import compile_document

pytestmark = pytest.mark.engine_independent

# Against 30 letters and a "!", each of these took Python's `re` (what checked imported schemas before) from
# seconds to hours; every check below must answer in far less than the time budget.
CATASTROPHIC = r"^(a+)+$"
BUDGET_SECONDS = 0.5
EVIL = "a" * 40 + "!"


def timed(schema: dict[str, Any], arguments: dict[str, Any]) -> tuple[list[dict[str, str]], float]:
    check = argument_checker(schema)
    check({})  # built on the first call, as in service
    started = time.perf_counter()
    problems = check(arguments)
    return problems, time.perf_counter() - started


def test_a_pattern_that_backtracks_in_python_is_checked_in_linear_time() -> None:
    schema = {"type": "object", "properties": {"sku": {"type": "string", "pattern": CATASTROPHIC}}}
    problems, seconds = timed(schema, {"sku": EVIL})
    assert seconds < BUDGET_SECONDS
    assert problems[0]["field"] == "sku" and "does not match" in problems[0]["message"]
    # Still the pattern's meaning: a long argument that matches passes, in linear time too.
    passed, seconds = timed(schema, {"sku": "a" * 200_000})
    assert passed == [] and seconds < BUDGET_SECONDS


def test_pattern_properties_and_property_names_are_checked_in_linear_time() -> None:
    schema = {"type": "object", "patternProperties": {CATASTROPHIC: {"type": "integer"}},
              "additionalProperties": False}
    problems, seconds = timed(schema, {EVIL: 1})
    assert seconds < BUDGET_SECONDS and problems[0]["field"] == EVIL, problems
    assert timed(schema, {"aaaa": "not an integer"})[0][0]["field"] == "aaaa"
    assert timed(schema, {"aaaa": 3})[0] == []

    named = {"type": "object", "propertyNames": {"pattern": CATASTROPHIC}}
    problems, seconds = timed(named, {EVIL: 1})
    assert seconds < BUDGET_SECONDS and problems


def test_a_pattern_that_needs_backtracking_is_honoured_and_stopped_past_its_step_limit() -> None:
    # A lookahead (no linear-time engine runs one): enforced as written.
    password = {"type": "object", "properties": {"code": {"type": "string", "pattern": r"^(?=.*\d).{4,}$"}}}
    assert timed(password, {"code": "abc1"})[0] == []
    assert timed(password, {"code": "abcd"})[0][0]["field"] == "code"
    # A backreference after a nested repetition: refused once it has taken too many steps, not run for hours.
    backreference = {"type": "object", "properties": {"v": {"type": "string", "pattern": r"^(a|a)*\1$"}}}
    problems, seconds = timed(backreference, {"v": EVIL})
    assert seconds < BUDGET_SECONDS
    assert problems[0]["field"] == "v" and "backtrack" in problems[0]["message"].lower(), problems
    # Many such strings: each stops at the limit, and the first failure ends the check.
    items = {"type": "object", "properties": {"vs": {"type": "array", "items": backreference["properties"]["v"]}}}
    problems, seconds = timed(items, {"vs": [EVIL] * 10_000})
    assert seconds < BUDGET_SECONDS and problems[0]["field"] == "vs.0"


def test_only_the_first_problem_is_looked_for() -> None:
    schema = {"type": "object", "properties": {"xs": {"type": "array", "items": {"type": "string"}}}}
    problems, seconds = timed(schema, {"xs": list(range(200_000))})
    assert len(problems) == 1 and problems[0]["field"] == "xs.0"
    assert seconds < BUDGET_SECONDS


def test_the_field_names_the_missing_or_unexpected_property() -> None:
    schema = {"type": "object", "required": ["body"], "additionalProperties": False,
              "properties": {"body": {"type": "object", "required": ["sku"], "properties": {"sku": {}}}}}
    assert timed(schema, {})[0][0]["field"] == "body"
    assert timed(schema, {"body": {}})[0][0]["field"] == "body.sku"
    assert timed(schema, {"body": {"sku": 1}, "colour": "red"})[0][0]["field"] == "colour"
    assert timed({"type": "object", "properties": {"n": {"type": "integer"}}}, {"n": "x"})[0][0]["field"] == "n"


@pytest.fixture
def counting_listener() -> Iterator[tuple[str, list[int]]]:
    """A loopback port that counts the connections made to it."""
    connections: list[int] = []
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.1)
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                accepted, _ = server.accept()
            except TimeoutError:
                continue
            connections.append(1)
            accepted.close()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.getsockname()[1]}", connections
    stop.set()
    thread.join()
    server.close()


def test_a_reference_to_another_document_is_never_fetched(counting_listener: tuple[str, list[int]]) -> None:
    base, connections = counting_listener
    schema = {"type": "object", "properties": {"n": {"$ref": f"{base}/schema.json"}}}
    # Checked for its shape only, as a reference to nothing is.
    assert timed(schema, {"n": "anything"})[0] == []
    assert timed(schema, [])[0]  # type: ignore[arg-type]
    time.sleep(0.3)
    assert connections == []


def test_references_inside_the_schema_are_followed() -> None:
    schema = {"type": "object", "properties": {"item": {"$ref": "#/$defs/item"}, "named": {"$ref": "#named"},
                                               "spaced": {"$ref": "#/$defs/with%20space"}},
              "$defs": {"item": {"type": "integer"}, "other": {"$anchor": "named", "type": "string"},
                        "with space": {"type": "boolean"}}}
    assert timed(schema, {"item": 1, "named": "x", "spaced": True})[0] == []
    assert [timed(schema, args)[0][0]["field"] for args in ({"item": "x"}, {"named": 1}, {"spaced": 1})] == [
        "item", "named", "spaced"]


def test_arguments_as_deep_as_a_body_may_nest_are_checked_against_a_recursive_schema() -> None:
    """The doors' JSON parser refuses nesting past 1,024 levels; the check must answer at that depth."""
    tree = {"$defs": {"node": {"type": "object", "properties": {"child": {"$ref": "#/$defs/node"}}}},
            "$ref": "#/$defs/node"}
    arguments: dict[str, Any] = {}
    node = arguments
    for _ in range(1_023):
        node["child"] = {}
        node = node["child"]
    assert timed(tree, arguments)[0] == []
    node["child"] = 1
    assert timed(tree, arguments)[0][0]["field"].count("child") == 1_024


def test_a_value_json_cannot_carry_is_a_problem_not_an_exception() -> None:
    problems, _ = timed({"type": "object", "properties": {"s": {"type": "string", "pattern": "^a"}}}, {"s": "\ud800"})
    assert problems and problems[0]["field"] == "arguments"


def test_an_imported_description_keeps_the_patterns_the_check_reads_and_drops_the_others() -> None:
    """`\\p{Lu}` (ECMA-262 with the u flag, Rust) is not Python's syntax, and was dropped; an unbalanced pattern
    is nobody's, and is dropped without costing the operation the rest of its schema."""
    def parameter(name: str, pattern: str) -> dict[str, Any]:
        return {"name": name, "in": "query", "required": True, "schema": {"type": "string", "pattern": pattern}}

    document = {"openapi": "3.1.0", "info": {"title": "Parts", "version": "1"}, "paths": {"/parts": {"get": {
        "operationId": "listParts", "responses": {"200": {"description": "ok"}},
        "parameters": [parameter("code", r"^\p{Lu}{3}$"), parameter("bin", "((")]}}}}
    schema = compile_document(document).operations[0]["schema"]
    assert schema["properties"]["code"]["pattern"] == r"^\p{Lu}{3}$"
    assert "pattern" not in schema["properties"]["bin"]
    check = argument_checker(schema)
    assert check({"code": "ÅBC", "bin": "(("}) == []
    assert [p["field"] for p in check({"code": "abc", "bin": "x"})] == ["code"]
    assert [p["field"] for p in check({"code": "ABC"})] == ["bin"]
