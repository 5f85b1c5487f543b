"""Every update handler takes "fields that were sent": a field sent as null clears it (or, where the field cannot
be empty, is refused naming it), an absent field keeps its value.

The test walks every `update` handler of the registry: it makes a record with the entity's own create handler
(arguments written from the create schema; a reference `<entity>_id` is made first the same way), then sends
each optional field of the update as null, alone."""

from __future__ import annotations

import itertools
from typing import Any

import httpx
import pytest

from prism.registry import Handler, Registry
from prism.storage import Database
from tests.factories import Factory, Workspace

EMPTY: tuple[Any, ...] = (None, "", [], {})
# Fields an update changes besides the ones sent: the time of the change and counters derived from it.
DERIVED = {"updated_at", "version", "amount_cents"}
# Records with no `create` operation, and how they are made instead.
MAKERS = {"entity_crud/documents/document": "document_op/documents/document/upload"}
_unique = itertools.count(1)


@pytest.fixture(scope="module")
async def ws(db: Database) -> Workspace:
    return await Factory(db).workspace(roles=("owner",))


def _value(name: str, schema: dict[str, Any]) -> Any:
    """A valid value for one required parameter, unique where uniqueness may be asked."""
    schema = next((s for s in schema.get("anyOf", []) if s.get("type") != "null"), schema)
    n = next(_unique)
    if "enum" in schema:
        return schema["enum"][0]
    kind, fmt = schema.get("type"), schema.get("format")
    if kind == "integer":
        return max(int(schema.get("minimum", 0)), int(schema.get("exclusiveMinimum", 0)) + 1, 1)
    if kind == "number":
        return 1.5
    if kind == "boolean":
        return True
    if kind == "array":
        return []
    if kind == "object":
        return {}
    if fmt == "date":
        return "2030-01-15"
    if fmt == "date-time":
        return "2030-01-15T10:00:00Z"
    if "email" in name:
        return f"u{n}@example.com"
    if "url" in name or "uri" in name:
        return f"https://127.0.0.1:9/r{n}"
    return f"R{n}"


async def _make(client: httpx.AsyncClient, ws: Workspace, registry: Registry, entity_path: str) -> dict[str, Any]:
    """A new record of `<mega_tool>/<app>/<entity>`, made through its own handlers."""
    maker = registry.get_path(MAKERS.get(entity_path, f"{entity_path}/create"))
    assert maker is not None, entity_path
    app = maker.coordinate.app
    arguments: dict[str, Any] = {}
    for name in maker.schema.get("required", []):
        referenced = f"entity_crud/{app}/{name.removesuffix('_id')}"
        if name.endswith("_id") and registry.get_path(f"{referenced}/create") is not None:
            arguments[name] = (await _make(client, ws, registry, referenced))["id"]
        else:
            arguments[name] = _value(name, maker.schema["properties"][name])
    r = await client.post(f"/prism/{maker.path}", headers=ws.headers(), json=arguments)
    assert r.status_code == 200, (maker.path, arguments, r.text)
    record: dict[str, Any] = r.json()["data"]
    return record


async def _read(client: httpx.AsyncClient, ws: Workspace, handler: Handler, record_id: str) -> dict[str, Any]:
    c = handler.coordinate
    r = await client.post(f"/prism/{c.mega_tool}/{c.app}/{c.entity}/read", headers=ws.headers(), json={"id": record_id})
    assert r.status_code == 200, r.text
    data: dict[str, Any] = r.json()["data"]
    return data


def _kept(before: dict[str, Any], after: dict[str, Any], changed: str) -> dict[str, tuple[Any, Any]]:
    """The fields that moved besides `changed` (and what an update always moves)."""
    return {k: (before.get(k), after.get(k)) for k in set(before) | set(after)
            if k not in DERIVED | {changed} and before.get(k) != after.get(k)}


async def test_every_update_handler_clears_a_field_sent_as_null_and_keeps_the_absent_ones(
        hook_client: httpx.AsyncClient, ws: Workspace, app: Any) -> None:
    registry: Registry = app.state.registry
    updates = [h for h in registry if h.coordinate.operation == "update"]
    assert len(updates) > 15
    cleared: list[str] = []
    refused: list[str] = []
    for handler in updates:
        record = await _make(hook_client, ws, registry, handler.path.rsplit("/", 1)[0])
        optional = [n for n in handler.params.model_fields if n != "id" and n not in handler.schema.get("required", [])]
        for name in optional:
            before = await _read(hook_client, ws, handler, record["id"])
            r = await hook_client.post(f"/prism/{handler.path}", headers=ws.headers(),
                                       json={"id": record["id"], name: None})
            after = await _read(hook_client, ws, handler, record["id"])
            where = f"{handler.path} {name}"
            if r.status_code == 200:
                assert r.json()["data"].get(name) in EMPTY, (where, r.text)
                assert after.get(name) in EMPTY, (where, after)
                cleared.append(where)
            else:  # a field that cannot be empty: refused by name, nothing changed
                assert r.status_code == 400, (where, r.text)
                assert [p["field"] for p in r.json()["details"]["errors"]] == [name], (where, r.text)
                assert after == before, where
                refused.append(where)
            assert _kept(before, after, name) == {}, where
    assert len(cleared) > 20 and len(refused) > 10, (cleared, refused)


async def test_null_fields_that_cannot_be_cleared_are_all_named_at_once(
        hook_client: httpx.AsyncClient, ws: Workspace, app: Any) -> None:
    registry: Registry = app.state.registry
    part = await _make(hook_client, ws, registry, "entity_crud/spare_parts/spare_part")
    r = await hook_client.post("/prism/entity_crud/spare_parts/spare_part/update", headers=ws.headers(),
                               json={"id": part["id"], "name": None, "quantity": None, "location": None})
    assert r.status_code == 400, r.text
    assert [p["field"] for p in r.json()["details"]["errors"]] == ["name", "quantity"]
    r = await hook_client.post("/prism/entity_crud/spare_parts/spare_part/update", headers=ws.headers(),
                               json={"id": part["id"], "location": "Aisle 9"})
    assert r.status_code == 200 and r.json()["data"]["location"] == "Aisle 9"
    r = await hook_client.post("/prism/entity_crud/spare_parts/spare_part/update", headers=ws.headers(),
                               json={"id": part["id"], "location": None, "reorder_level": 3})
    assert r.status_code == 200, r.text
    assert r.json()["data"]["location"] == "" and r.json()["data"]["reorder_level"] == 3
    assert r.json()["data"]["name"] == part["name"]
