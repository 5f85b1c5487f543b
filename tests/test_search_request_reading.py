"""How a request is read before it is ranked: a quoted value (a name, a title, a message) is what the act writes, not
what the act is, so its words do not pull the search toward the handlers they happen to name (`QUOTED`); business
abbreviations are spelled out (`ABBREVIATIONS`, registry/search.py) and a plural acronym is one word; an irreversible
act the request negates is not ranked."""

from __future__ import annotations

import pytest

from prism.registry.capability import clauses, find, without_negated_acts, without_quoted_values
from prism.registry.registry import Registry, build_registry
from prism.registry.search import clause_openers, index_for, split_words, terms

pytestmark = pytest.mark.engine_independent


@pytest.fixture(scope="module")
def registry() -> Registry:
    return build_registry()


def first_path(registry: Registry, query: str) -> str:
    return find(index_for(registry), query, tuple(registry), limit=5).hits[0].handler.path


@pytest.mark.parametrize(("query", "expected"), [
    # Without the rule, the quoted words win: itsm/ticket/create and spare_parts/spare_part/delete come first.
    ("create a template titled 'Ticket Escalated To Payroll'", "entity_crud/notifications/template/create"),
    ("start a mission called \u201cRetire the old spare parts\u201d", "mission_control/missions/mission/start"),
    ('create a channel "Overdue Invoices Team"', "entity_crud/notifications/channel/create"),
    # A state to move to, in quotes, still says the act.
    ("mark ticket 4471 as 'in progress'", "workflow_action/itsm/ticket/start"),
])
def test_the_act_ranks_first_whatever_the_quoted_value_says(registry: Registry, query: str, expected: str) -> None:
    assert first_path(registry, query) == expected


@pytest.mark.parametrize(("query", "left"), [
    ("make a collection 'Supplier Contracts 2025' now", "make a collection   now"),
    ("rename doc 332 to \u2018Lockout-Tagout v4\u2019", "rename doc 332 to  "),
    ("approve Jana's request, don't delete it", "approve Jana's request, don't delete it"),  # apostrophes
    ("set it to 'closed'", "set it to 'closed'"),
    ("'Quarterly Review'", "'Quarterly Review'"),  # nothing else would be left: the request as it is
])
def test_what_is_left_of_a_request(query: str, left: str) -> None:
    assert without_quoted_values(query) == left


@pytest.mark.parametrize(("query", "expected"), [
    # Before abbreviations were spelled out, POs was split as "P Os" and matched no order at all, and "book"
    # said no act: work_order/start came first.
    ("list open POs", "entity_crud/finance/purchase_order/list"),
    ("book an invoice for the Kaeser repair", "entity_crud/finance/invoice/create"),
    ("which SLAs were breached", "report_query/itsm/ticket/slaBreaches"),
    ("show me all open tix for dana", "entity_crud/itsm/ticket/list"),
])
def test_business_abbreviations_and_bookkeeping_verbs(registry: Registry, query: str, expected: str) -> None:
    assert first_path(registry, query) == expected


def test_an_abbreviation_is_the_word_it_stands_for() -> None:
    assert terms("open tix for WOs") == terms("open ticket for work")


@pytest.mark.parametrize(("text", "words"), [
    ("POs", ["pos"]), ("APIs", ["apis"]), ("HTTPServer", ["http", "server"]),
    ("agingApSummary", ["aging", "ap", "summary"]),
])
def test_a_plural_acronym_is_one_word(text: str, words: list[str]) -> None:
    assert split_words(text) == words


@pytest.mark.parametrize(("query", "among"), [("change the mission but do not delete it", 3), ("un-revoke key 7", 1)])
def test_a_negated_act_does_not_pull_its_handlers_up(registry: Registry, query: str, among: int) -> None:
    top = find(index_for(registry), query, tuple(registry), limit=5).hits[:among]
    assert not any(h.handler.coordinate.operation in {"delete", "revoke"} for h in top), [h.handler.path for h in top]


def test_stopping_something_for_good_finds_its_cancel(registry: Registry) -> None:
    """Cancel has everyday words too (stop, halt, kill, abandon): before they were known, the run's cancel came
    fourth, behind another entity's retire."""
    top = find(index_for(registry), "stop the run 8812 for good", tuple(registry), limit=5).hits[:2]
    assert "agent_command/agents/agent_instance/cancel" in [h.handler.path for h in top]


@pytest.mark.parametrize(("query", "expected"), [
    # A record named with its number asks to read it, unless the opening verb names another of its operations.
    ("rename doc 5567", "entity_crud/documents/document/update"),  # read came first
    # ... whichever entity the number's word names: ticket_comment, named by "ticket" too, has no update, and its
    # read came first.
    ("rename ticket 5567", "entity_crud/itsm/ticket/update"),
    ("open ticket 5567", "entity_crud/itsm/ticket/read"),
    ("show ticket 5567", "entity_crud/itsm/ticket/read"),
])
def test_the_opening_verb_outweighs_a_records_number(registry: Registry, query: str, expected: str) -> None:
    assert first_path(registry, query) == expected


@pytest.mark.parametrize(("query", "left"), [
    ("pause plan 88 but don't delete it", "pause plan 88 but don't   it"),
    # The same verb asked for elsewhere is asked for: before, every "delete" went and nothing asked for one.
    ("don't delete ticket 4, delete ticket 5", "don't delete ticket 4, delete ticket 5"),
    # A word told of as done goes, even when the act is asked for in another word.
    ("we voided claim 7 by mistake, void claim 8", "we   claim 7 by mistake, void claim 8"),
])
def test_only_the_acts_not_asked_for_are_left_out(query: str, left: str) -> None:
    assert without_negated_acts(query, split_words(query)) == left


