"""Which handler does this? The answer an agent acts on: ranked handlers, each with a calibrated confidence,
an honest "nothing fits", safe ordering and, for a request of several acts, an ordered plan.

`SearchView.ranked` orders handlers; this module decides what to say about them:

- **Confidence** (`confidence`): the probability that a result is a right answer, from features that mean
  the same for every request — how much of the request the handler's text accounts for (idf-weighted
  coverage, and the same in absolute terms), how many of the request's words any handler knows at all, the
  embedding's cosine (when the model is installed), the result's score relative to the first, first
  place, and whether the request's first act is one this handler cannot do (`asked_act`: a change asked of
  a handler that creates or only reads, "extend the expiry on my key" answered by `key/create`; an act to take
  back asked of one that does not take acts back, "reopen PO 7702, we closed it" answered by `close`; an act that
  cannot be undone asked of one that creates or reads, "wipe the movement history of part 7"), and whether
  the request names the handler's entity. A logistic model over them was fitted on
  the tuning part of the blind tasks (bench/search_calibrate.py); the coefficients are below. Scores differ
  in scale from one request to the next; confidences do not, so one threshold serves every request.
- **Nothing fits** (`no_match`): the first result's confidence is below NO_MATCH_BELOW. The results are still
  returned (an agent may look), flagged.
- **Safe ordering**: a handler whose act cannot be undone (declared `destructive`, or named by an
  irreversible verb: cancel, void, retire, ...) never comes first unless the request asks for such an act
  (`asks_irreversible`: an irreversible verb not negated — "don't delete it" asks for nothing of the kind).
  When it does, those handlers are raised instead.
- **Plan** (`plan`): a request of several clauses in order ("receive PO 4402, then put the belts into
  stock") gets the best handler of each clause that finds one confidently, in the order said, when there
  are two or more; the plan's first step then comes first in the results (putting every step first ranked
  the tuning tasks slightly worse: the whole request's ranking places later steps well already).

Everything here is general: verb lists of irreversible acts, of imperatives and of clause boundaries, and
nine coefficients per ranker. None of it names a handler or a word of a tuning request.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache, partial
from typing import TYPE_CHECKING, NamedTuple

from prism.registry.model import Handler
from prism.registry.search import (
    SEMANTIC_RERANK,
    STOPWORDS,
    SYNONYMS,
    Hit,
    SearchView,
    clause_words,
    operation_words,
    plain_letters,
    request_terms,
    split_words,
    stem,
    without_quoted_values,
)

if TYPE_CHECKING:
    import numpy as np

# Candidates scored and reordered before the first `limit` are kept: enough to find a safe first result.
POOL = 20

# Verbs of acts that cannot be undone or that take something out of service at once (disable), stemmed. A
# handler named by one is irreversible even where it does not declare itself destructive, and every built-in one
# declares it (tests/test_mcp_surfaces.py); a request saying one (not negated) asks for such an act.
IRREVERSIBLE_BASE = frozenset((
    "delete remove erase purge destroy wipe void cancel retire scrap decommission discard dispose terminate "
    "revoke drop kill abort disable").split())
IRREVERSIBLE_VERBS = frozenset(stem(w) for w in IRREVERSIBLE_BASE)
# Phrases that ask for the irreversible form of an act: "for good", "permanently", "get rid of".
IRREVERSIBLE_PHRASES = (("for", "good"), ("get", "rid"), ("permanently",), ("irreversibly",))
# How far from such a phrase an irreversible verb it qualifies may be ("deleted it for good").
PHRASE_REACH = 3
# Verbs that take something out of service with "off" after them, within SWITCH_OFF_REACH words: "turn off agent
# 17", "switch it off", "shut endpoint 88 off" ask for a handler that disables (DISABLING), which comes first as
# when the request asks for an irreversible act; other irreversible handlers do not: "switch off the old pager
# channel" asks for no deletion, and where nothing disables the safe order holds.
SWITCHING = frozenset({"turn", "switch", "shut"})
SWITCH_OFF_REACH = 3
DISABLING = frozenset(stem(w) for w in ("disable", "deactivate"))
SWITCHING_TERMS = frozenset(stem(w) for w in (*SWITCHING, "off"))
# Words before the verb within NEGATION_REACH that make it a question about the act, not a request for it.
QUESTIONING = frozenset({"did", "why", "who", "whether"})
# Words that negate a verb up to NEGATION_REACH words after them: "don't delete", "without removing"; and those
# that ask to take such an act back, which is no irreversible act either: "un-revoke", "undo the void",
# "restore the webhook I deleted".
NEGATIONS = frozenset({"not", "never", "without", "dont", "no", "t", "un", "undo", "restore"})
# "nobody", "no one", "nothing" negate only before a modal ("so nobody can delete it"; not "nobody uses it, delete
# channel 5"), and a negation reaches a verb joined to the one it negates by "or" ("nobody can archive or delete it").
NOBODY = frozenset({"nobody", "noone", "nothing"})
MODALS = frozenset({"can", "could", "may", "might", "should", "will", "would", "must", "shall"})
_ALTERNATIVE = frozenset({"or", "nor"})
NEGATION_REACH = 3
# Words of a policy's rule that refuse the act right after them, or after a quantifier: "deny any delete",
# "forbid deleting" (a rule, not an act). Only so close: "deny claim 5, delete payment 7" asks for a deletion.
REFUSING = frozenset({"deny", "denies", "forbid", "forbids", "disallow", "disallows"})
QUANTIFIERS = frozenset({"any", "all", "every", "each"})
# Who may have done an act the request tells of rather than asks for ("we voided", "I deleted"), and the
# auxiliaries that tell of one done ("asset 220 got retired by mistake", "it was deleted", "has been voided").
SUBJECTS = frozenset({"i", "we", "you", "they", "he", "she", "someone", "somebody", "who"})
TELLING = frozenset({"got", "gotten", "was", "were", "been", "has", "have", "had"})
# An -ing form right after one of these tells of an act going on or recurring rather than asks for it: "the
# robot keeps dropping cartons", "the sync is removing rows".
DESCRIBING = frozenset({"keep", "keeps", "kept", "is", "are", "was", "were", "been", "be"})
# And one up to NEGATION_REACH words after one of these, of an act to be prevented: "stop the bot deleting
# vendors", "keep it from cancelling".
PREVENTING = frozenset({"stop", "stops", "prevent", "prevents", "from", "avoid", "avoids"})
# And one up to NEGATION_REACH words after an attempt told of ("the agent was trying to mass-delete vendors",
# "it kept attempting to void payments"): one of these right after a DESCRIBING word.
ATTEMPTING = frozenset({"trying", "attempting"})
# And one right after one of these and "to", of someone's wish told of: "the agent wants to delete vendor Kaman and
# that's not happening"; unless the request goes ahead with it (GOING_AHEAD: "customer wants to cancel PO 4410,
# please process"). An attempt that failed ("I tried to cancel it but the button is greyed out") asks for help
# with the act, and so asks for it.
WISHED = frozenset({"wants", "wanted"})
GOING_AHEAD = frozenset({"please", "pls", "ahead", "proceed", "process"})
# Words before a noun: an irreversible verb's "-s" form after one is a plural noun ("run the bulk deletes for
# vendors 12 and 13"), which may still ask.
DETERMINERS = frozenset({"the", "these", "those", "all", "any", "some", "bulk", "pending", "my", "our", "two", "three"})
# Everyday phrases in which an irreversible verb writes something instead: "drop a note on INC-4410", "drop me a
# line". The verb is followed by one of these words.
LIGHT_USES = {stem("drop"): frozenset({"a", "an", "me", "us", "him", "her", "them", "in"})}
# Words that make an irreversible verb after them the name of a feature: "set up auto-delete for contracts older
# than 7 years" asks for a setting, not a deletion.
NAMING_A_FEATURE = frozenset({"auto"})
# Verbs that also lower a level: "drop ticket 8812 from P1 down to P3", "drop ticket 4412 to P3" change a record.
# The verb says "down to", or "to" and a level (`_is_level`: "to P3", "to low"), within LOWERING_REACH words after
# it: "drop the sensor readings from 2019 to 2021" and "drop webhook 12, the endpoint is down" still delete.
LOWERING = frozenset({stem("drop")})
LOWERING_REACH = 7
# How far an irreversible handler's score moves (relative to the first result's) when the request asks for
# such an act.
ASKED_BOOST = 0.3

# A record's UUID: ranked as the number it stands for ("part 3f2a...-..." reads like "part 12"), not as the
# hexadecimal fragments the word splitter would make of it.
UUID = re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", re.IGNORECASE)
# A path or URL names something ("deny anything under finance/payment/void", "https://x.example/delete"): a verb
# in it asks for no act.
SLASHED = re.compile(r"\S+/\S+")

# Clause boundaries of a request of several acts in order.
# (semicolon, "then", a dash between spaces, a sentence end, "and" before a word)
_CLAUSES = re.compile(r"\s*(?:;|,?\s+and then\s+|,?\s+then\s+|\s[-\u2013\u2014]+\s|[.!?]+\s+(?=[A-Za-z])"
                      r"|,?\s+and\s+(?:also\s+)?(?=(?:please\s+)?[a-z]+\s))\s*", re.IGNORECASE)
# A clause needs this many terms of its own to be searched apart.
CLAUSE_MIN_TERMS = 2
# A clause is a step only when it asks for an act: it opens with a verb an operation starts with (or one of
# its synonyms), or with one of these everyday imperatives. "Contractor replaced three windows — change line
# 77321" tells, then asks: only its second clause is a step.
IMPERATIVES = frozenset(stem(w) for w in (
    "put make leave add see show tell give set take get pull find check look send move mark note log open "
    "close start stop run fix change pay book enter post order let ping confirm draft copy issue shut turn "
    "switch flip hold keep pick bring drop clear cut fill write call ask remind share attach link").split())
# Words by which a clause points back at the previous clause's record ("then resolve it").
_POINTERS = frozenset({"it", "them", "that", "this", "those", "these"})
# A conditional opening ("if it's over $300, cancel it") is no act: the act follows its comma.
CONDITIONALS = frozenset({"if", "when", "once", "unless", "after", "before", "should"})
# Words that may come before the verb of an imperative clause.
_LEADING = frozenset({"please", "now", "also", "then", "and", "just", "so", "can", "you", "could"})

# Four kinds of act a request's first act may ask for (`asked_act`) that some handlers cannot do. When the best
# handler is one of those, the request most likely asks for an act the catalog does not offer (a near miss),
# and the confidence says so (`features`).
# - A change to a record that exists ("extend the expiry on key 4", "rename agent 7"): its verbs in the form an
#   imperative takes ("changes made to persona 7" asks for a list). A handler that makes a record (CREATING) or
#   only reads does no such thing.
# - Taking an act back ("reopen PO 7702, we closed it", "un-void it", "restore the work order I deleted"):
#   only a handler whose operation takes one back (TAKING_BACK_OPERATIONS) does that, and only for its own
#   entity; cancelling, closing or reading does not, nor does reopening a ticket for "reopen PO 3310".
# - An act that cannot be undone ("wipe the stock movement history for part 7", "cancel PO 4410"): a handler
#   that creates or only reads does no such thing.
# - An everyday act that no operation is named for, nor any synonym of one (FOREIGN_ACTS: "merge WO 7710 and
#   7712", "translate this notice into Polish", "reserve 4 of part 220"): only a handler whose text (description,
#   keywords, example requests) says the verb may do it.
# And a change that lowers ("lower it back to P3", "drop ticket 8812 from P1 down to P3") is not done by a handler
# that raises (RAISING_OPERATIONS: `ticket/escalate`) either.
CHANGE, TAKE_BACK, UNDOABLE, FOREIGN = "change", "take back", "cannot be undone", "foreign"
# Everyday acts a request may ask for (stemmed). One that names no operation of the catalog, nor a synonym of one,
# asks for something the catalog does not offer; where an operation is named so (a `merge`), it is an act like any.
# Each opened requests nothing fits in the blind tuning tasks, and no matchable one.
FOREIGN_ACTS = frozenset(stem(w) for w in (
    "translate merge reserve schedule convert calculate print renew invite email").split())
# "Book" both records (the catalog's sense: "book 2x 6205 bearings against WO 4410", "book them in") and reserves
# ("book me a flight", "book conf room 14B", "book Kim a flight"): it reserves, a FOREIGN act, unless what it books
# is a count or a record pointed back at (BOOKING_GOODS, or a number, after an optional "the"). Then only a handler
# whose text says "book" and whose entity the booked words name does it ("Book a purchase order for 12 harnesses"):
# the catalog books records, and "book me a flight to Chicago for the vendor visit" books none.
RESERVING = "book"
COUNT = re.compile(r"\d+x?")  # "2", "2x"; not "4th" ("book the 4th floor conference room")
# Where the words of what is booked, written or switched off end: a preposition or a conjunction ("switch off agt_7
# so nobody can launch new runs of it": agt_7).
OBJECT_ENDS = frozenset({"for", "to", "at", "on", "with", "from", "in", "into", "against", "by", "of",
                          "so", "and", "but", "until", "till", "til", "because", "since", "while"})
BOOKING_GOODS = frozenset({"in", "out", "it", "them", "those", "these", "one", "two", "three", "four", "five"})
# So with writing: the catalog drafts records ("draft a mission 'Vendor consolidation'", "Draft an order to supplier
# 3"), and people ask for a text to be written ("draft a cover letter for the RFP", "write me a powershell
# one-liner"): only a handler whose entity the written words name does it ("write up a work order"). "Write off"
# and "write down" are other acts.
COMPOSING = frozenset({"write", "draft", "compose"})
NOT_COMPOSING = frozenset({"off", "down"})


class Act(NamedTuple):
    """What a request's first act asks for (`asked_act`): its kind, and the verb that says it."""

    kind: str
    verb: str
    # What a reserving "book" books or a text written is (`_object_terms`), as index terms ("flight" of "book me a
    # flight").
    what: tuple[str, ...] = ()

