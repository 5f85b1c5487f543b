"""What capability search says about its results (registry/capability.py, registry/answer.py): safe ordering of
irreversible handlers, a calibrated confidence and `no_match`, ordered plans, the ranker named, and the
`prism_search` utility tool answering the same through the canonical door and the sandbox, with recipes that
work as given."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from prism.registry import semantic
from prism.registry.answer import filled
from prism.registry.capability import (
    CHANGE,
    TAKE_BACK,
    UNDOABLE,
    asked_act,
    asks_irreversible,
    clauses,
    find,
    irreversible,
)
from prism.registry.introspect import recipe
from prism.registry.registry import Registry, build_registry
from prism.registry.search import LEXICAL_RERANK, SEMANTIC_RERANK, index_for, split_words
from prism.storage import Database
from tests.factories import Factory, Workspace

pytestmark = pytest.mark.engine_independent

CALL = "/api/v1/dev/call/"
CANONICAL = "/api/mcp/tools/prism_search/"


@pytest.fixture(scope="module")
def registry() -> Registry:
    return build_registry()


def first(registry: Registry, query: str) -> Any:
    return find(index_for(registry), query, tuple(registry), limit=10)


@pytest.mark.parametrize(("query", "asks"), [
    ("delete spare part 42", True), ("void claim 7120", True), ("get rid of that collection for good", True),
    ("remove notification 5521 permanently", True), ("cancel mission 7", True),
    ("pause plan 88 but don't delete it", False), ("change it without removing anything", False),
    # A policy's rule names the act it refuses.
    ("need a persona for the AP agent: allow finance reads, deny any delete", False),
    ("forbid deleting vendors for the ap-clerk persona", False), ("deny claim 5, delete payment 7", True),
    ("set up a persona for the AP bot: allow finance reads, deny payment void, route anything else to oversight",
     False), ("deny vendor delete for the ap persona", False),
    ("which tickets are open?", False), ("update the vendor's address", False),
    # Taking an act back asks for no irreversible act.
    ("un-revoke key k_4, we still need it", False), ("undo the void of invoice 12", False),
    ("restore the deleted collection", False),
    # A past tense after its subject tells what happened; a past participle may still ask.
    ("we voided claim 10702 by mistake, put it back", False), ("the webhook I deleted yesterday", False),
    ("I need claim 7 voided", True), ("I need PO 7 cancelled", True),
    ("asset 220 got retired by mistake, un-retire it", False),
    ("the vendor was deleted yesterday, bring it back", False), ("it has been cancelled twice", False),
    # An adverb between the subject and the verb, and a phrase that qualifies a told act, tell too.
    ("I permanently deleted doc 901 yesterday (not archived), can you bring it back?", False),
    ("we accidentally voided invoice 12, undo it", False), ("we deleted it for good by mistake, restore it", False),
    ("permanently delete doc 901", True), ("delete doc 901 permanently", True),
    # An act going on, recurring or to be prevented is told of, not asked for; "drop a note" writes one.
    ("robot R2 keeps dropping cartons, raise a job for it", False), ("stop the bot deleting vendors", False),
    ("the sync is removing rows it should not", False), ("drop a private note on INC-4410", False),
    ("drop me a line when it ships", False), ("drop vendor 12", True),
    # "drop" that lowers a level changes a record.
    ("drop ticket 8812 from P1 down to P3, customer says it can wait", False), ("drop ticket 4412 to P3", False),
    ("drop vendor 12 from the approved list", True), ("drop the sensor readings from 2019 to 2021", True),
    ("drop webhook 12, the endpoint is down", True),
    # Nothing after the verb, or after "to".
    ("channel 5: drop", True), ("drop it down to", False), ("deleting vendor 12, please", True),
    # An attempt told of is not asked for; wanting or trying it oneself still asks.
    ("say no to request 1190, the agent was trying to mass-delete vendor records", False),
    ("it kept attempting to void payments", False), ("try to delete vendor 12", True),
    ("I am trying to delete vendor 12, do it", True),
    # Someone else's wish is told of, unless the request goes ahead with it; one's own wish, or a failed attempt,
    # asks.
    ("No on request 913 - the agent wants to delete vendor Kaman and that's not happening", False),
    ("customer wants to cancel PO 4410, please process", True), ("my manager wants to cancel PO 4410, go ahead", True),
    ("I tried to cancel PO 4410 but the button is greyed out, can you do it?", True),
    ("I want to delete vendor 12", True),
    # Before a modal the word is a noun, the subject of a rule; not at the start, nor after a word that asks, nor
    # before a name.
    ("on persona ap-clerk-bot, any payment void should need human sign-off from now on", False),
    ("void payment 7, it should never have gone out", True),
    ("vendor 12 is a dupe, please delete - should be safe, no invoices", True),
    ("PO 4410 is a duplicate. can you cancel? would really help", True), ("revoke Will's API key", True),
    ("remove May from the on-call rotation", True), ("cancel will call order 4410", True),
    # The "-s" form tells of someone's act; after a determiner it is a plural noun.
    ("Hold on, before anyone voids anything — what's the current status and memo on invoice 5530?", False),
    ("the nightly sync deletes rows it should keep, which job is it?", False),
    ("run the bulk deletes for vendors 12 and 13", True),
    # "auto-delete" names a feature.
    ("set up auto-delete for contracts older than 7 years", False),
    # A negation reaches a verb joined to the one it negates by "or"; "nobody" negates before a modal only.
    ("put a legal hold on doc_771 so nobody can archive or delete it", False),
    ("nobody uses it, delete channel 5", True), ("nothing shipped, cancel PO 4410", True),
])
def test_a_request_asks_for_an_irreversible_act_only_when_it_says_so_unnegated(query: str, asks: bool) -> None:
    assert asks_irreversible(split_words(query)) is asks


def test_no_irreversible_handler_comes_first_unless_the_request_asks_for_one(registry: Registry) -> None:
    entities = sorted({(h.coordinate.app, h.coordinate.entity) for h in registry if irreversible(h)})
    assert len(entities) > 10
    checked = 0
    for app, entity in entities:
        name = " ".join(split_words(entity))
        for query in (name, f"what about the {name}?", f"{name} {app}", f"the {name} records of {app}",
                      f"change the {name} but do not delete it"):
            found = first(registry, query)
            if found.hits:
                checked += 1
                assert not irreversible(found.hits[0].handler), (query, found.hits[0].handler.path)
    assert checked >= 5 * len(entities) - 5
    for h in (h for h in registry if irreversible(h)):
        query = f"{' '.join(split_words(h.coordinate.operation))} the {' '.join(split_words(h.coordinate.entity))} 12"
        asked = first(registry, query)
        assert irreversible(asked.hits[0].handler), (query, asked.hits[0].handler.path)
    # A question in words of a destructive handler's entity: the read-only answer first.
    found = first(registry, "Which requests are about to blow through the response time we promised?")
    assert not irreversible(found.hits[0].handler)


def test_confidence_is_a_probability_and_nothing_fits_is_flagged(registry: Registry) -> None:
    for query in ("Book Kim a flight to Regensburg for March", "What's the weather tomorrow?",
                  "Enroll John in the dental plan"):
        found = first(registry, query)
        assert found.no_match, (query, [(h.handler.path, h.confidence) for h in found.hits[:3]])
    for query in ("delete spare part 42", "show me spare part 42", "mark purchase order 4402 received"):
        found = first(registry, query)
        assert not found.no_match, (query, [(h.handler.path, h.confidence) for h in found.hits[:3]])
    found = first(registry, "mark purchase order 4402 received")
    assert found.hits[0].handler.path == "workflow_action/finance/purchase_order/receive"
    assert all(0.0 <= h.confidence <= 1.0 for h in found.hits)
    assert found.hits[0].confidence > found.hits[-1].confidence
    assert first(registry, "the of and").no_match  # nothing but stop words: nothing to look for


@pytest.mark.parametrize(("query", "act"), [
    ("extend the expiry on key 4 by 90 days", CHANGE), ("on claim 6611 line 3, change the CPT to 99214", CHANGE),
    ("please rename agent invoice-bot to ap-triage", CHANGE), ("update the vendor's address", CHANGE),
    ("reopen PO 3310, we cancelled it but the vendor can deliver", TAKE_BACK),
    ("we voided claim 10702 by mistake - un-void it", TAKE_BACK), ("restore doc 90", TAKE_BACK),
    ("on ticket 4412, please change the priority to P2", CHANGE), ("hi team, could you reopen ticket 4412", TAKE_BACK),
    ("update on ticket 4412?", None), ("Raise mission 12's budget ceiling to $800", CHANGE),
    ("raise a PO to vendor 31 for 100 FC-200 cartridges", None),
    ("Raise the risk level of the AI system (id 7) to high", CHANGE), ("set ticket 4412 to P2", CHANGE),
    ("set up an alert to high-value customers", None), ("raise a ticket to high priority for the VPN outage", None),
    ("instance 4471 crashed, resume it", TAKE_BACK), ("please wipe the movement history of part 7", UNDOABLE),
    ("void payment 3307", UNDOABLE), ("drop a note on ticket 4412", None), ("we voided payment 3307", None),
    # A clause opening with a past tense tells: the act is asked after it.
    ("deleted doc 90 by mistake, restore it", TAKE_BACK),
    # The first act decides: a change asked after another act, a change told of, or "change" as a noun is not it.
    ("add a line to PO 7, then change its quantity", None), ("changes made to persona 7 last week?", None),
    ("set up a PM for the filter change every 90 days", None), ("which tickets are open?", None),
    # A record named at the start ("ticket 4401 was ..."; "ticket" is a synonym of an operation's verb) is no act.
    ("Ticket 4401 was escalated to P1 by mistake - lower it back to P3", CHANGE),
    ("ticket 20455 isn't actually urgent, lower it to P4", CHANGE),
])
def test_the_first_act_of_a_request_may_ask_to_change_a_record_or_take_an_act_back(
        registry: Registry, query: str, act: str | None) -> None:
    found = asked_act(index_for(registry), query)
    assert (found.kind if found else None) == act


@pytest.mark.parametrize("model", [True, False])
def test_an_act_asked_that_the_catalog_does_not_offer_is_flagged(
        registry: Registry, model: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """API keys can be made, listed and revoked: nothing extends them. The best handlers (`key/create`,
    `purchase_order/close`, `work_order/complete`) match the request's words well, and without this reading
    they were answered with confidence (0.95 for the key)."""
    monkeypatch.setattr(semantic, "AVAILABLE", model and semantic.AVAILABLE)
    for query in ("extend the expiry on key k_77 by 90 days",
                  # Missions are made with a budget ceiling and never changed.
                  "Raise mission 12's budget ceiling to $800",
                  # Purchase orders are closed and work orders deleted, never reopened or restored.
                  "reopen PO 7702, we closed it by mistake", "restore work order 5120 that I deleted yesterday",
                  # Tickets are reopened and documents restored, each its own entity only.
                  "reopen PO 3310, we cancelled it but the vendor can deliver after all",
                  "restore ticket 7702, someone deleted it by mistake",
                  # Stock movements are only read: nothing erases them. Agent instances are never resumed.
                  "wipe the stock movement history of part 7 before 2020, it is clutter",
                  "instance 4471 crashed at step 9, resume it from there",
                  # Tickets are escalated, never lowered: escalating is the opposite act.
                  "Ticket 4401 was escalated to P1 by mistake - lower it back to P3",
                  "ticket 20455 isn't actually urgent, drop it from P1 down to P4",
                  "drop ticket 8812 from P1 down to P3, customer says it can wait"):
        found = first(registry, query)
        assert found.no_match, (query, [(h.handler.path, h.confidence) for h in found.hits[:3]])
    # Where the catalog does it, it is answered.
    for query, entity in (("change the priority of ticket 4412 to P2", "ticket"),
                          ("reopen ticket 4412, the printer jams again", "ticket"),
                          ("restore doc 90, it was deleted by mistake", "document"),
                          # Starting a work order resumes one on hold, as its description says.
                          ("resume work order 90401, the gearbox arrived", "work_order"),
                          ("cancel work order 5120, the pump was replaced", "work_order"),
                          ("escalate ticket 6120 to P1, the CEO's laptop is down", "ticket")):
        found = first(registry, query)
        assert not found.no_match and found.hits[0].handler.coordinate.entity == entity, found.hits[:3]


@pytest.mark.parametrize("model", [True, False])
def test_a_change_asked_is_answered_first_by_the_entitys_handler_that_changes(
        registry: Registry, model: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """The words of the new terms matched `vendor/create` best; the request asks to change vendor 40."""
    monkeypatch.setattr(semantic, "AVAILABLE", model and semantic.AVAILABLE)
    found = first(registry, "Brightline (vendor 40) agreed new terms after all the delays, change their payment "
                            "terms to 60 days")
    assert found.hits[0].handler.path == "entity_crud/finance/vendor/update", found.hits[:3]


def test_an_act_told_at_the_start_is_not_asked(registry: Registry) -> None:
    """"deleted doc 90 by mistake" tells of a deletion (no subject before it); what it asks is to restore."""
    found = first(registry, "deleted doc 90 by mistake, restore it")
    assert found.hits[0].handler.path == "document_op/documents/document/restore" and not found.no_match
    assert not found.asks_irreversible


def test_an_irreversible_handler_never_takes_an_act_back(registry: Registry) -> None:
    """`payment/void`'s description says a paid invoice "reopens": voiding is no reopening."""
    found = first(registry, "reopen invoice 7702, the payment bounced")
    assert found.no_match, found.hits[:3]
    assert all(h.confidence < 0.2 for h in found.hits if h.handler.path == "workflow_action/finance/payment/void")


