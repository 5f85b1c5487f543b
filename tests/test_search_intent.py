"""The lexical rerank's reading of what a request asks to do: the operation it names (in its words or their
synonyms), and whether it is a question (read-only handlers answer it)."""

from __future__ import annotations

import pytest

from prism.registry.registry import build_registry
from prism.registry.search import _operation_intent, index_for, is_question, split_words, stem, terms


def spoken(query: str) -> set[str]:
    return {stem(w) for w in split_words(query)}


def test_operation_intent_counts_the_operation_words_the_request_says() -> None:
    said = spoken("mark all notifications as read")
    # Both names are said in full; the longer, more specific one counts more.
    assert _operation_intent("markAllRead", said) > _operation_intent("markRead", said) > 0
    assert _operation_intent("markUnread", said) < _operation_intent("markRead", said)
    assert _operation_intent("archive", said) == 0.0


def test_operation_intent_counts_a_synonym_less_than_the_word() -> None:
    synonym = _operation_intent("create", spoken("enter a bill"))
    word = _operation_intent("create", spoken("create a bill"))
    assert 0 < synonym < word
    assert _operation_intent("void", spoken("enter a bill")) == 0.0


@pytest.mark.parametrize(("query", "question"), [
    ("what components are in the storeroom", True),
    ("How many tickets are open", True),
    ("is the partner API down?", True),
    ("tickets still open?", True),
    ("raise an incident for the printer", False),
    ("mark all notifications as read", False),
    ("", False),
])
def test_is_question(query: str, question: bool) -> None:
    assert is_question(query, split_words(query)) is question


def test_all_is_a_word() -> None:
    assert "all" in terms("mark all read")


def test_the_operation_named_wins_within_its_entity() -> None:
    registry = build_registry()
    index = index_for(registry)
    hits, _ = index.ranked("mark all notifications as read", tuple(registry), limit=5, rerank=True)
    assert hits[0].handler.path == "workflow_action/notifications/notification/markAllRead"


def test_a_question_prefers_a_read_only_handler() -> None:
    registry = build_registry()
    index = index_for(registry)
    hits, _ = index.ranked("what did upkeep of each machine cost", tuple(registry), limit=5, rerank=True)
    assert hits[0].handler.read_only, [h.handler.path for h in hits]