# As a request says them (an imperative's form, not stemmed).
CHANGING = frozenset(
    "update change edit modify adjust amend rename extend bump correct increase decrease lower reset".split())
TAKING_BACK = frozenset(
    "reopen restore undelete unretire reactivate revert undo reverse unrevoke unvoid uncancel recover reinstate "
    "unarchive resume unpause unblock unsuspend un".split())
# As an operation's name says them (stemmed): `createOrUpdate` changes as well as creates; `un_void`, `enable`
# and `resume` take an act back.
CREATING = frozenset(stem(w) for w in ("create", "add", "new"))
CHANGING_OPERATIONS = frozenset(stem(w) for w in (*CHANGING, "upsert", "set", "patch"))
TAKING_BACK_OPERATIONS = frozenset(stem(w) for w in (*TAKING_BACK, "enable", "activate"))
# A change that lowers (as a request says it), and operations that raise (stemmed): escalating is no lowering.
LOWERING_CHANGES = frozenset({"lower", "decrease", "reduce", "downgrade", "deescalate", "demote"})
RAISING_OPERATIONS = frozenset(stem(w) for w in ("escalate", "increase", "raise", "upgrade", "promote"))
# A change verb followed by one of these is a noun: "update on ticket 4412?", "change of plans".
_NOUN_AFTER = frozenset({"on", "about", "of", "from"})
# And after a foreign act's word: "email address for vendor Kaman?", "email for vendor 8?", "schedule for next week".
_FOREIGN_NOUN_AFTER = _NOUN_AFTER | {"address", "addresses", "for"}
# Verbs that make a record or change one: a change when their clause sets something "to" an amount, a priority or
# a level ending the clause ("raise the risk level of AI system 7 to high", "set ticket 4412 to P2"; "raise
# mission 12's budget ceiling to $800", "set the reserve to $45,000"), else not ("raise a PO to vendor 31").
CHANGING_TO_AN_AMOUNT = frozenset({"raise", "set"})
LEVELS = frozenset({"high", "higher", "low", "lower", "medium", "critical", "urgent", "normal"})
# The words of a count, stemmed: an operation named by one counts records; a request saying one asks for a number
# ("how many", "count", "tally", "total"), and so does "number of" ("the part number of part 12" does not).
COUNTING = frozenset({stem("count"), *SYNONYMS.get(stem("count"), ())})
_NUMBER = stem("number")

