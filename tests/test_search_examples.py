"""Example requests: what people ask of a handler in their own words (`HandlerApp.examples`), read by capability
search besides the handler's description, without the names and addresses in them; every shipped handler has
them, and introspection shows them."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from prism.apps import shipped_examples
from prism.registry import HandlerApp, HandlerCall, Params, semantic
from prism.registry.registry import Registry, build_registry
from prism.registry.search import SearchIndex, without_particulars
from prism.storage import Database
from tests.factories import Factory, Workspace

SHELVE = "workflow_action/desk/thing/archive"
LIST = "entity_crud/desk/thing/list"
TAG = "workflow_action/desk/thing/tag"
# Said only by the archive handler's examples: neither description nor any keyword has these words.
SHELVING = ("stash the old gizmo up in the attic", "put that doohickey in the attic, we are done with it")


async def _echo(call: HandlerCall, params: Any) -> dict[str, Any]:
    return {}


def _desk(examples: dict[str, tuple[str, ...]]) -> Registry:
    app = HandlerApp("desk", description="A small desk of things.", examples=examples)
    app.handler("entity_crud", "thing", "list", params=Params, scope="read", description="List things.")(_echo)
    app.handler("workflow_action", "thing", "archive", params=Params, scope="write",
                description="Archive a thing that is no longer used.")(_echo)
    app.handler("workflow_action", "thing", "tag", params=Params, scope="write",
                description="Tag a thing with a label.")(_echo)
    registry = Registry()
    registry.add_app(app)
    return registry.freeze()


def _first(registry: Registry, query: str) -> str:
    return SearchIndex(registry).search(query, tuple(registry), limit=3, rerank=True)[0].handler.path


def test_an_app_gives_each_handler_its_examples_by_path() -> None:
    registry = _desk({SHELVE: SHELVING, "workflow_action/elsewhere/thing/archive": ("not this app's",)})
    assert registry.get_path(SHELVE).examples == SHELVING
    assert registry.get_path(LIST).examples == ()


@pytest.mark.parametrize("model", [True, False])
def test_a_request_in_words_only_the_examples_say_finds_the_handler(monkeypatch: pytest.MonkeyPatch,
                                                                   model: bool) -> None:
    """The examples decide: given to the archive, the request finds the archive; given to tagging, tagging."""
    if model and not semantic.AVAILABLE:
        pytest.skip("the semantic extra is not installed")
    monkeypatch.setattr(semantic, "AVAILABLE", model)
    query = "stash the broken gizmo in the attic"
    assert _first(_desk({SHELVE: SHELVING}), query) == SHELVE
    assert _first(_desk({TAG: SHELVING}), query) == TAG


def test_names_and_addresses_in_an_example_are_not_read() -> None:
    assert without_particulars("Create vendor 'Grainger' with billing email invoices@grainger.com") == \
        "Create vendor with billing email"
    assert without_particulars("Point the hook at https://hooks.acme.io/x. Then ping it") == \
        "Point the hook at Then ping it"
    # A sentence's first word is no name; record numbers and acronyms stay.
    assert without_particulars("Dispute INV-7788 from Aetna. Acme sent it twice") == \
        "Dispute INV-7788 from Acme sent it twice"


def test_a_supplier_named_in_an_example_draws_no_request_naming_that_supplier(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(semantic, "AVAILABLE", False)
    registry = _desk({TAG: ("Tag the Grainger crate as fragile",)})
    index = SearchIndex(registry)
    hits = index.search("Grainger", tuple(registry), limit=3, rerank=True)
    assert hits == []


def test_every_shipped_handler_has_examples_and_each_names_a_shipped_handler() -> None:
    shipped_handlers = [h for h in build_registry() if h.func.__module__.startswith("prism.apps.")]
    shipped = shipped_examples()
    assert set(shipped) == {h.path for h in shipped_handlers}, set(shipped) ^ {h.path for h in shipped_handlers}
    for handler in shipped_handlers:
        assert len(handler.examples) >= 6, handler.path
        assert handler.examples == shipped[handler.path]
        assert all(isinstance(e, str) and e.strip() for e in handler.examples), handler.path


@pytest.fixture(scope="module")
async def ws(db: Database) -> Workspace:
    return await Factory(db).workspace()


async def test_introspection_shows_a_handlers_examples(client: httpx.AsyncClient, ws: Workspace) -> None:
    r = await client.get("/api/v1/dev/introspect/", headers=ws.headers("owner"), params={
        "dimension": "schema", "operation": "entity_crud/itsm/ticket/count"})
    assert r.status_code == 200, r.text
    assert r.json()["examples"] == list(shipped_examples()["entity_crud/itsm/ticket/count"])