def test_a_count_comes_first_only_when_the_request_asks_for_a_number(registry: Registry) -> None:
    """The count's example requests share the words of a question about the records; only "how many", "the
    number of", "count" or "total" ask for the number."""
    found = first(registry, "which POs from vendor 12 are still open?")
    assert found.hits[0].handler.path == "entity_crud/finance/purchase_order/list", found.hits[:3]
    part_number = first(registry, "what is the part number of spare part 12?")
    assert part_number.hits[0].handler.path == "entity_crud/spare_parts/spare_part/read", part_number.hits[:3]
    for query, entity in (("how many tickets are due before noon?", "itsm/ticket"),
                          ("the number of open tickets for priya", "itsm/ticket"),
                          ("count the POs from vendor 12 that are still open", "finance/purchase_order")):
        assert first(registry, query).hits[0].handler.path == f"entity_crud/{entity}/count", query


def test_a_request_of_several_acts_gets_its_steps_in_order(registry: Registry) -> None:
    found = first(registry, "receive purchase order 4402, then put the belts into stock")
    assert [s.handler.path for s in found.plan][:1] == ["workflow_action/finance/purchase_order/receive"]
    assert len(found.plan) >= 2 and found.hits[0].handler.path == found.plan[0].handler.path
    assert first(registry, "show me spare part 42").plan == []
    # A clause that only tells ("the pump is dead") is no step; a conditional's act follows its comma.
    told = first(registry, "The old pump is dead, we moved off it. Mark purchase order 4402 received")
    assert told.plan == [] and told.hits[0].handler.path == "workflow_action/finance/purchase_order/receive"
    checked = first(registry, "Check how much mission 7 has spent; if it's over $300, cancel it")
    assert [s.handler.path for s in checked.plan] == ["mission_control/missions/mission/read",
                                                      "mission_control/missions/mission/cancel"]


