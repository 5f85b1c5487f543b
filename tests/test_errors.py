"""Bad requests are refused with the right status, a stable code and a message naming the problem —
never a 5xx, never an HTML page."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from prism.storage import Database
from tests.factories import Factory, Workspace

CANONICAL = "/api/mcp/tools/prism_entity_crud/"
CALL = "/api/v1/dev/call/"
PATH_LIST = "/prism/entity_crud/spare_parts/spare_part/list"
PATH_CREATE = "/prism/entity_crud/spare_parts/spare_part/create"
MIB = 1024 * 1024
NUL_REFUSAL = "must not contain NUL (U+0000)"


@pytest.fixture(scope="module")
async def ws(db: Database) -> Workspace:
    return await Factory(db).workspace(roles=("owner",))


@pytest.fixture
async def tolerant(app: Any) -> AsyncIterator[httpx.AsyncClient]:
    """Unhandled server errors come back as responses (500), as a real client would see them."""
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as c:
        yield c


def envelope(operation: str, arguments: Any, **extra: Any) -> dict[str, Any]:
    return {"app": "spare_parts", "entity": "spare_part", "operation": operation, "arguments": arguments, **extra}


def assert_error(r: httpx.Response, status: int, code: str | None = None) -> dict[str, Any]:
    assert r.status_code == status, (r.status_code, r.text)
    assert r.headers["content-type"].startswith("application/json"), r.headers
    body: dict[str, Any] = r.json()
    assert isinstance(body.get("error"), str) and isinstance(body.get("message"), str), body
    if code is not None:
        assert body["error"] == code, body
    return body


def named_fields(body: dict[str, Any]) -> set[str]:
    details = body.get("details") or {}
    return {e["field"] for e in details["errors"]}


# --- malformed bodies ------------------------------------------------------------------------------------

BODY_DOORS = [CANONICAL, CALL, PATH_LIST, "/api/v1/dev/introspect/"]


@pytest.mark.parametrize("url", BODY_DOORS)
@pytest.mark.parametrize("raw", [b"{", b"{'app': 1}", b"not json", b'{"a": 1,}', b"\xff\xfe\x00",
                                 b'{"a": "\\ud800"}', b"[" * 5000 + b"]" * 5000, b"NaN"],
                         ids=["truncated", "single quotes", "text", "trailing comma", "bad utf-8",
                              "lone surrogate", "too deep", "nan"])
async def test_malformed_json_is_400_invalid_json(client: httpx.AsyncClient, ws: Workspace, url: str,
                                                  raw: bytes) -> None:
    r = await client.post(url, headers={**ws.headers(), "Content-Type": "application/json"}, content=raw)
    body = assert_error(r, 400, "invalid_json")
    if url == CANONICAL or url.startswith("/prism/"):
        assert body["success"] is False and body["tool_name"] == "prism_entity_crud"


@pytest.mark.parametrize("url", [CANONICAL, CALL, "/api/v1/dev/introspect/"])
@pytest.mark.parametrize("payload", [[1, 2], "text", 42, True, None], ids=["array", "string", "number", "bool",
                                                                          "null"])
async def test_body_that_is_not_an_object_is_400(client: httpx.AsyncClient, ws: Workspace, url: str,
                                                 payload: Any) -> None:
    r = await client.post(url, headers=ws.headers(), json=payload)
    if payload is None and url.endswith("introspect/"):
        assert r.status_code != 500  # null is "no parameters" for introspection
        return
    assert_error(r, 400)


@pytest.mark.parametrize("payload", [[1, 2], "text", 42], ids=["array", "string", "number"])
async def test_per_handler_path_refuses_a_body_that_is_not_an_object(
        client: httpx.AsyncClient, ws: Workspace, payload: Any) -> None:
    body = assert_error(await client.post(PATH_LIST, headers=ws.headers(), json=payload), 400, "invalid_arguments")
    assert body["success"] is False and "arguments" in body["message"]


@pytest.mark.parametrize("content", [b"", b"   ", b"\n"], ids=["empty", "blanks", "newline"])
async def test_missing_body_on_call_is_400(client: httpx.AsyncClient, ws: Workspace, content: bytes) -> None:
    body = assert_error(await client.post(CALL, headers=ws.headers(), content=content), 400)
    assert body["tool_name"] is None
    assert_error(await client.post(CANONICAL, headers=ws.headers(), content=content), 400)


@pytest.mark.parametrize("payload", [{}, {"arguments": {}}, {"name": ""}, {"name": None}, {"name": 7},
                                     {"name": ["prism_whoami"]}, {"tool": "prism_whoami"}])
async def test_call_without_a_tool_name_is_400_naming_name(client: httpx.AsyncClient, ws: Workspace,
                                                          payload: dict[str, Any]) -> None:
    body = assert_error(await client.post(CALL, headers=ws.headers(), json=payload), 400)
    assert body["message"].startswith("name")
    assert "name" in named_fields(body)


# --- arguments -----------------------------------------------------------------------------------------


async def _each_door(client: httpx.AsyncClient, ws: Workspace, operation: str,
                     arguments: Any) -> list[httpx.Response]:
    return [
        await client.post(CANONICAL, headers=ws.headers(), json=envelope(operation, arguments)),
        await client.post(CANONICAL, headers=ws.headers(), json={"kwargs": envelope(operation, arguments)}),
        await client.post(CALL, headers=ws.headers(), json={"name": "prism_entity_crud",
                                                            "arguments": envelope(operation, arguments)}),
        await client.post(f"/prism/entity_crud/spare_parts/spare_part/{operation}", headers=ws.headers(),
                          json=arguments),
    ]


@pytest.mark.parametrize(("arguments", "field"), [
    ({"sku": "Q-1", "name": "Nut", "quantity": "many"}, "quantity"),
    ({"sku": "Q-2", "name": "Nut", "quantity": 1.5}, "quantity"),
    ({"sku": "Q-3", "name": "Nut", "quantity": -1}, "quantity"),
    ({"sku": "Q-4", "name": "Nut", "quantity": [3]}, "quantity"),
    ({"sku": "Q-5", "name": "Nut", "status": "lost"}, "status"),
    ({"sku": 12, "name": "Nut"}, "sku"),
    ({"sku": "Q-6"}, "name"),
    ({"sku": "", "name": "Nut"}, "sku"),
    ({"sku": "Q-7", "name": "x" * 256}, "name"),
])
async def test_wrong_argument_is_400_naming_the_field_on_every_door(
        client: httpx.AsyncClient, ws: Workspace, arguments: dict[str, Any], field: str) -> None:
    for r in await _each_door(client, ws, "create", arguments):
        body = assert_error(r, 400, "invalid_arguments")
        assert body["message"].startswith(field), body
        assert field in named_fields(body), body
    listed = (await client.post(CANONICAL, headers=ws.headers(), json=envelope("list", {"search": "Q-"}))).json()
    assert listed["data"]["total"] == 0


async def test_unknown_argument_is_400_naming_it(client: httpx.AsyncClient, ws: Workspace) -> None:
    for r in await _each_door(client, ws, "list", {"page": 1, "colour": "red"}):
        body = assert_error(r, 400, "invalid_arguments")
        assert "colour" in body["message"] and named_fields(body) == {"colour"}


@pytest.mark.parametrize("extra", [{"colour": "red"}, {"kwargs": {}}, {"name": "prism_entity_crud"}])
async def test_unknown_envelope_field_is_400_naming_it(client: httpx.AsyncClient, ws: Workspace,
                                                       extra: dict[str, Any]) -> None:
    body = assert_error(await client.post(CANONICAL, headers=ws.headers(), json=envelope("list", {}, **extra)), 400)
    (field,) = extra
    assert field in body["message"] and field in named_fields(body)


@pytest.mark.parametrize("missing", ["operation", "app", "entity"])
async def test_missing_coordinate_part_in_envelope_is_400_naming_it(
        client: httpx.AsyncClient, ws: Workspace, missing: str) -> None:
    for value in (None, "", 5, ["list"]):
        payload = envelope("list", {})
        if value is None:
            del payload[missing]
        else:
            payload[missing] = value
        for r in (await client.post(CANONICAL, headers=ws.headers(), json=payload),
                  await client.post(CALL, headers=ws.headers(), json={"name": "prism_entity_crud",
                                                                      "arguments": payload})):
            body = assert_error(r, 400, "invalid_arguments")
            assert body["message"].startswith(missing) and missing in named_fields(body)


async def test_arguments_that_are_not_an_object_are_400(client: httpx.AsyncClient, ws: Workspace) -> None:
    for arguments in ([1], "id", 3):
        for r in (await client.post(CANONICAL, headers=ws.headers(), json=envelope("list", arguments)),
                  await client.post(CALL, headers=ws.headers(), json={"name": "prism_entity_crud",
                                                                      "arguments": arguments})):
            body = assert_error(r, 400, "invalid_arguments")
            assert "arguments" in named_fields(body)


async def test_null_arguments_are_not_an_object_and_no_body_is_no_arguments(client: httpx.AsyncClient,
                                                                             ws: Workspace) -> None:
    for r in (await client.post(CANONICAL, headers=ws.headers(), json=envelope("list", None)),
              await client.post(PATH_LIST, headers=ws.headers(), content=b"null")):
        assert_error(r, 400, "invalid_arguments")
        assert named_fields(r.json()) == {"arguments"}
    r = await client.post(PATH_LIST, headers=ws.headers())
    assert r.status_code == 200 and r.json()["data"]["page"] == 1, r.text


# --- unknown tools and coordinates --------------------------------------------------------------------


@pytest.mark.parametrize("tool", ["prism_nothing", "entity_crud", "prism_", "PRISM_ENTITY_CRUD", "x" * 300])
async def test_unknown_tool_is_404_tool_not_found(client: httpx.AsyncClient, ws: Workspace, tool: str) -> None:
    r = await client.post(f"/api/mcp/tools/{tool}/", headers=ws.headers(), json=envelope("list", {}))
    body = assert_error(r, 404, "tool_not_found")
    assert body == {"success": False, "error": "tool_not_found", "message": body["message"], "tool_name": tool}
    body = assert_error(await client.post(CALL, headers=ws.headers(), json={"name": tool,
                                                                            "arguments": envelope("list", {})}),
                        404, "tool_not_found")
    assert body["tool_name"] == tool and "success" not in body


async def test_unknown_mega_tool_on_the_per_handler_path_is_404(client: httpx.AsyncClient, ws: Workspace) -> None:
    r = await client.post("/prism/nothing/spare_parts/spare_part/list", headers=ws.headers(), json={})
    assert_error(r, 404, "tool_not_found")


@pytest.mark.parametrize("path", ["/prism/whoami/spare_parts/spare_part/list", "/prism/whoami/x/y/z",
                                  "/prism/introspect/core/registry/introspect"])
async def test_legacy_tool_names_are_not_mega_tools_on_the_per_handler_path(
        client: httpx.AsyncClient, ws: Workspace, path: str) -> None:
    assert_error(await client.post(path, headers=ws.headers(), json={}), 404, "tool_not_found")


@pytest.mark.parametrize(("app_name", "entity", "operation"), [
    ("spare_parts", "spare_part", "explode"), ("spare_parts", "widget", "list"), ("nowhere", "spare_part", "list"),
    ("finance", "spare_part", "list"), ("spare_parts", "spare_part", "LIST"), ("../..", "spare_part", "list"),
])
async def test_unknown_operation_app_or_entity_is_404(client: httpx.AsyncClient, ws: Workspace, app_name: str,
                                                      entity: str, operation: str) -> None:
    payload = {"app": app_name, "entity": entity, "operation": operation, "arguments": {}}
    responses = [
        await client.post(CANONICAL, headers=ws.headers(), json=payload),
        await client.post(CALL, headers=ws.headers(), json={"name": "prism_entity_crud", "arguments": payload}),
    ]
    if "/" not in app_name:
        responses.append(await client.post(f"/prism/entity_crud/{app_name}/{entity}/{operation}",
                                           headers=ws.headers()))
    for r in responses:
        body = assert_error(r, 404, "operation_not_found")
        assert "introspect" in body["message"]


# --- size, routes, methods ----------------------------------------------------------------------------


@pytest.mark.parametrize("url", [CANONICAL, CALL, PATH_CREATE, "/api/v1/dev/introspect/"])
async def test_body_over_one_mib_is_413(client: httpx.AsyncClient, ws: Workspace, url: str) -> None:
    filler = "x" * (MIB + 10)
    r = await client.post(url, headers=ws.headers(), json={"name": "prism_whoami", "filler": filler})
    assert_error(r, 413, "payload_too_large")

    async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: the size is only known by reading
        yield b'{"filler": "'
        for _ in range(17):
            yield b"y" * 65536
        yield b'"}'

    assert_error(await client.post(url, headers=ws.headers(), content=chunks()), 413, "payload_too_large")


async def test_body_just_under_one_mib_is_not_413(client: httpx.AsyncClient, ws: Workspace) -> None:
    r = await client.post(PATH_LIST, headers=ws.headers(), json={"search": "z" * (MIB - 100)})
    assert_error(r, 400, "invalid_arguments")  # too long a search term, but the body was read


@pytest.mark.parametrize("path", ["/nothing", "/api/v1/dev/", "/api/v1/dev/call/extra", "/api/mcp/tools/",
                                  "/prism/entity_crud/spare_parts/spare_part", "/api/v2/dev/ping/"])
async def test_unknown_route_is_404_json(client: httpx.AsyncClient, ws: Workspace, path: str) -> None:
    for method in ("GET", "POST"):
        assert_error(await client.request(method, path, headers=ws.headers()), 404, "not_found")


@pytest.mark.parametrize(("method", "path", "allowed"), [
    ("GET", CALL, {"POST"}), ("PUT", CALL, {"POST"}), ("DELETE", CANONICAL, {"POST"}),
    ("GET", PATH_LIST, {"POST"}), ("POST", "/api/v1/dev/ping/", {"GET"}), ("PATCH", "/api/v1/dev/me", {"GET"}),
    ("DELETE", "/api/v1/dev/introspect/", {"GET", "POST"}),
])
async def test_wrong_method_is_405_json_with_allow_header(client: httpx.AsyncClient, ws: Workspace, method: str,
                                                         path: str, allowed: set[str]) -> None:
    r = await client.request(method, path, headers=ws.headers())
    assert_error(r, 405, "method_not_allowed")
    assert allowed <= {m.strip() for m in r.headers.get("allow", "").split(",")}, r.headers


# --- hostile input ---------------------------------------------------------------------------------------

HOSTILE_ARGUMENTS: list[Any] = [
    {"sku": "\u00e9\u6f22\u5b57\U0001f600", "name": "\u202eevil\u200b", "description": "\u0000 nul inside"},
    {"sku": "\x00", "name": "\x00"},
    {"search": "\x00"},
    {"search": "'; DROP TABLE spare_parts; --"},
    {"search": "%%%___\\\\"},
    {"ordering": "name\x00"},
    {"id": "\x00"},
    {"id": "' OR '1'='1"},
    {"id": "x" * 10_000},
    {"sku": "L" * 100_000, "name": "n"},
    {"search": {"$ne": None}},
    {"page": {"nested": [[[[[]]]]]}},
    {"page": 10**40},
    {"page": -(10**40)},
    {"page_size": 1e308},
    {"page": True},
    {"below_reorder_level": "maybe"},
    {"status": None, "location": None, "search": None},
    {"": ""},
    {"\u0000": 1},
    {"__class__": {"__init__": 1}},
    [None, {}, []],
]
HOSTILE_OPERATIONS = ("list", "read", "create", "update", "delete")


@pytest.mark.parametrize("arguments", HOSTILE_ARGUMENTS, ids=[f"case{i}" for i in range(len(HOSTILE_ARGUMENTS))])
async def test_hostile_arguments_never_yield_a_server_error(tolerant: httpx.AsyncClient, ws: Workspace,
                                                            arguments: Any) -> None:
    for operation in HOSTILE_OPERATIONS:
        for r in (await tolerant.post(CANONICAL, headers=ws.headers(), json=envelope(operation, arguments)),
                  await tolerant.post(f"/prism/entity_crud/spare_parts/spare_part/{operation}",
                                      headers=ws.headers(), json=arguments)):
            assert r.status_code < 500, (operation, r.status_code, r.text[:300])
            assert r.headers["content-type"].startswith("application/json")
            assert r.json()["success"] is (r.status_code == 200)


@pytest.mark.parametrize("payload", [
    {"name": "prism_entity_crud", "arguments": {"app": None, "entity": None, "operation": None}},
    {"name": "prism_entity_crud", "arguments": {"app": {"x": 1}, "entity": [1], "operation": 1.5}},
    {"name": "prism_entity_crud", "arguments": {"app": "\x00", "entity": "\x00", "operation": "\x00"}},
    {"name": "prism_entity_crud", "arguments": {"app": "\u6f22" * 1000, "entity": "e", "operation": "list"}},
    {"name": "\x00"},
    {"name": "prism_whoami", "arguments": None},
    {"name": "prism_whoami", "arguments": "me"},
    {"name": "prism_introspect", "arguments": {"dimension": {"a": 1}}},
    {"name": "prism_introspect", "arguments": {"dimension": "schema", "operation": "\x00" * 64}},
    {"name": "prism_introspect", "arguments": {"dimension": "capability_search", "query": "\U0001f600" * 400}},
    {"name": "prism_introspect", "arguments": {"limit": 10**30}},
    {"name": "prism_entity_crud", "arguments": {"kwargs": {"kwargs": {"kwargs": {}}}}},
    {"name": "prism_entity_crud", "arguments": {"mission_id": {"nested": True}, "app": "spare_parts",
                                                "entity": "spare_part", "operation": "list"}},
])
async def test_hostile_call_bodies_never_yield_a_server_error(tolerant: httpx.AsyncClient, ws: Workspace,
                                                              payload: dict[str, Any]) -> None:
    r = await tolerant.post(CALL, headers=ws.headers(), json=payload)
    assert r.status_code < 500, r.text[:300]
    assert r.headers["content-type"].startswith("application/json")


@pytest.mark.parametrize("query", [{"dimension": "\x00"}, {"limit": "lots"}, {"rerank": "perhaps"},
                                   {"dimension": "schema"}, {"query": "\U0001f600" * 600}, {"unknown": "x"}])
async def test_hostile_introspect_queries_never_yield_a_server_error(tolerant: httpx.AsyncClient, ws: Workspace,
                                                                     query: dict[str, str]) -> None:
    r = await tolerant.get("/api/v1/dev/introspect/", headers=ws.headers(), params=query)
    assert r.status_code < 500, r.text[:300]
    assert r.headers["content-type"].startswith("application/json")


@pytest.mark.parametrize("params", [{"search": "\x00"}, {"category": "'; --"}, {"search": "\u6f22" * 5000}])
async def test_hostile_catalog_queries_never_yield_a_server_error(tolerant: httpx.AsyncClient, ws: Workspace,
                                                                  params: dict[str, str]) -> None:
    r = await tolerant.get("/api/v1/dev/tools/", headers=ws.headers(), params=params)
    if "\x00" in params.get("search", ""):  # refused at the edge, naming the parameter (PostgreSQL cannot store it)
        assert r.status_code == 400 and r.json()["details"]["errors"] == [{"field": "search", "message": NUL_REFUSAL}]
        return
    assert r.status_code == 200 and r.json()["count"] == len(r.json()["tools"])


@pytest.mark.parametrize("path", ["/api/mcp/tools/prism_%00/", "/api/mcp/tools/prism_entity%00crud/",
                                  "/prism/entity_crud/spare%00parts/spare_part/list",
                                  "/prism/entity_crud/spare_parts/spare_part/li%00st", "/prism/entity%00crud/a/b/c"])
async def test_nul_in_the_path_is_a_400_in_the_envelope_not_a_server_error(tolerant: httpx.AsyncClient,
                                                                          ws: Workspace, path: str) -> None:
    r = await tolerant.post(path, headers=ws.headers(), json=envelope("list", {}) if "/tools/" in path else {})
    body = assert_error(r, 400, "nul_character")
    assert body["details"]["errors"] == [{"field": "path", "message": NUL_REFUSAL}]
    assert body["success"] is False and "tool_name" in body


async def test_nul_in_a_call_name_or_coordinate_is_refused_by_name(
        tolerant: httpx.AsyncClient, ws: Workspace) -> None:
    # Refused as the body is read, naming the field, before anything is dispatched or recorded.
    r = await tolerant.post(CALL, headers=ws.headers(), json={"name": "prism_\x00", "arguments": {}})
    assert assert_error(r, 400, "nul_character")["details"]["errors"] == [{"field": "name", "message": NUL_REFUSAL}]
    r = await tolerant.post(CANONICAL, headers=ws.headers(), json={"app": "spare\x00parts", "entity": "spare_part",
                                                                  "operation": "list", "arguments": {}})
    assert assert_error(r, 400, "nul_character")["details"]["errors"] == [{"field": "app", "message": NUL_REFUSAL}]
    r = await tolerant.post(PATH_CREATE, headers=ws.headers(), json={"sku": "NUL-1", "name": "a\x00b"})
    body = assert_error(r, 400, "nul_character")
    assert "NUL" in body["message"] and body["details"]["errors"] == [{"field": "name", "message": NUL_REFUSAL}]


@pytest.mark.parametrize("depth", [300, 1020])
async def test_deeply_nested_arguments_are_refused_without_failing_other_calls(
        tolerant: httpx.AsyncClient, ws: Workspace, depth: int) -> None:
    nested = b"[" * depth + b"]" * depth
    hostile = [
        (CANONICAL, b'{"app":"spare_parts","entity":"spare_part","operation":"create","arguments":{"sku":'
         + nested + b"}}"),
        (PATH_CREATE, b'{"name":' + nested + b"}"),
        (CALL, b'{"name":"prism_whoami","arguments":{"a":' + nested + b"}}"),
    ]
    for n, (url, raw) in enumerate(hostile):
        legit = tolerant.post(CANONICAL, headers=ws.headers(), json=envelope(
            "create", {"sku": f"DEEP-{depth}-{n}", "name": "Neighbour"}))
        bad = tolerant.post(url, headers={**ws.headers(), "Content-Type": "application/json"}, content=raw)
        good, refused = await asyncio.gather(legit, bad)
        assert good.status_code == 200, good.text
        assert_error(refused, 400, "invalid_arguments")