# The logistic model of `confidence`: intercept, then the weights of (coverage, known, cosine, relative
# score, first result, matched mass, an act asked of a handler that cannot do it, the request names the
# handler's entity for an act it can do). Fitted on the tuning
# tasks (bench/search_calibrate.py), one set per ranker: without the model there is no cosine.
CALIBRATION: dict[bool, tuple[float, ...]] = {
    True: (-11.54, 0.93, -0.34, 4.35, 6.76, 1.37, 1.01, -3.13, 0.52),
    False: (-10.28, 2.64, -0.19, 0.00, 6.35, 1.42, 0.99, -2.73, 0.77),
}
# Chosen on the tuning parts: it flags about 60 % of the requests nothing fits, and 3 % of right first answers.
NO_MATCH_BELOW = 0.35
# A clause of a request of several acts is a step when its best handler is at least this confident. Lower than
# NO_MATCH_BELOW: the other clauses have already said the request is one the catalog answers.
STEP_BELOW = 0.25


@dataclass(frozen=True, slots=True)
class Scored:
    handler: Handler
    score: float
    confidence: float
    # What the confidence was computed from (see `features`): kept for calibration (bench/search_calibrate.py).
    # A plan's first step keeps its clause's features, and may carry the whole request's confidence (`find`).
    features: tuple[float, ...] = ()