def test_a_clause_pointing_back_before_any_step_is_read_with_what_the_request_told(registry: Registry) -> None:
    """"cancel it" alone could cancel anything (a purchase order came first); the record is the agent instance the
    request told of, and the clause says the operation in full ("mark it received" is no `markRead`)."""
    found = first(registry, "Agent instance 9021 is looping - cancel it, then disable agent 19 so nothing new "
                            "spawns until we review")
    assert [s.handler.path for s in found.plan] == ["agent_command/agents/agent_instance/cancel",
                                                    "workflow_action/agents/agent/disable"]
    received = first(registry, "PO 5120 is here - mark it received and put the 40 pump seals (part 771) into stock")
    assert received.hits[0].handler.path == "workflow_action/finance/purchase_order/receive", received.hits[:2]


def test_a_plans_first_step_is_as_confident_as_the_request_as_a_whole(registry: Registry) -> None:
    """"mark it down" alone says little; the whole request finds its work order with confidence, and the plan
    answers the whole request."""
    found = first(registry, "conveyor 3120 is leaking oil everywhere, mark it down and then open an urgent work "
                            "order on it for the mechanics")
    assert [s.handler.path for s in found.plan] == ["workflow_action/maintenance/asset/markDown",
                                                    "entity_crud/maintenance/work_order/create"]
    assert found.hits[0].confidence == max(h.confidence for h in found.hits), found.hits[:2]
    assert not found.no_match


