"""One shape for every 400, on every door and for every cause: `details.errors`, a list of `{field, message}`.

Walks the doors (canonical, per-handler path, sandbox call, introspect GET and POST, the catalog, webhook
management, key registration, the MCP door) with each kind of bad input, every 400 error class Prism declares,
and both OpenAPI descriptors, which describe the shape once (the ErrorDetails component).
"""

from __future__ import annotations

import importlib
import inspect
import json
import pkgutil
from typing import Any

import httpx
import pytest

import prism
from prism.errors import PrismError
from prism.storage import Database
from tests.factories import Factory, Workspace
from tests.test_mcp_protocol import call, headers_for, initialize, rpc

CANONICAL = "/api/mcp/tools/prism_entity_crud/"
PATH_LIST = "/prism/entity_crud/spare_parts/spare_part/list"
CALL = "/api/v1/dev/call/"
INTROSPECT = "/api/v1/dev/introspect/"
WEBHOOKS = "/api/v1/risk-assessment/governance/webhooks/"
LIST_PARTS = {"app": "spare_parts", "entity": "spare_part", "operation": "list"}


@pytest.fixture(scope="module")
async def ws(db: Database) -> Workspace:
    return await Factory(db).workspace(roles=("owner",))


def problems(details: Any) -> list[dict[str, str]]:
    """The problems of a 400's details, checked to be the one shape."""
    assert isinstance(details, dict), details
    errors = details.get("errors")
    assert isinstance(errors, list) and errors, details
    for problem in errors:
        assert isinstance(problem, dict) and set(problem) == {"field", "message"}, problem
        assert isinstance(problem["field"], str) and problem["field"], problem
        assert isinstance(problem["message"], str) and problem["message"], problem
    assert "field" not in details, details  # the older single-field form is gone
    return errors


def _json(body: Any) -> dict[str, Any]:
    return {"content": json.dumps(body).encode(), "headers": {"Content-Type": "application/json"}}


# (door, method, url, request keywords, the field the 400 must name)
HTTP_CASES: list[tuple[str, str, str, dict[str, Any], str]] = [
    ("canonical unknown argument", "POST", CANONICAL, _json({**LIST_PARTS, "arguments": {"colour": "red"}}),
     "colour"),
    ("canonical wrong type", "POST", CANONICAL, _json({**LIST_PARTS, "arguments": {"page": "x"}}), "page"),
    ("canonical arguments not an object", "POST", CANONICAL, _json({**LIST_PARTS, "arguments": [1]}),
     "arguments"),
    ("canonical missing operation", "POST", CANONICAL, _json({"app": "spare_parts", "entity": "spare_part"}),
     "operation"),
    ("canonical unknown envelope field", "POST", CANONICAL, _json({**LIST_PARTS, "colour": 1}), "colour"),
    ("canonical bad mission id", "POST", CANONICAL, _json({**LIST_PARTS, "mission_id": ""}), "mission_id"),
    ("canonical invalid json", "POST", CANONICAL, {"content": b"{", "headers": {"Content-Type": "application/json"}},
     "body"),
    ("canonical body an array", "POST", CANONICAL, _json([1]), "body"),
    ("path wrong type", "POST", PATH_LIST, _json({"page_size": 0}), "page_size"),
    ("path unknown argument", "POST", PATH_LIST, _json({"colour": "red"}), "colour"),
    ("path body an array", "POST", PATH_LIST, _json([]), "arguments"),
    ("sandbox call missing name", "POST", CALL, _json({"arguments": {}}), "name"),
    ("sandbox call bad arguments", "POST", CALL,
     _json({"name": "prism_entity_crud", "arguments": {**LIST_PARTS, "arguments": {"page": 0}}}), "page"),
    ("sandbox call invalid json", "POST", CALL, {"content": b"nope", "headers": {"Content-Type": "application/json"}},
     "body"),
    ("introspect get bad dimension", "GET", INTROSPECT, {"params": {"dimension": "bogus"}}, "dimension"),
    ("introspect post bad dimension", "POST", INTROSPECT, _json({"dimension": "bogus"}), "dimension"),
    ("introspect schema without operation", "GET", INTROSPECT, {"params": {"dimension": "schema"}}, "operation"),
    ("catalog bad page size", "GET", "/api/v1/dev/tools/", {"params": {"page_size": "0"}}, "page_size"),
    ("webhook create missing url", "POST", WEBHOOKS, _json({"name": "x"}), "url"),
    ("webhook create body an array", "POST", WEBHOOKS, _json([]), "body"),
    ("webhook list bad page", "GET", WEBHOOKS, {"params": {"page": "0"}}, "page"),
    ("key registration missing email", "POST", "/api/mcp/api-keys/register/", _json({"password": "x" * 12}),
     "email"),
]