@dataclass(frozen=True, slots=True)
class Found:
    hits: list[Scored]
    ranker: str
    no_match: bool
    asks_irreversible: bool
    plan: list[Scored]


def irreversible(handler: Handler) -> bool:
    return handler.destructive or names_irreversible_act(handler.coordinate.operation)


def names_irreversible_act(operation: str) -> bool:
    """Whether an operation's name says an act that cannot be undone (`cancelOrder`, `void_payment`)."""
    return not IRREVERSIBLE_VERBS.isdisjoint(stem(w) for w in split_words(operation))


def asks_irreversible(words: Sequence[str]) -> bool:
    """Whether the request (its words, split) asks for an act that cannot be undone, and does not negate it."""
    for i, w in enumerate(words):
        if stem(w) in IRREVERSIBLE_VERBS and not _not_asked(words, i):
            return True
        if (any(tuple(words[i:i + len(p)]) == p for p in IRREVERSIBLE_PHRASES) and not _negated(words, i)
                and not _says_of_a_told_act(words, i)):
            return True
    return False


def switched_off(words: Sequence[str]) -> tuple[str, ...] | None:
    """What the request (its words, split) asks to take out of service, as index terms: the words between the verb
    and "off", or after "off" up to a preposition ("turn off the webhook for agent 17": the webhook); empty for a
    pointer back ("switch it off": the rest of the request says what). None when it asks for no such act: negated,
    told of or wished ("someone switched it off by mistake", "the agent wants to turn off endpoint 88"), or asked
    about ("did someone turn off agent 17?", "why would I turn off endpoint 88?")."""
    for i, w in enumerate(words):
        if w not in SWITCHING or "off" not in words[i + 1:i + 1 + SWITCH_OFF_REACH]:
            continue
        if _not_asked(words, i) or not QUESTIONING.isdisjoint(words[max(0, i - NEGATION_REACH):i]):
            continue
        off = words.index("off", i + 1)
        return _object_terms(words[i + 1:off] or words[off + 1:])
    return None


def _disables_what_is_named(index: SearchView, named: Sequence[str], query_terms: Sequence[str],
                            handler: Handler) -> bool:
    """Whether the handler disables what is switched off: its entity is the one the switched-off words (`named`)
    name ("switch off the old pager channel" asks nothing of `agent/disable`, nor "turn off the webhook for agent
    17"); when they name none ("switch agt_7 off", "turn it off"), the request names no other entity, and says
    more than the switching ("turn off" alone asks for nothing in particular)."""
    doc = index.document(handler)
    if not disables(handler) or doc is None:
        return False
    if named and (index.names_entity(doc, named) or index.names_another_entity(doc, named)):
        return index.names_entity(doc, named)
    return _says_more_than_switching(query_terms) and not index.names_another_entity(doc, query_terms)


def _may_disable(index: SearchView, named: Sequence[str], query_terms: Sequence[str], handler: Handler) -> bool:
    """Whether a disabling handler the ranking put first may stay first for a switching off: the switched-off words
    name no other entity than its own ("switch off agt_7 so nobody can launch new runs of it": `agent/disable`), and
    the request says more than the switching ("switch it off" alone names nothing to disable)."""
    doc = index.document(handler)
    return (disables(handler) and doc is not None and not index.names_another_entity(doc, named)
            and _says_more_than_switching(query_terms))


def _says_more_than_switching(query_terms: Sequence[str]) -> bool:
    """Whether the request's terms say more than "turn", "switch" or "shut" and "off"."""
    return not SWITCHING_TERMS.issuperset(query_terms)


def disables(handler: Handler) -> bool:
    """Whether the handler's operation takes something out of service: `disable`, `deactivate`."""
    words = operation_words(handler.coordinate.operation)
    return bool(words) and words[0] in DISABLING


def _says_of_a_told_act(words: Sequence[str], i: int) -> bool:
    """Whether the irreversible phrase at `i` ("permanently", "for good") qualifies an irreversible verb next to it
    that is told of rather than asked: "I permanently deleted doc 901 yesterday, can you bring it back?"."""
    near = range(max(0, i - PHRASE_REACH), min(len(words), i + PHRASE_REACH + 1))
    verbs = [j for j in near if j != i and stem(words[j]) in IRREVERSIBLE_VERBS]
    return bool(verbs) and all(_not_asked(words, j) for j in verbs)


def _asks_irreversible_in(text: str) -> bool:
    """`asks_irreversible` of a request or one of its clauses, paths and URLs left out (`SLASHED`)."""
    return asks_irreversible(split_words(SLASHED.sub(" ", text)))


def _negated(words: Sequence[str], i: int) -> bool:
    if _negated_here(words, i):
        return True
    return i >= 2 and words[i - 1] in _ALTERNATIVE and _negated_here(words, i - 2)  # "nobody can archive or delete"


def _negated_here(words: Sequence[str], i: int) -> bool:
    """A negation within NEGATION_REACH words before the word at `i`."""
    reach = range(max(0, i - NEGATION_REACH), i)
    if any(words[j] in NEGATIONS or (words[j] in NOBODY and j + 1 < len(words) and words[j + 1] in MODALS)
           for j in reach):
        return True
    j = _before_quantifiers(words, i - 1)
    if j >= 0 and words[j] in REFUSING:
        return True
    # One word naming what between ("deny payment void", "forbid any vendor deletes"); not a number, so that "deny
    # claim 5, delete payment 7" still asks for the deletion.
    k = _before_quantifiers(words, j - 1) if j >= 1 and words[j].isalpha() and words[j] not in STOPWORDS else -1
    return k >= 0 and words[k] in REFUSING


