"""How capability search weighs vocabulary: an entity's keywords reach all of its handlers, and a query word
counts once per handler however many of its synonyms the handler declares."""

from __future__ import annotations

from typing import Any

from prism.registry import HandlerApp, HandlerCall, Params
from prism.registry.registry import Registry
from prism.registry.search import SYNONYMS, SearchIndex, entity_keywords, stem


async def _echo(call: HandlerCall, params: Any) -> dict[str, Any]:
    return {}


def _registry(*declared: tuple[str, str, str, str, tuple[str, ...]]) -> Registry:
    app = HandlerApp("desk", description="A small service desk.")
    for mega_tool, entity, operation, description, keywords in declared:
        app.handler(mega_tool, entity, operation, params=Params, scope="read", description=description,
                    keywords=keywords)(_echo)
    registry = Registry()
    registry.add_app(app)
    registry.freeze()
    return registry


def _ranked(registry: Registry, query: str) -> list[str]:
    index = SearchIndex(registry)
    return [hit.handler.path for hit in index.search(query, tuple(registry), limit=10)]


TICKET_WORDS = ("fault", "callout")  # words of no synonym group: only the keywords can match them
DESK = _registry(
    ("entity_crud", "ticket", "list", "List tickets.", TICKET_WORDS),
    ("entity_crud", "ticket", "read", "Read one ticket.", TICKET_WORDS),
    ("entity_crud", "ticket", "count", "Count tickets.", (*TICKET_WORDS, "how many")),
    ("workflow_action", "ticket", "assign", "Assign a ticket to an agent.", ("dispatch",)),
    ("entity_crud", "asset", "list", "List assets.", ("equipment",)),
)


def test_keywords_most_of_an_entitys_handlers_share_name_the_entity() -> None:
    shared = entity_keywords(DESK)
    assert shared[("desk", "ticket")] == TICKET_WORDS  # "how many" is the count's own, "dispatch" the assign's
    assert shared[("desk", "asset")] == ()  # one handler: nothing is shared


def test_a_workflow_handler_is_found_by_its_entitys_keywords() -> None:
    assert "workflow_action/desk/ticket/assign" in _ranked(DESK, "fault")
    assert _ranked(DESK, "dispatch the fault")[0] == "workflow_action/desk/ticket/assign"


def test_a_query_word_counts_once_however_many_of_its_synonyms_a_handler_declares() -> None:
    assert {stem("seller"), stem("creditor"), stem("vendor")} <= SYNONYMS[stem("supplier")]
    assert stem("invoice") in SYNONYMS[stem("bill")]
    books = _registry(
        # Declares three words of the query word "supplier"'s group: they count as one match, not three.
        ("entity_crud", "vendor", "create", "Add a vendor.", ("seller", "creditor", "provider")),
        # Matches both query words, each through a synonym.
        ("entity_crud", "invoice", "create", "Record an invoice from a vendor.", ()),
    )
    assert _ranked(books, "supplier bill")[0] == "entity_crud/desk/invoice/create"