def test_an_act_refused_once_and_asked_once_finds_its_handler(registry: Registry) -> None:
    assert first_path(registry, "don't delete ticket 4, delete ticket 5") == "entity_crud/itsm/ticket/delete"


@pytest.mark.parametrize(("query", "expected"), [
    # Records named before "by" or "per" a field are to be grouped: the entity's breakdown, not its list.
    ("Tickets by priority and status please, open ones only", "report_query/itsm/ticket/breakdown"),
    ("invoice totals by status across all vendors", "report_query/finance/invoice/breakdown"),
    ("work orders by asset", "report_query/maintenance/work_order/breakdown"),
    # "by" a time, a manner or a person groups nothing; a verb naming the list still lists.
    ("close ticket 5 by friday", "workflow_action/itsm/ticket/close"),
    ("invoices sent by Grainger this year", "entity_crud/finance/invoice/list"),  # a name the catalog does not know
    ("show me tickets opened by raj", "entity_crud/itsm/ticket/list"),
    ("list tickets by priority", "entity_crud/itsm/ticket/list"),
])
def test_records_grouped_by_a_field_ask_for_a_breakdown(registry: Registry, query: str, expected: str) -> None:
    assert first_path(registry, query) == expected


@pytest.mark.parametrize(("query", "expected"), [
    # Goods that arrived are received; an agent turned off is disabled. Before these words were known, neither
    # handler was among the first three.
    ("PO 4410 landed this morning", "workflow_action/finance/purchase_order/receive"),
    ("deactivate agent 17", "workflow_action/agents/agent/disable"),
])
def test_everyday_words_for_receiving_and_disabling(registry: Registry, query: str, expected: str) -> None:
    top = find(index_for(registry), query, tuple(registry), limit=5).hits[:2]
    assert expected in [h.handler.path for h in top]


def test_asking_who_one_is_finds_whoami(registry: Registry) -> None:
    """People ask which key or account they are on and what it may do; whoami's description now says so."""
    assert first_path(registry, "what am I allowed to do here") == "report_query/core/caller/whoami"
    for query in ("which API key am I on right now?", "what account is this and what may I do with it"):
        top = find(index_for(registry), query, tuple(registry), limit=5).hits[:2]
        assert "report_query/core/caller/whoami" in [h.handler.path for h in top], query


@pytest.mark.parametrize(("query", "parts"), [
    # A verb and a pointer back at the record are a clause of their own: before, "close it" was too short and
    # the request read as one act.
    ("receive PO 3350 and close it", ["receive PO 3350", "close it"]),
    # A comma before an everyday imperative starts an act; a comma inside a list of values does not.
    ("create claim CLM-7781 for patient 443, payer 12, DOS May 5, add a line 97110 x4, then submit it",
     ["create claim CLM-7781 for patient 443, payer 12, DOS May 5", "add a line 97110 x4", "submit it"]),
    ("list tickets for Ana, Raj and Li", ["list tickets for Ana, Raj and Li"]),
])
def test_the_acts_of_a_request_are_read_in_order(query: str, parts: list[str]) -> None:
    assert clauses(query) == parts


def test_a_verb_pointing_back_is_a_step_of_the_plan(registry: Registry) -> None:
    plan = find(index_for(registry), "receive PO 3350 and close it", tuple(registry), limit=5).plan
    assert [s.handler.path for s in plan] == ["workflow_action/finance/purchase_order/receive",
                                              "workflow_action/finance/purchase_order/close"]


def test_fillers_of_time_say_no_act(registry: Registry) -> None:
    """"now" and "just" say when, not what: "now" in payInFull's keywords ("pay invoice now") put it before
    the approval asked for."""
    assert first_path(registry, "approve the Grainger invoice now") == "workflow_action/finance/invoice/approve"


@pytest.mark.parametrize(("query", "expected"), [
    # An opening verb that is itself an operation's name, with no synonym, asks for that act too: "escalate 7731"
    # read an oversight request (escalation's other sense) before.
    ("escalate 7731 to P1", "workflow_action/itsm/ticket/escalate"),
    ("escalate 5120, the CFO's laptop is down", "workflow_action/itsm/ticket/escalate"),
    # So does a later clause opening with one: the purchase order was read before. (Said of an order that "turned
    # up", "mark it done" reads as received, which receive's example requests say in those words.)
    ("the Festo order PO 5512 is settled, mark it done", "workflow_action/finance/purchase_order/close"),
])
def test_a_clause_opening_with_an_operation_verb_asks_for_that_act(registry: Registry, query: str,
                                                                  expected: str) -> None:
    assert first_path(registry, query) == expected


def test_clause_openers_are_the_first_words_after_each_clause_end() -> None:
    assert clause_openers("PO 4410 landed yesterday, mark it received") == ["mark"]
    assert clause_openers("It broke again. Fix it - today; thanks") == ["fix", "today", "thanks"]
    assert clause_openers("rename doc 5567") == []
    assert clause_openers("PO-4410 and v2.1") == []  # a hyphen or a dot inside a word ends nothing


@pytest.mark.parametrize(("query", "expected"), [
    # To scrap an order is to cancel it (its delete came first before); a machine is still scrapped by retiring it.
    ("scrap PO 881, we found a cheaper supplier", "workflow_action/finance/purchase_order/cancel"),
    ("scrap the old compressor", "workflow_action/maintenance/asset/retire"),
])
def test_scrap_cancels_an_order_and_retires_a_machine(registry: Registry, query: str, expected: str) -> None:
    assert first_path(registry, query) == expected