def _before_quantifiers(words: Sequence[str], j: int) -> int:
    """The position of the first word at or before `j` that is no quantifier ("any", "all" ...); -1 if none."""
    while j >= 0 and words[j] in QUANTIFIERS:
        j -= 1
    return j


def _not_asked(words: Sequence[str], i: int) -> bool:
    """Whether the verb at `i` is negated, tells what someone did ("we voided it by mistake", "the webhook I
    deleted": a past tense after its subject, or opening the request: "deleted doc 90 by mistake"; "got retired": a
    participle after an auxiliary), what is going on, to be prevented, was attempted or is someone's wish ("keeps
    dropping", "stop it deleting", "was trying to delete", "the agent wants to delete": `DESCRIBING`, `PREVENTING`,
    `ATTEMPTING`, `WISHED`), is a noun or tells in the "-s" form (`_noun_before_a_modal`, `_third_person`), is used
    lightly ("drop a note": `LIGHT_USES`), names a feature ("auto-delete": `NAMING_A_FEATURE`) or lowers a level
    (`LOWERING`)."""
    word, before = words[i], words[i - 1] if i > 0 else ""
    light = LIGHT_USES.get(stem(word))
    reach = range(max(1, i - NEGATION_REACH), i)
    # An adverb between the subject and a past tense ("I permanently deleted doc 901") leaves it told.
    teller = words[i - 2] if i >= 2 and before.endswith("ly") else before
    return (_negated(words, i) or (word.endswith("ed") and (i == 0 or teller in SUBJECTS or teller in TELLING))
            or (word.endswith("ing") and (before in DESCRIBING
                                          or not PREVENTING.isdisjoint(words[max(0, i - NEGATION_REACH):i])))
            or any(words[j] in ATTEMPTING and words[j - 1] in DESCRIBING for j in reach)
            or (before == "to" and i >= 2 and words[i - 2] in WISHED and GOING_AHEAD.isdisjoint(words))
            or _noun_before_a_modal(words, i) or _third_person(words, i)
            or (light is not None and i + 1 < len(words) and words[i + 1] in light)
            or before in NAMING_A_FEATURE or _lowering(words, i))


def _noun_before_a_modal(words: Sequence[str], i: int) -> bool:
    """Whether the word at `i` is a noun, the subject of a modal after it, after a noun of its own: "any payment
    void should need human sign-off". Not after a word that opens a request or asks ("please delete - should be
    safe", "can you cancel? would help"), nor opening it ("revoke Will's API key", "remove May from the rota")."""
    before = words[i - 1] if i > 0 else ""
    return (i + 1 < len(words) and words[i + 1] in MODALS and bool(before)
            and before not in STOPWORDS and before not in _LEADING)


def _third_person(words: Sequence[str], i: int) -> bool:
    """Whether an irreversible verb is in its "-s" form, which tells of someone's act and never asks for one:
    "before anyone voids anything, what's the status of invoice 5530?", "the sync deletes rows it should keep";
    after a determiner it is a plural noun instead ("run the bulk deletes")."""
    word = words[i]
    return word.endswith("s") and word not in IRREVERSIBLE_BASE and (i == 0 or words[i - 1] not in DETERMINERS)


def _lowering(words: Sequence[str], i: int) -> bool:
    """Whether the word at `i` is a LOWERING verb saying where a level goes."""
    return stem(words[i]) in LOWERING and _lowers(words[i + 1:i + 1 + LOWERING_REACH])


def _lowers(after: Sequence[str]) -> bool:
    """Whether the words after a LOWERING verb say where a level goes: "down to", or "to" and a level ("to P3")."""
    return any(w == "to" and ((k > 0 and after[k - 1] == "down") or (k + 1 < len(after) and _is_level(after[k + 1])))
               for k, w in enumerate(after))


def features(index: SearchView, hit: Hit, query_terms: Sequence[str], known: float, mass: float, best: float,
             cosines: np.ndarray | None, first: bool, act: Act | None) -> tuple[float, ...]:
    """(coverage, known, cosine, relative score, first place, matched mass, cannot, named): see the module's
    docstring.
    `mass` is the request's words' idf in units of the rarest possible word: coverage times it says how much
    the handler matched in absolute terms (two rare words said outweigh one common word said). `act`: what the
    request's first act asks for (`asked_act`); cannot is 1 when this handler cannot do it (a handler that takes
    acts back cannot take one back for an entity the request names instead of its own). named is 1 when the
    request names the handler's entity (its name, a keyword it shares, or a synonym) and cannot is 0: "convert
    4,500 EUR to USD" names no purchase order, however near its words and their embedding come."""
    doc = index.document(hit.handler)
    coverage = 0.0 if doc is None else index.coverage(doc, query_terms)
    cosine = 0.0 if cosines is None or doc is None else float(cosines[doc])
    relative = hit.score / best if best > 0 else 0.0
    cannot = act is not None and (
        (act.kind in (CHANGE, UNDOABLE) and changes_no_existing_record(hit.handler))
        or (act.kind == CHANGE and act.verb in LOWERING_CHANGES and raises(hit.handler))
        or (act.kind == FOREIGN and (doc is None or not _does_foreign_act(index, doc, act)))
        or (act.kind == TAKE_BACK and (not takes_back(hit.handler, act.verb)
                                       or (doc is not None and index.names_another_entity(doc, query_terms)))))
    named = doc is not None and not cannot and index.names_entity(doc, query_terms)
    return (coverage, known, cosine, relative, float(first), coverage * mass, float(cannot), float(named))


def _does_foreign_act(index: SearchView, doc: int, act: Act) -> bool:
    """Whether the handler (its document) may do a FOREIGN act: its text says the verb, and for a reserving "book"
    what is booked names its entity ("book a purchase order for 12 harnesses"; not a thing its text merely says:
    `purchase_order/create`'s examples say "book" and "weeks", and "book me two weeks of vacation" is no order).
    A text written needs only its entity named ("write up a work order for pump 4")."""
    if act.verb in COMPOSING:
        return index.names_entity(doc, act.what)
    return index.says(doc, stem(act.verb)) and (act.verb != RESERVING or index.names_entity(doc, act.what))