def test_a_sentence_ends_at_an_exclamation_or_question_mark(registry: Registry) -> None:
    """"stuck between floors!! mark it down" was one clause, opening with no verb: no step."""
    query = ("Elevator 2 at Midtown (asset 77) stuck between floors!! mark it down, open an urgent work order, and "
             "post an alert to the duty engineers channel (id 5)")
    assert clauses(query)[:2] == ["Elevator 2 at Midtown (asset 77) stuck between floors", "mark it down"]
    assert first(registry, query).plan[0].handler.path == "workflow_action/maintenance/asset/markDown"
    assert clauses("is 4412 still open? close it if so") == ["is 4412 still open", "close it if so"]


def test_a_clause_that_tells_what_was_done_is_no_step(registry: Registry) -> None:
    """"opened the panel" tells; read as "open" it made a meter reading the plan's first step."""
    found = first(registry, "opened the panel on compressor 88 this morning, then put work order 5120 on hold")
    assert found.plan == [] and found.hits[0].handler.path == "workflow_action/maintenance/work_order/hold"


def test_the_confidence_knows_whether_the_request_names_the_handlers_entity(registry: Registry) -> None:
    named = first(registry, "put work order 5120 on hold").hits[0]
    unnamed = first(registry, "convert 4,500 EUR to USD at today's rate").hits[0]
    assert named.features[-1] == 1.0 and unnamed.features[-1] == 0.0, (named, unnamed)
    # A synonym or one of the entity's keywords names it too: "job" for a work order.
    assert first(registry, "put job 5120 on hold").hits[0].features[-1] == 1.0


