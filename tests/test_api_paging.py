"""Every list takes `page` and `page_size` the same way and answers the same envelope
`{items, page, page_size, total}` (prism.kit.paging): every `list` handler, introspection's handlers dimension,
the tool catalog, the webhook event registry, and the webhook and delivery lists of webhook management."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from sqlalchemy import select
from sqlalchemy.dialects import postgresql, sqlite

from prism.kit.paging import PAGE_SIZE_DEFAULT, PAGE_SIZE_MAX, Paging
from prism.models import ApiKey, AuditEntry
from prism.registry import Registry
from prism.storage import Database
from prism.tenancy.repository import OrgRepository
from tests.factories import Factory, Workspace

WEBHOOKS = "/api/v1/risk-assessment/governance/webhooks/"
ENVELOPE = {"items", "page", "page_size", "total"}


@pytest.fixture(scope="module")
async def ws(db: Database) -> Workspace:
    return await Factory(db).workspace(roles=("owner",))


def list_handlers(app: Any) -> list[str]:
    registry: Registry = app.state.registry
    return sorted(h.path for h in registry if h.coordinate.operation == "list")


def assert_page(body: Any, page: int, page_size: int) -> dict[str, Any]:
    assert isinstance(body, dict) and ENVELOPE <= set(body), body
    assert body["page"] == page and body["page_size"] == page_size, body
    assert isinstance(body["items"], list) and len(body["items"]) <= page_size, body
    assert isinstance(body["total"], int) and body["total"] >= 0, body
    return body


def assert_refused_naming(r: httpx.Response, field: str) -> None:
    assert r.status_code == 400, r.text
    assert field in [p["field"] for p in r.json()["details"]["errors"]], r.text


@pytest.mark.engine_independent
def test_every_list_handler_declares_the_shared_paging(app: Any) -> None:
    registry: Registry = app.state.registry
    lists = [h for h in registry if h.coordinate.operation == "list"]
    assert len(lists) > 10
    assert [h.path for h in lists if not issubclass(h.params, Paging)] == []
    # Any handler that pages at all pages with the same two parameters.
    paged = [h for h in registry if "page" in h.params.model_fields or "page_size" in h.params.model_fields]
    assert [h.path for h in paged if not issubclass(h.params, Paging)] == []


async def test_every_list_handler_pages_and_answers_the_envelope(
        client: httpx.AsyncClient, hook_client: httpx.AsyncClient, ws: Workspace, app: Any) -> None:
    parents = await _parents(hook_client, ws)
    for path in list_handlers(app):
        url = f"/prism/{path}"
        required = {name: parents[name] for name in app.state.registry.get_path(path).schema.get("required", [])}
        r = await client.post(url, headers=ws.headers(), json=required)
        assert r.status_code == 200, (path, r.text)
        assert_page(r.json()["data"], 1, PAGE_SIZE_DEFAULT)
        r = await client.post(url, headers=ws.headers(), json={**required, "page": 3, "page_size": 1})
        assert r.status_code == 200, (path, r.text)
        assert_page(r.json()["data"], 3, 1)
        assert_refused_naming(await client.post(url, headers=ws.headers(),
                                                json={**required, "page_size": PAGE_SIZE_MAX + 1}), "page_size")
        assert_refused_naming(await client.post(url, headers=ws.headers(), json={**required, "page": 0}), "page")


async def _parents(client: httpx.AsyncClient, ws: Workspace) -> dict[str, Any]:
    """The parent a list of one record's children needs (a webhook's deliveries): made by the API (of an app that
    may send to loopback: nothing resolves here but loopback)."""
    created = await client.post(WEBHOOKS, headers=ws.headers(), json={"name": "paging",
                                                                       "url": "https://127.0.0.1:9/hook"})
    assert created.status_code == 201, created.text
    return {"webhook_id": created.json()["id"]}


async def test_the_event_registry_pages_like_any_list(client: httpx.AsyncClient, ws: Workspace) -> None:
    url = "/prism/entity_crud/core/webhook_event/list"
    everything = (await client.post(url, headers=ws.headers(), json={"page_size": 100})).json()["data"]
    total = everything["total"]
    assert total == len(everything["items"]) > 2
    pages = [(await client.post(url, headers=ws.headers(), json={"page": n, "page_size": 2})).json()["data"]
             for n in range(1, (total + 1) // 2 + 1)]
    assert [i for p in pages for i in p["items"]] == everything["items"]
    assert {p["total"] for p in pages} == {total}


@pytest.mark.parametrize("method", ["GET", "POST"])
async def test_introspection_handlers_dimension_takes_page_and_page_size(
        client: httpx.AsyncClient, ws: Workspace, method: str) -> None:
    def ask(**params: Any) -> Any:
        if method == "GET":
            return client.get("/api/v1/dev/introspect/", headers=ws.headers(), params=params)
        return client.post("/api/v1/dev/introspect/", headers=ws.headers(), json=params)

    first = assert_page((await ask(dimension="handlers", page_size=3)).json(), 1, 3)
    second = assert_page((await ask(dimension="handlers", page=2, page_size=3)).json(), 2, 3)
    assert len(first["items"]) == 3 and first["items"] != second["items"] and first["total"] == second["total"]
    assert_page((await ask(dimension="handlers")).json(), 1, PAGE_SIZE_DEFAULT)
    # `limit`, the former name of page_size here, still pages.
    assert_page((await ask(dimension="handlers", limit=2)).json(), 1, 2)
    assert_refused_naming(await ask(dimension="handlers", page_size=0), "page_size")


async def test_the_catalog_pages_and_keeps_its_spec_names(client: httpx.AsyncClient, ws: Workspace) -> None:
    url = "/api/v1/dev/tools/"
    whole = (await client.get(url, headers=ws.headers(), params={"page_size": 100})).json()
    assert_page(whole, 1, 100)
    assert whole["tools"] == whole["items"] and whole["count"] == whole["total"] == len(whole["items"])
    first = assert_page((await client.get(url, headers=ws.headers(), params={"page_size": 2})).json(), 1, 2)
    second = assert_page((await client.get(url, headers=ws.headers(), params={"page": 2, "page_size": 2})).json(),
                         2, 2)
    assert first["items"] + second["items"] == whole["items"][:4]
    assert first["tools"] == first["items"] and first["count"] == whole["total"]
    assert_refused_naming(await client.get(url, headers=ws.headers(), params={"page_size": "many"}), "page_size")


async def test_webhook_and_delivery_lists_answer_the_envelope_beside_their_spec_names(
        hook_client: httpx.AsyncClient, ws: Workspace) -> None:
    client = hook_client
    for n in range(3):
        r = await client.post(WEBHOOKS, headers=ws.headers(),
                              json={"name": f"hook {n}", "url": f"https://127.0.0.1:9/{n}"})
        assert r.status_code == 201, r.text
    hook = r.json()["id"]
    listed = (await client.get(WEBHOOKS, headers=ws.headers(), params={"page": 2, "page_size": 2})).json()
    assert_page(listed, 2, 2)
    assert listed["results"] == listed["items"] and listed["count"] == listed["total"] >= 3
    deliveries = (await client.get(f"{WEBHOOKS}{hook}/deliveries/", headers=ws.headers(),
                                   params={"page_size": 5})).json()
    assert_page(deliveries, 1, 5)
    assert deliveries["results"] == deliveries["items"] and deliveries["count"] == deliveries["total"]
    for url in (WEBHOOKS, f"{WEBHOOKS}{hook}/deliveries/"):
        assert_refused_naming(await client.get(url, headers=ws.headers(), params={"page_size": "101"}), "page_size")


@pytest.mark.parametrize(("model", "ordering", "nulls_last"), [
    (ApiKey, "expires_at", True), (ApiKey, "-last_used_at", True),
    # An index holds it: the engine's own order, so that PostgreSQL reads the index backwards for a newest-first
    # page of the ledger (an entry not yet sealed has no position).
    (AuditEntry, "-seq", False),
    (ApiKey, "-created_at", False)])  # NOT NULL: nothing to place
def test_records_without_the_ordering_value_go_last_only_where_no_index_serves_it(
        model: type, ordering: str, nulls_last: bool) -> None:
    for dialect in (postgresql.dialect(), sqlite.dialect()):
        repository = OrgRepository(None, model, "org")  # type: ignore[arg-type]  # compiled only, never run
        stmt = repository.ordered(select(model), ordering, (ordering.lstrip("-"),), "id")
        assert ("NULLS LAST" in str(stmt.compile(dialect=dialect))) is nulls_last, (model, ordering, dialect.name)