def changes_no_existing_record(handler: Handler) -> bool:
    """Whether the handler changes no record that exists: it only reads, or it only makes a new one
    (`createOrUpdate` changes one too)."""
    words = operation_words(handler.coordinate.operation)
    return handler.read_only or (bool(words) and words[0] in CREATING
                                 and CHANGING_OPERATIONS.isdisjoint(words))


def raises(handler: Handler) -> bool:
    """Whether the handler's operation raises a level: `escalate` ..."""
    words = operation_words(handler.coordinate.operation)
    return bool(words) and words[0] in RAISING_OPERATIONS


def changes_a_record(handler: Handler) -> bool:
    """Whether the handler's operation is named for changing a record: update, edit, set, upsert ..."""
    return not CHANGING_OPERATIONS.isdisjoint(operation_words(handler.coordinate.operation))


def counts_records(handler: Handler) -> bool:
    """Whether the handler's operation is a count: `count`, `tally` ..."""
    words = operation_words(handler.coordinate.operation)
    return len(words) == 1 and words[0] in COUNTING


def takes_back(handler: Handler, verb: str) -> bool:
    """Whether the handler takes an act back: its operation says so (reopen, restore, enable, un_void ...), or
    its description says the request's verb as said ("Start work on an open work order (or resume one on
    hold)"), and it is not itself irreversible (`payment/void`: "a paid invoice reopens as approved")."""
    words = operation_words(handler.coordinate.operation)
    if words and words[0] in TAKING_BACK_OPERATIONS:
        return True
    return not irreversible(handler) and verb in _description_words(handler.description)


@lru_cache(maxsize=4096)
def _description_words(description: str) -> frozenset[str]:
    return frozenset(split_words(description))


def asked_act(index: SearchView, query: str) -> Act | None:
    """A CHANGE, TAKE_BACK, UNDOABLE or FOREIGN act when the request's first act asks for one: the first clause that
    opens with a verb (after "please", "could you" ...) opens with one of CHANGING, TAKING_BACK, IRREVERSIBLE_VERBS
    or FOREIGN_ACTS ("on claim 6611, please change the CPT" asks for a change; "add a line, then change the
    quantity" does not; nor does a noun, "update on ticket 4412?", or a light use, "drop a note"). A clause that
    opens with a past tense ("deleted doc 90 by mistake") or names a record ("ticket 4401 was escalated") is read
    past. None otherwise."""
    for clause in clause_words(query):
        opening = [w for w in clause if w not in _LEADING][:2]
        if not opening:
            continue
        verb = opening[0]
        if _past_tense(verb):
            continue  # "deleted doc 90 by mistake, restore it": the first clause tells, the second asks
        if verb in CHANGING:
            return None if opening[1:] and opening[1] in _NOUN_AFTER else Act(CHANGE, verb)
        if verb in CHANGING_TO_AN_AMOUNT and opening[1:] != ["up"] and _to_an_amount_or_level(clause):
            return Act(CHANGE, verb)
        if verb in TAKING_BACK:
            return Act(TAKE_BACK, verb)
        if stem(verb) in IRREVERSIBLE_VERBS:
            return None if _not_asked(clause, clause.index(verb)) else Act(UNDOABLE, verb)
        after = clause[clause.index(verb) + 1:]
        if (verb == RESERVING and not _books_goods(after)) or (verb in COMPOSING and _composes(after)):
            return Act(FOREIGN, verb, _object_terms(after))
        if stem(verb) in FOREIGN_ACTS and not _is_act(index, stem(verb)):
            # "reserve on claim 6611?", "schedule of PMs" name a thing; "schedule Maria for PT" asks.
            return None if opening[1:] and opening[1] in _FOREIGN_NOUN_AFTER else Act(FOREIGN, verb)
        if _is_act(index, stem(verb)) and not _names_a_record(index, opening):
            return None
    return None


def _books_goods(after: Sequence[str]) -> bool:
    """Whether the words after "book" say goods booked: a count or a pointer back, after an optional "the"."""
    after = list(after[1:] if after[:1] == ["the"] else after)
    return bool(after) and (after[0] in BOOKING_GOODS or COUNT.fullmatch(after[0]) is not None)


def _composes(after: Sequence[str]) -> bool:
    """Whether the words after "write" or "draft" ask for a text: not another act ("write off"), nor a record a
    draft names ("Draft CLM-10500 was keyed in by mistake", "draft 8801 was keyed twice, void it")."""
    return not NOT_COMPOSING.intersection(after[:1]) and not any(w[:1].isdigit() for w in after[:2])


def _object_terms(after: Sequence[str]) -> tuple[str, ...]:
    """The index terms of what is booked, written or switched off: the words after the verb up to the first
    preposition ("a purchase order" of "book a purchase order for 12 harnesses", "me a flight" of "book me a flight
    to Chicago for the vendor visit"), less numbers and fragments ("conf room 14B": conf, room)."""
    end = next((k for k, w in enumerate(after) if w in OBJECT_ENDS), len(after))
    return tuple(t for t in request_terms(" ".join(after[:end])) if t.isalpha() and len(t) > 2)


def _names_a_record(index: SearchView, opening: Sequence[str]) -> bool:
    """Whether a clause's opening words name a record ("ticket 4401 was escalated by mistake"): a word that is
    neither an operation's verb nor an everyday imperative, only a synonym of one ("ticket", of "issue"), then a
    number."""
    verb = stem(opening[0])
    return (len(opening) > 1 and opening[1][:1].isdigit()
            and verb not in index.operation_verbs and verb not in IMPERATIVES)


def calibrated(values: Sequence[float], with_model: bool) -> float:
    intercept, *weights = CALIBRATION[with_model]
    z = intercept + sum(w * v for w, v in zip(weights, values, strict=True))
    return 1.0 / (1.0 + math.exp(-z))