def test_the_ranker_says_whether_the_model_ran(registry: Registry, monkeypatch: pytest.MonkeyPatch) -> None:
    assert semantic.AVAILABLE  # a runtime dependency: the default install ranks with the model
    assert first(registry, "show me spare part 42").ranker == SEMANTIC_RERANK
    monkeypatch.setattr(semantic, "AVAILABLE", False)
    found = first(registry, "show me spare part 42")
    assert found.ranker == LEXICAL_RERANK and found.hits[0].handler.path == "entity_crud/spare_parts/spare_part/read"


@pytest.fixture(scope="module")
async def ws(db: Database) -> Workspace:
    return await Factory(db).workspace()


async def test_prism_search_answers_the_same_through_both_doors_with_recipes_that_work(
        client: httpx.AsyncClient, ws: Workspace) -> None:
    created = await client.post("/api/mcp/tools/prism_entity_crud/", headers=ws.headers(), json={
        "app": "spare_parts", "entity": "spare_part", "operation": "create",
        "arguments": {"sku": "SEARCH-1", "name": "Found by search"}})
    assert created.status_code == 200, created.text
    part = created.json()["data"]["id"]
    query = {"query": f"show me spare part {part}", "limit": 3}
    canonical = await client.post(CANONICAL, headers=ws.headers(), json=query)
    sandbox = await client.post(CALL, headers=ws.headers(), json={"name": "prism_search", "arguments": query})
    assert canonical.status_code == sandbox.status_code == 200, (canonical.text, sandbox.text)
    answer = canonical.json()["data"]
    assert answer == sandbox.json()
    assert answer["ranker"] == SEMANTIC_RERANK and answer["count"] == 3
    assert answer["no_match"] is False, answer["results"][0]
    best = answer["results"][0]
    assert best["coordinate"] == "entity_crud/spare_parts/spare_part/read"
    assert best["parameters"]["required"] == ["id"] and best["recipe"]["fill"] == []
    # The recipe is the next message: called as given, it reads the part.
    recipe = best["recipe"]["http"]
    read = await client.request(recipe["method"], recipe["path"], headers=ws.headers(), json=recipe["body"])
    assert read.status_code == 200 and read.json()["data"]["sku"] == "SEARCH-1", read.text


