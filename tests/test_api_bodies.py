"""Bodies: every door that takes a JSON object refuses JSON `null` exactly as it refuses `[]`, and takes an
empty body where the body is optional; what the developer descriptor says a body may hold is what the server
accepts (introspection's parameters come from the validator's own model)."""

from __future__ import annotations

from typing import Any

import httpx
import jsonschema
import pytest

from prism.registry import Registry
from prism.storage import Database
from tests.factories import Factory, Workspace

WEBHOOKS = "/api/v1/risk-assessment/governance/webhooks/"
# (door, url): every door whose body is a JSON object.
OBJECT_DOORS = [
    ("canonical mega-tool", "/api/mcp/tools/prism_entity_crud/"),
    ("canonical whoami", "/api/mcp/tools/prism_whoami/"),
    ("canonical introspect", "/api/mcp/tools/prism_introspect/"),
    ("coordinate path", "/prism/entity_crud/spare_parts/spare_part/list"),
    ("coordinate path of whoami", "/prism/report_query/core/caller/whoami"),
    ("sandbox call", "/api/v1/dev/call/"),
    ("sandbox introspect", "/api/v1/dev/introspect/"),
    ("webhook create", WEBHOOKS),
    ("key registration", "/api/mcp/api-keys/register/"),
]


@pytest.fixture(scope="module")
async def ws(db: Database) -> Workspace:
    return await Factory(db).workspace(roles=("owner",))


@pytest.mark.parametrize(("door", "url"), OBJECT_DOORS, ids=[d for d, _ in OBJECT_DOORS])
async def test_a_null_body_is_refused_like_an_array_on_every_object_door(
        client: httpx.AsyncClient, ws: Workspace, door: str, url: str) -> None:
    headers = {**ws.headers(), "Content-Type": "application/json"}
    answers = [await client.post(url, headers=headers, content=raw) for raw in (b"null", b"[]", b" null ")]
    assert {r.status_code for r in answers} == {400}, [r.text for r in answers]
    codes = {r.json()["error"] for r in answers}
    assert len(codes) == 1 and codes <= {"invalid_body", "invalid_arguments"}, [r.text for r in answers]


@pytest.mark.parametrize("url", ["/api/v1/dev/call/", "/api/mcp/tools/prism_entity_crud/"])
async def test_null_arguments_are_refused_like_an_array(client: httpx.AsyncClient, ws: Workspace, url: str) -> None:
    envelope = {"app": "spare_parts", "entity": "spare_part", "operation": "list"}
    for arguments in (None, [1]):
        body = {**envelope, "arguments": arguments}
        r = await client.post(url, headers=ws.headers(),
                              json={"name": "prism_entity_crud", "arguments": body} if "call" in url else body)
        assert r.status_code == 400 and r.json()["error"] == "invalid_arguments", r.text
        assert [p["field"] for p in r.json()["details"]["errors"]] == ["arguments"]


async def test_an_empty_body_is_no_arguments_where_the_body_is_optional(
        client: httpx.AsyncClient, ws: Workspace) -> None:
    for url in ("/api/v1/dev/introspect/", "/prism/report_query/core/caller/whoami"):
        r = await client.post(url, headers=ws.headers())
        assert r.status_code == 200, (url, r.text)


PROBES: list[dict[str, Any]] = [
    {}, {"topic": None, "dimension": "guide"}, {"dimension": None}, {"app": None}, {"rerank": None},
    {"page_size": None, "dimension": "handlers"}, {"page_size": 5, "dimension": "handlers"}, {"limit": 0},
    {"dimension": "guide", "topic": 7}, {"colour": "red"}, {"query": None, "dimension": "stats"},
]


async def test_introspection_accepts_a_body_exactly_when_the_developer_descriptor_does(
        client: httpx.AsyncClient, ws: Workspace) -> None:
    doc = (await client.get("/.well-known/openapi.json", headers={"Host": "portal.localhost"})).json()
    schema = doc["components"]["schemas"]["IntrospectRequest"]
    for body in PROBES:
        described = jsonschema.Draft202012Validator(schema).is_valid(body)
        r = await client.post("/api/v1/dev/introspect/", headers=ws.headers(), json=body)
        assert r.status_code != 500, r.text
        accepted = r.status_code != 400 or r.json()["error"] != "invalid_arguments"
        assert accepted is described, (body, described, r.status_code, r.text)


async def test_a_number_is_refused_for_every_date_or_time_parameter_of_every_handler(
        client: httpx.AsyncClient, ws: Workspace, app: Any) -> None:
    """The descriptors say a date or time is an ISO 8601 string; Pydantic alone would read a number as a Unix
    time, so Prism refuses it by name."""
    registry: Registry = app.state.registry
    checked = 0
    for handler in registry:
        temporal = [name for name, schema in handler.schema.get("properties", {}).items()
                    if {"date", "date-time", "time"} & {s.get("format") for s in [schema, *schema.get("anyOf", [])]}]
        for name in temporal:
            r = await client.post(f"/prism/{handler.path}", headers=ws.headers(), json={name: 1_700_000_000})
            assert r.status_code == 400, (handler.path, name, r.text)
            assert name in [p["field"] for p in r.json()["details"]["errors"]], (handler.path, name, r.text)
            checked += 1
    assert checked > 5, checked


def _number_types(schema: dict[str, Any]) -> set[str]:
    return {s.get("type") for s in [schema, *schema.get("anyOf", [])]} - {None}


async def test_true_or_false_is_refused_for_every_number_parameter_of_every_handler(
        client: httpx.AsyncClient, ws: Workspace, app: Any) -> None:
    """The descriptors say these are numbers; Pydantic alone would read `true` as 1 (a budget of `true`, a
    page size of `true`), so Prism refuses it by name."""
    registry: Registry = app.state.registry
    checked = 0
    for handler in registry:
        if handler.people_only:  # the key is refused before its arguments are read (person_required)
            continue
        numeric = [name for name, schema in handler.schema.get("properties", {}).items()
                   if _number_types(schema) & {"integer", "number"} and "boolean" not in _number_types(schema)]
        for name in numeric:
            r = await client.post(f"/prism/{handler.path}", headers=ws.headers(), json={name: True})
            assert r.status_code == 400, (handler.path, name, r.text)
            assert name in [p["field"] for p in r.json()["details"]["errors"]], (handler.path, name, r.text)
            checked += 1
    assert checked > 50, checked


async def test_a_moment_without_a_zone_or_beyond_utc_is_refused_for_every_date_time_parameter(
        client: httpx.AsyncClient, ws: Workspace, app: Any) -> None:
    """Moments are stored and compared in UTC: one without a zone has no UTC time, and one near year 1 or 9999
    with an offset has none Python can hold; both are refused by name (they were a 500 where they reached SQL)."""
    registry: Registry = app.state.registry
    checked = 0
    for handler in registry:
        moments = [name for name, schema in handler.schema.get("properties", {}).items()
                   if "date-time" in {s.get("format") for s in [schema, *schema.get("anyOf", [])]}]
        for name in moments:
            for value in ("2024-01-01T00:00:00", "9999-12-31T23:59:59-14:00", "0001-01-01T00:00:00+14:00"):
                r = await client.post(f"/prism/{handler.path}", headers=ws.headers(), json={name: value})
                assert r.status_code == 400, (handler.path, name, value, r.text)
                assert name in [p["field"] for p in r.json()["details"]["errors"]], (handler.path, name, value)
                checked += 1
    assert checked > 20, checked