def find(index: SearchView, query: str, visible: tuple[Handler, ...], *, limit: int, rerank: bool = True,
         accept: Callable[[Handler], bool] | None = None, plan: bool = True) -> Found:
    # Read as plain letters by both the word index and the sentence model (a full-width request is the same one).
    query = without_quoted_values(UUID.sub("1", plain_letters(query)))
    words = split_words(query)
    asked = _asks_irreversible_in(query)
    query = without_negated_acts(query, words)
    hits, ranker = _ordered(index, query, visible, limit=limit, rerank=rerank, accept=accept, asked=asked)
    steps = _plan(index, query, visible, rerank=rerank, accept=accept) if plan else []
    if steps:
        # The plan answers the request as a whole: its first step is as credible as the better of its own
        # clause's reading and the whole request's (whose best handler is often a later step).
        first = steps[0]
        confidence = max(first.confidence, hits[0].confidence if hits else 0.0)
        hits = [Scored(first.handler, hits[0].score if hits else first.score, confidence, first.features),
                *(h for h in hits if h.handler.path != first.handler.path)]
    hits = hits[:limit]
    no_match = not hits or hits[0].confidence < NO_MATCH_BELOW
    return Found(hits, ranker, no_match, asked, steps)


def without_negated_acts(query: str, words: Sequence[str]) -> str:
    """The request without the irreversible verbs it negates or tells of (`_not_asked`): "pause plan 88 but don't
    delete it" asks for no deletion, and the word must not pull the delete handlers up. A verb also asked for
    elsewhere in the request stays ("don't delete 4, delete 5")."""
    acts = [(w, _not_asked(words, i)) for i, w in enumerate(words) if stem(w) in IRREVERSIBLE_VERBS]
    not_asked = {w for w, refused in acts if refused} - {w for w, refused in acts if not refused}
    if not not_asked:
        return query
    # A verb that lowers a level ("drop ticket 8812 from P1 down to P3") is read as the change it asks for.
    lowering = {w for i, w in enumerate(words) if w in not_asked and _lowering(words, i)}
    left = re.sub(r"\b(?:" + "|".join(map(re.escape, sorted(not_asked))) + r")\b",
                  lambda m: "lower" if m.group(0).lower() in lowering else " ", query, flags=re.IGNORECASE)
    return left if request_terms(left) else query


def _ordered(index: SearchView, query: str, visible: tuple[Handler, ...], *, limit: int, rerank: bool,
             accept: Callable[[Handler], bool] | None, asked: bool) -> tuple[list[Scored], str]:
    query_terms = list(dict.fromkeys(request_terms(query)))
    cosines = index.cosines(query) if rerank and query_terms else None
    hits, ranker = index.ranked(query, visible, limit=max(limit, POOL), rerank=rerank, accept=accept,
                                cosines=cosines)
    if not hits:
        return [], ranker
    top = hits[0].score
    named = None if asked else switched_off(split_words(query))
    disabling = partial(_disables_what_is_named, index, named or (), query_terms)
    if asked or named is not None:
        raised = irreversible if asked else disabling
        hits = sorted((Hit(h.handler, h.score + ASKED_BOOST * top) if raised(h.handler) else h
                       for h in hits), key=lambda h: -h.score)
    if not asked and irreversible(hits[0].handler) and not (
            named is not None and _may_disable(index, named, query_terms, hits[0].handler)):
        # Stable: the first reversible handler moves up to first; the rest keep their order.
        safe = next((i for i, h in enumerate(hits) if not irreversible(h.handler)), None)
        if safe is not None:
            hits = _first(hits, safe)
    act = asked_act(index, query)
    if act is not None and act.kind == CHANGE and changes_no_existing_record(hits[0].handler):
        # A change asked of the first result's entity: its handler named for changing a record (update, edit,
        # set ...) moves up to first, when it is among the candidates ("vendor 40 agreed new terms, change their
        # payment terms" read `vendor/create` first on the words of the terms). Another act of the entity
        # (`mission/start`) is no change asked for.
        entity = _same_entity(hits[0].handler, None)
        change = next((i for i, h in enumerate(hits) if entity(h.handler) and changes_a_record(h.handler)
                       and not irreversible(h.handler)), None)
        if change is not None:
            hits = _first(hits, change)
    if counts_records(hits[0].handler) and not _asks_a_number(query, query_terms):
        # A count answers a request for a number only: "which POs are still open", "show me the failed calls"
        # want the records, and the first result that does not count them moves up to first.
        records = next((i for i, h in enumerate(hits) if not counts_records(h.handler)
                        and (asked or not irreversible(h.handler))), None)
        if records is not None:
            hits = _first(hits, records, score=hits[0].score)
    with_model = ranker == SEMANTIC_RERANK and cosines is not None
    known = index.known(query_terms)
    mass = sum(index.idf.get(t, index.unknown_idf) for t in query_terms) / index.unknown_idf
    best = max(h.score for h in hits)
    scored = []
    for i, h in enumerate(hits):
        values = features(index, h, query_terms, known, mass, best, cosines, i == 0, act)
        scored.append(Scored(h.handler, h.score, calibrated(values, with_model), values))
    return scored, ranker


def _first(hits: list[Hit], i: int, *, score: float | None = None) -> list[Hit]:
    """The hits with the i-th moved up to first (with `score` when given); the rest keep their order."""
    moved = hits[i] if score is None else Hit(hits[i].handler, score)
    return [moved, *hits[:i], *hits[i + 1:]]


def _same_entity(handler: Handler, accept: Callable[[Handler], bool] | None) -> Callable[[Handler], bool]:
    app, entity = handler.coordinate.app, handler.coordinate.entity
    return lambda h: (h.coordinate.app == app and h.coordinate.entity == entity
                      and (accept is None or accept(h)))