@pytest.mark.parametrize(("door", "method", "url", "kwargs", "field"), HTTP_CASES, ids=[c[0] for c in HTTP_CASES])
async def test_every_400_on_every_http_door_lists_its_problems_as_field_and_message(
        client: httpx.AsyncClient, ws: Workspace, door: str, method: str, url: str, kwargs: dict[str, Any],
        field: str) -> None:
    kwargs = dict(kwargs)
    extra = kwargs.pop("headers", {})
    headers = {**(ws.headers() if "register" not in url else {"Host": ws.host}), **extra}
    r = await client.request(method, url, headers=headers, **kwargs)
    assert r.status_code == 400, r.text
    body = r.json()
    assert field in [p["field"] for p in problems(body["details"])], body


async def test_the_mcp_door_puts_the_same_problems_in_json_rpc_data_and_in_tool_results(
        client: httpx.AsyncClient, ws: Workspace) -> None:
    headers = headers_for(ws, "owner")
    session = await initialize(client, headers)
    protocol = await call(client, headers, session, rpc("tools/call", {"arguments": {}}))
    data = protocol.json()["error"]["data"]
    assert data["error"] == "invalid_arguments" and [p["field"] for p in problems(data)] == ["name"]
    not_object = await call(client, headers, session, rpc("tools/call", {"name": "prism_entity_crud",
                                                                          "arguments": [1]}))
    assert [p["field"] for p in problems(not_object.json()["error"]["data"])] == ["arguments"]
    tool = await call(client, headers, session, rpc("tools/call", {"name": "prism_entity_crud", "arguments": {
        **LIST_PARTS, "arguments": {"page": 0, "colour": "red"}}}))
    result = tool.json()["result"]
    assert result["isError"] is True
    envelope = json.loads(result["content"][0]["text"])
    assert envelope["error"] == "invalid_arguments"
    assert {p["field"] for p in problems(envelope["details"])} == {"page", "colour"}


def _error_classes() -> list[type[PrismError]]:
    for module in pkgutil.walk_packages(prism.__path__, "prism."):
        if not module.name.startswith("prism.migrations"):
            importlib.import_module(module.name)
    seen: list[type[PrismError]] = []
    todo: list[type[PrismError]] = [PrismError]
    while todo:
        cls = todo.pop()
        seen.append(cls)
        todo.extend(cls.__subclasses__())
    return seen


def _names_its_own_field(cls: type[PrismError]) -> bool:
    parameters = inspect.signature(cls.__init__).parameters
    return cls.__init__ is not PrismError.__init__ and "field" not in parameters and "details" not in parameters


@pytest.mark.engine_independent
def test_every_400_error_class_builds_the_one_shape_whatever_its_raiser_passes() -> None:
    classes = [cls for cls in _error_classes() if cls.status == 400] + [PrismError]
    assert len(classes) > 4, classes
    for cls in classes:
        raisers: list[dict[str, Any]] = [{}, {"field": "x"}, {"details": {"field": "x", "candidates": ["a"]}},
                                         {"details": {"errors": [{"field": "x", "message": "bad"}]}}]
        for kwargs in raisers:
            extra = {"status": 400} if cls is PrismError else {}
            try:
                error = cls("x: bad input", **kwargs, **extra)
            except TypeError:
                continue  # a class with its own constructor (OAuth's RFC 6749 errors render no details)
            found = problems(error.details)
            if not kwargs and _names_its_own_field(cls):
                # A class that takes only a message and names the input it refuses itself (an OpenAPI description
                # Prism cannot import is the `spec` argument): still the one shape, with its own field.
                assert found and all(set(p) == {"field", "message"} for p in found), (cls, found)
                continue
            assert found[0]["field"] in ("x", "arguments", "body"), (cls, kwargs, found)
            if kwargs:  # the field named, its name not repeated in the message
                expected = "bad" if "errors" in kwargs.get("details", {}) else "bad input"
                assert found == [{"field": "x", "message": expected}], (cls, kwargs, found)


@pytest.mark.parametrize("which", ["tenant", "developer"])
async def test_both_descriptors_describe_the_details_once_and_every_error_refers_to_it(
        client: httpx.AsyncClient, ws: Workspace, which: str) -> None:
    host = ws.host if which == "tenant" else "portal.localhost"
    headers = ws.headers() if which == "tenant" else {"Host": host}
    r = await client.get("/.well-known/openapi.json", headers=headers)
    assert r.status_code == 200, r.text
    schemas = r.json()["components"]["schemas"]
    details = schemas["ErrorDetails"]
    problem = details["properties"]["errors"]["items"]
    assert problem["required"] == ["field", "message"] and set(problem["properties"]) == {"field", "message"}
    error_schemas = [s for s in schemas.values() if "error" in s.get("properties", {})
                     and "details" in s.get("properties", {})]
    assert error_schemas
    assert all(s["properties"]["details"] == {"$ref": "#/components/schemas/ErrorDetails"} for s in error_schemas)