async def test_prism_search_shows_a_viewer_only_what_it_may_call_and_refuses_a_blank_request(
        client: httpx.AsyncClient, ws: Workspace) -> None:
    r = await client.post(CANONICAL, headers=ws.headers("viewer"), json={"query": "delete spare part 42", "limit": 20})
    assert r.status_code == 200, r.text
    results = r.json()["data"]["results"]
    assert results and all(res["read_only"] and not res["destructive"] for res in results)
    blank = await client.post(CANONICAL, headers=ws.headers(), json={"query": "   "})
    assert blank.status_code == 400 and blank.json()["error"] == "invalid_arguments", blank.text
    unknown = await client.post(CANONICAL, headers=ws.headers(), json={"query": "parts", "app": "nope"})
    assert unknown.status_code in (400, 404, 422) and unknown.json()["success"] is False, unknown.text


def test_a_recipe_takes_the_requests_one_record_number_and_one_email(registry: Registry) -> None:
    handler = registry.get_path("workflow_action/itsm/ticket/assign")
    assert handler is not None
    call = filled(recipe(handler), handler.schema, "give ticket #5520 to raj.patel@example.com")
    assert call["http"]["body"]["arguments"] == {"id": "5520", "assignee_email": "raj.patel@example.com"}
    assert call["fill"] == [] and call["sandbox"]["body"]["arguments"] == call["http"]["body"]
    # Two numbers: which one is the ticket is not said, so the identifier stays a placeholder.
    unsure = filled(recipe(handler), handler.schema, "give ticket 5520 or 5521 to raj.patel@example.com")
    assert unsure["fill"] == ["id"] and unsure["http"]["body"]["arguments"]["id"] == "<id>"


def test_a_request_to_take_an_act_back_gets_no_irreversible_handler_first(registry: Registry) -> None:
    found = first(registry, "un-revoke key 7, we still need it")
    assert not irreversible(found.hits[0].handler), found.hits[0].handler.path


def test_a_verb_in_a_path_or_url_asks_for_no_irreversible_act(registry: Registry) -> None:
    """"deny finance/payment/void to the persona" changes the persona; before, the path's "void" raised every void."""
    found = find(index_for(registry), "tighten persona 'ap-agent': deny anything under finance/payment/void",
                 tuple(registry), limit=5)
    assert not found.asks_irreversible and not irreversible(found.hits[0].handler), found.hits[0].handler.path
    assert find(index_for(registry), "void payment 12", tuple(registry), limit=5).asks_irreversible


@pytest.mark.parametrize(("query", "path"), [
    ("turn off agent 17, it's looping and burning tokens. no new runs til I look at it",
     "workflow_action/agents/agent/disable"),
    ("ep_22 is hammering their sandbox with bad requests. Turn it off until I fix the payload.",
     "workflow_action/integrations/endpoint/disable"),
    ("Shut off endpoint 88 (the old ServiceNow bridge), it's hammering a dead URL",
     "workflow_action/integrations/endpoint/disable"),
])
def test_switching_off_asks_for_the_handler_that_disables(registry: Registry, query: str, path: str,
                                                         search_model: bool) -> None:
    assert first(registry, query).hits[0].handler.path == path


def test_switching_off_raises_no_other_irreversible_handler(registry: Registry, search_model: bool) -> None:
    """Nothing disables a channel: "switch off" asks for no deletion, nor for another entity's disable (an agent's),
    and the safe order holds."""
    found = first(registry, "switch off the old pager channel (id 5), nobody carries pagers anymore")
    assert not found.asks_irreversible and not irreversible(found.hits[0].handler), found.hits[0].handler.path
    # Nor another entity's named after the switched-off words' preposition.
    found = first(registry, "turn off the webhook for agent 17")
    assert found.hits[0].handler.path != "workflow_action/agents/agent/disable", found.hits[:2]
    # Negated, told of, wished or asked about, it asks for nothing; nor does "switch it off" alone.
    for query in ("don't turn off agent 17, just tell me what it is running",
                  "did someone turn off agent 17? it stopped running", "why would I turn off endpoint 88?",
                  "the agent wants to turn off endpoint 88, deny that", "turn off", "switch it off"):
        found = first(registry, query)
        assert found.no_match or not irreversible(found.hits[0].handler), (query, found.hits[:2])