def _says_the_operation(clause: str, accept: Callable[[Handler], bool] | None) -> Callable[[Handler], bool]:
    """The handlers whose operation's name the clause says in full, each word itself or by a synonym ("mark it
    down": `markDown`; "mark it received": `receive`, not `markRead`)."""
    said = {stem(w) for w in split_words(clause)}

    def says(h: Handler) -> bool:
        words = [w for w in operation_words(h.coordinate.operation) if w not in STOPWORDS]
        return (bool(words) and all(w in said or not SYNONYMS.get(w, frozenset()).isdisjoint(said) for w in words)
                and (accept is None or accept(h)))
    return says


def _asks_an_act(index: SearchView, clause: str) -> bool:
    opening = split_words(clause)[:1]
    if opening and opening[0] in CONDITIONALS and "," in clause:
        clause = clause.split(",", 1)[1]
    words = [w for w in split_words(clause) if w not in _LEADING]
    if not words or _past_tense(words[0]):
        return False  # "pulled 4 of part 5531 for WO 90412" tells what was done
    return _is_act(index, stem(words[0]))


def _past_tense(word: str) -> bool:
    """A verb's past form, by its ending: "pulled", "closed" (not "need", "proceed", "shred" or "embed")."""
    return (len(word) > 4 and word.endswith("ed") and not word.endswith("eed")
            and word not in _ED_BUT_PRESENT)


# Verbs whose present form ends in -ed (those in -eed aside).
_ED_BUT_PRESENT = frozenset({"shred", "embed"})


def _asks_a_number(query: str, query_terms: Sequence[str]) -> bool:
    """Whether the request asks how many: "how many", "count", "tally", "total", or "the number of" (not "the
    part number of part 12")."""
    if not (COUNTING - {_NUMBER}).isdisjoint(query_terms):
        return True
    words = ["", *split_words(query)]
    return _NUMBER in query_terms and any(
        words[i:i + 2] == ["number", "of"] and words[i - 1] in _BEFORE_A_COUNT for i in range(1, len(words)))


# What comes before "number of" when it asks for a count: the start of the request, "the", "total".
_BEFORE_A_COUNT = frozenset({"", "the", "total"})


def _to_an_amount_or_level(words: Sequence[str]) -> bool:
    """Whether the clause's words say "to" and then a number (the currency sign of "to $800" is no word), a priority,
    or a level that ends the clause ("to high"; not "set up an alert to high-value customers")."""
    last = len(words) - 1
    return any(w == "to" and (words[i + 1][:1].isdigit() or _PRIORITY.fullmatch(words[i + 1]) is not None
                              or (words[i + 1] in LEVELS and i + 1 == last))
               for i, w in enumerate(words[:-1]))


def _is_level(word: str) -> bool:
    """A priority ("p3") or a level word ("low")."""
    return _PRIORITY.fullmatch(word) is not None or word in LEVELS


_PRIORITY = re.compile(r"p\d+")


def _is_act(index: SearchView, verb: str) -> bool:
    """Whether a (stemmed) word opening a clause asks for an act: an operation's verb, a synonym of one, or an
    everyday imperative."""
    return (verb in index.operation_verbs or verb in IMPERATIVES
            or not SYNONYMS.get(verb, frozenset()).isdisjoint(index.operation_verbs))


def clauses(query: str) -> list[str]:
    """The request's clauses, in order, when it reads as several acts; one element otherwise."""
    parts = [p.strip(" ,.") for part in _CLAUSES.split(query) for p in _comma_clauses(part)]
    parts = [p for p in parts if len(request_terms(p)) >= CLAUSE_MIN_TERMS or (request_terms(p) and _points_back(p))]
    return parts if len(parts) > 1 else [query]


def _comma_clauses(part: str) -> list[str]:
    """A part split at its commas where an everyday imperative follows ("make a corrected draft from it, add a
    line"); a comma before anything else ("for patient 443, payer 12") stays within the clause."""
    pieces: list[str] = []
    for piece in part.split(","):
        words = [w for w in split_words(piece) if w not in _LEADING]
        if pieces and not (words and stem(words[0]) in IMPERATIVES):
            pieces[-1] += "," + piece
        else:
            pieces.append(piece)
    return pieces


def _points_back(clause: str) -> bool:
    """Whether the clause points back at a record named before ("close it"): its verb alone is then an act."""
    return not _POINTERS.isdisjoint(split_words(clause))


def _plan(index: SearchView, query: str, visible: tuple[Handler, ...], *, rerank: bool,
          accept: Callable[[Handler], bool] | None) -> list[Scored]:
    parts = clauses(query)
    if len(parts) < 2:
        return []
    steps: list[Scored] = []
    told: list[str] = []  # the clauses before this one
    for part in parts:
        before, told = " ".join(told), [*told, part]
        if not _asks_an_act(index, part):
            continue
        asked = _asks_irreversible_in(part)
        hits: list[Scored] = []
        if steps and _points_back(part):
            # "..., cancel it": the clause points back at the previous step's record; its entity's handlers
            # answer first, if one does confidently.
            hits, _ = _ordered(index, part, visible, limit=1, rerank=rerank,
                               accept=_same_entity(steps[-1].handler, accept), asked=asked)
        elif before and _points_back(part):
            # With no step before it, at a record the clauses before it tell of ("Agent instance 9021 is looping -
            # cancel it"): the clause is read with them, among the handlers whose operation it says.
            hits, _ = _ordered(index, f"{before}. {part}", visible, limit=1, rerank=rerank,
                               accept=_says_the_operation(part, accept), asked=asked)
        if not hits or hits[0].confidence < STEP_BELOW:
            hits, _ = _ordered(index, part, visible, limit=1, rerank=rerank, accept=accept, asked=asked)
        if not hits or hits[0].confidence < STEP_BELOW:
            continue  # a clause that finds nothing confidently ("12,480 h", "record both") is no step
        if all(s.handler.path != hits[0].handler.path for s in steps):
            steps.append(hits[0])
    return steps if len(steps) > 1 else []
