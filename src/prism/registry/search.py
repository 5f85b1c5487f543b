"""Capability search: a BM25 inverted index over the handler tree, built once per registry.

The vocabulary of a handler tree is small, technical and mostly spelled out in coordinates,
descriptions and declared keywords, so a lexical ranker with light stemming and a synonym table
finds the right handler without loading any model, in well under a millisecond per query.

Each handler is one document whose fields carry different weights (an operation or entity name says
more than a word deep in a description) — a simplified BM25F: weighted term frequencies, one length
normalisation. Every posting stores its finished BM25 contribution, so a query only adds numbers.
A handler's keywords include those its entity shares (see `entity_keywords`), and a query word counts
once per handler, by its best match among itself and its synonyms (see `SearchIndex.concept_postings`).
The request's shape (see `QueryShape`) then raises the entity's list, count, breakdown or read the request asks
for without naming it ("which machines...", "how many tickets", "tickets by priority", "alert 123"), found
through a small index.

`rerank` is a second, finer pass over the top candidates. Its lexical part scores each (query, handler)
pair jointly — term coverage, matching word pairs, proximity of the matched words, exact coordinate
mentions, how much of the operation's name the request says (its intent: the first pass finds the entity,
the operation decides among its handlers), the request's shape and, for a question, whether the handler
only reads. When the
optional `semantic` extra is installed (registry/semantic.py), the candidates are the lexical best plus
the handlers whose embedding is nearest the query's, and each one's score is the lexical score (relative
to the best) plus SEMANTIC_WEIGHT times its cosine (min-max scaled over the candidates): the embedding
finds handlers described in other words than the query's, the lexical score keeps exact matches first.
Without the extra the pass is lexical alone.
"""

from __future__ import annotations

import asyncio
import heapq
import re
import threading
import unicodedata
from collections.abc import Callable, Container, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import lru_cache, partial
from itertools import pairwise
from typing import TYPE_CHECKING
from weakref import WeakKeyDictionary

from prism.kit.lru import LRU
from prism.registry import semantic
from prism.registry.corpus import BUILT_IN, Corpus
from prism.registry.model import Handler
from prism.registry.postings import CACHED_POSTINGS, KeptDicts, Postings
from prism.registry.registry import Registry
from prism.registry.schema_reading import keywords_of, mapping_of

if TYPE_CHECKING:
    import numpy as np

K1 = 1.2
# BM25's length normalisation, nearly off: a handler's text is long because it is well described (its example
# requests, its keywords), not because it is wordy, and among thousands of one-line descriptions sharing a
# request's common word (tests/test_search_at_scale.py) normalising by length ranks the bare ones first.
B = 0.1
SYNONYM_WEIGHT = 0.4
RERANK_POOL = 50
# Documents whose rerank features (`_Joint`) are kept between queries.
JOINT_CACHE = 1024
# The rerank's weights, down to EXACT_W below, are fitted on the blind tuning tasks only, never losing a result the
# tests hold (bench/search_fit.py, which checks each fit on a task set it did not see; bench/README.md).
# How much the joint (query, handler) features of the lexical rerank count against the first-pass score,
# relative to the best.
PAIR_WEIGHT = 0.375
# The semantic part of rerank: how many handlers the embedding adds to the lexical candidates, and how
# much its scaled cosine counts against the lexical score.
SEMANTIC_POOL = 20
SEMANTIC_WEIGHT = 0.4
# How much the operation intent counts (see `_operation_intent`): what the request asks to do, matched
# against the operation's name, tells apart the handlers of one entity.
INTENT_WEIGHT = 1.125
INTENT_SYNONYM = 0.931
# A question ("what ...", "how many ...", "is there ...?") asks to be told something: read-only handlers
# answer it, and count this much more (a request to act names its operation, which INTENT_WEIGHT rewards).
QUESTION_WEIGHT = 1.592
QUESTION_WORDS = frozenset(
    "what which how who whose whom where when why is are was were do does did has have".split())
# How much the shape of the request counts (see `QueryShape`): an entity named in the plural asks for a list
# of its records (after "how many", their count), one named with a number after it ("case 88", "PO #881")
# for that one record. In the first pass, the query word that names the entity counts 1 + FIRST_PASS_SHAPE
# times for the handler the shape points at.
SHAPE_WEIGHT = 0.3
FIRST_PASS_SHAPE = 1.0
# The joint features of the lexical rerank (see `_pair_score`), each in [0, 1], and what each counts: the share
# of the request's words the handler says, its word pairs, the words naming its operation or entity, how close
# together the matched words sit, an exact mention of its coordinate.
COVERAGE_W, PAIRS_W, NAMES_W, PROXIMITY_W, EXACT_W = 0.8, 1.177, 0.266, 0.798, 1.5

FIRST_PASS, LEXICAL_RERANK, SEMANTIC_RERANK = "bm25", "bm25+lexical-rerank", "bm25+semantic-rerank"

# Field weights: the coordinate names a handler, its description only talks about it.
OPERATION_W, ENTITY_W, APP_W, MEGA_W, KEYWORD_W, DESCRIPTION_W, APP_DESCRIPTION_W = 3.0, 2.5, 1.5, 1.0, 2.0, 1.0, 0.5
PARAMETER_W = 0.2  # parameters say what a handler takes, not what it does: the weakest evidence
EXAMPLE_W = 0.5  # example requests (`Handler.examples`) say it in the caller's words, several times over

# Where a word starts inside camel case: `agingAp` (after a lower-case letter or digit) and `HTTPServer` (before
# the last capital of a run followed by two lower-case letters or more: `POs` and `APIs` are plural acronyms, not
# "P Os"). Zero-width, so the space is inserted without a template.
_CAMEL_BOUNDARY = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z]{2})")
_WORD = re.compile(r"[a-z0-9]+")

# "all" is not one: it tells `markAllRead` from `markRead`, and "all the tickets" asks for a list. "now" and
# "just" say when, not what ("approve it now" is no `payInFull`, whose keywords say "pay invoice now").
STOPWORDS = frozenset(
    "a an the of for to in on by with and or at from per as is are be been do does can could should would "
    "i me my we our you your it its this that these those please want need some any there which what "
    "how whom when where into about now just today tomorrow yesterday tonight s t ll re ve d m".split())

from prism.registry.thesaurus import SYNONYM_GROUPS  # noqa: E402


def split_words(text: str) -> list[str]:
    """`agingApSummary` → aging ap summary; `spare_parts` → spare parts; lower case. Text that is not ASCII is read
    as its plain letters first (`plain_letters`), so a request reads alike however its letters are encoded."""
    text = plain_letters(text)
    lowered = text.lower()
    if lowered != text:  # only mixed case can hide word boundaries
        lowered = _CAMEL_BOUNDARY.sub(" ", text).lower()
    return _WORD.findall(lowered)


def plain_letters(text: str) -> str:
    """Full-width letters (as CJK input methods type them) and ligatures as plain ones (NFKC), invisible format
    characters (a soft hyphen inside a word) dropped, and accents and other combining marks taken off their
    letters (`İ` is `I`, `café` is `cafe`), case kept for the camel-case split. ASCII text is returned as it is."""
    if text.isascii():
        return text
    composed = "".join(c for c in unicodedata.normalize("NFKC", text) if unicodedata.category(c) != "Cf")
    return "".join(c for c in unicodedata.normalize("NFKD", composed) if not unicodedata.combining(c))


_UNDOUBLE_EXEMPT = frozenset("lsz")


# British spellings and their American forms ("catalogue", "organise", "colour", "centre", "cancelled"): a
# request may use either, the handler text the other. Applied on both sides, so a word wrongly caught ("promise"
# → "promize", "compelled" → "compeled") still matches itself.
_SPELLING = (("ogues", "ogs"), ("ogue", "og"), ("isation", "ization"), ("ising", "izing"), ("ised", "ized"),
             ("ises", "izes"), ("ise", "ize"), ("yse", "yze"), ("yses", "yzes"), ("ysed", "yzed"),
             ("ysing", "yzing"), ("ours", "ors"), ("our", "or"), ("tres", "ters"), ("tre", "ter"),
             ("elled", "eled"), ("elling", "eling"))


def _american(word: str) -> str:
    if len(word) < 6:  # "tour", "house": too short to be one of these spellings
        return word
    for british, american in _SPELLING:
        if word.endswith(british):
            return word[:-len(british)] + american
    return word


# Abbreviations of business records, spelled out (on both sides, like the spellings above): "WO-5531", "open POs",
# "doc 1007". A two-word record keeps the word that tells it from the others ("purchase", "work": both are orders).
ABBREVIATIONS = {"doc": "document", "docs": "document", "po": "purchase", "pos": "purchase", "wo": "work",
                 "wos": "work", "inv": "invoice", "qty": "quantity", "tix": "ticket"}


# Words longer than this are stemmed without being cached: no word of a catalog is, and a request's made-up ones
# (up to 500 characters each) would fill the cache with client text.
LONGEST_CACHED_WORD = 32


def stem(word: str) -> str:
    """A light suffix stripper in the spirit of Porter's step 1: plurals, -ing, -ed, final -e.

    It only has to map a word and its inflections to one form, the same on both sides of the index.
    """
    return _cached_stem(word) if len(word) <= LONGEST_CACHED_WORD else _stem(word)


@lru_cache(maxsize=65536)
def _cached_stem(word: str) -> str:
    return _stem(word)


def _stem(word: str) -> str:
    if word in ABBREVIATIONS:
        return stem(ABBREVIATIONS[word])
    w = _american(word)
    if len(w) <= 3 or not w.isalpha():
        return w
    if w.endswith("ies") and len(w) > 4:
        w = w[:-3] + "y"
    elif w.endswith(("sses", "xes", "ches", "shes", "zes")):
        w = w[:-2]
    elif w.endswith("s") and not w.endswith(("ss", "us", "is")):
        w = w[:-1]
    for suffix, min_len in (("ing", 6), ("ed", 5)):
        if w.endswith(suffix) and len(w) >= min_len:
            w = w[:-len(suffix)]
            if len(w) > 2 and w[-1] == w[-2] and w[-1] not in _UNDOUBLE_EXEMPT and w[-1] not in "aeiou":
                w = w[:-1]
            break
    if w.endswith("e") and len(w) >= 5:
        w = w[:-1]
    return w


@lru_cache(maxsize=65536)
def terms(text: str) -> tuple[str, ...]:
    """The index terms of a catalog's text, cached: coordinate parts, app descriptions and keywords repeat across
    thousands of handlers. A request's text goes to `request_terms`: cached, every distinct request would stay."""
    return request_terms(text)


def request_terms(text: str) -> tuple[str, ...]:
    """The index terms of a text: its words, stop words left out, stemmed."""
    return tuple(stem(w) for w in split_words(text) if w not in STOPWORDS)


def _synonym_table() -> dict[str, frozenset[str]]:
    table: dict[str, set[str]] = {}
    for group in SYNONYM_GROUPS:
        stems = {stem(w) for w in group}
        for s in stems:
            table.setdefault(s, set()).update(stems - {s})
    return {k: frozenset(v) for k, v in table.items()}


SYNONYMS = _synonym_table()


# A keyword declared by at least this share of an entity's handlers (and by two) names the entity itself.
ENTITY_KEYWORD_SHARE = 1 / 3

# Separates keyword phrases so that the rerank pass never pairs the last word of one with the next.
_BREAK = "|"


def entity_keywords(handlers: Iterable[Handler]) -> dict[tuple[str, str], tuple[str, ...]]:
    """What each entity is called, per (app, entity): the keywords many of its handlers declare.

    An app usually names an entity's synonyms ("incident", "supplier") on its standard handlers only; a
    workflow handler of the same entity (`ticket/assign`) declares what it does instead. Sharing the
    entity's words with all its handlers lets a request in those words reach the workflow too.
    """
    groups: dict[tuple[str, str], list[Handler]] = {}
    for h in handlers:
        groups.setdefault((h.coordinate.app, h.coordinate.entity), []).append(h)
    shared: dict[tuple[str, str], tuple[str, ...]] = {}
    for key, members in groups.items():
        counts: dict[str, int] = {}
        for h in members:
            for k in dict.fromkeys(h.keywords):
                counts[k] = counts.get(k, 0) + 1
        shared[key] = tuple(k for k, n in counts.items() if n >= max(2, ENTITY_KEYWORD_SHARE * len(members)))
    return shared


def handler_keywords(handler: Handler, entity_words: dict[tuple[str, str], tuple[str, ...]]) -> tuple[str, ...]:
    """The handler's own keywords, then its entity's that it does not declare itself."""
    own = handler.keywords
    inherited = entity_words.get((handler.coordinate.app, handler.coordinate.entity), ())
    return (*own, *(k for k in inherited if k not in own))


# A value in quotes: a name, a title, a message ("make a collection 'Supplier Contracts 2025'"). It is what the act
# writes, not what the act is, so its words are not ranked: they would pull toward whatever handler they happen to
# name. An apostrophe inside a word ("Jana's", "don't") opens no quote.
QUOTED = re.compile(r"(?<!\w)'([^']+)'(?!\w)|\"([^\"]+)\"|\u201c([^\u201d]*)\u201d|\u2018([^\u2019]*)\u2019")
# One or two lowercase words in quotes stay: a state to move to ('closed', 'in progress') does say the act.
QUOTED_STATE_WORDS = 2


def without_quoted_values(query: str) -> str:
    """The request with its quoted values left out (`QUOTED`); as it is when nothing else would be left."""
    def value_or_state(match: re.Match[str]) -> str:
        text = next(group for group in match.groups() if group is not None)
        return match.group(0) if len(text.split()) <= QUOTED_STATE_WORDS and text == text.lower() else " "

    left = QUOTED.sub(value_or_state, query)
    return left if request_terms(left) else query


# What `without_particulars` leaves out of an example request: a name (a capitalised word inside a sentence) and an
# address (an e-mail, a URL), once the word is stripped of the punctuation around it.
_PUNCTUATION = ".,;:!?()[]\"'`"
_NAME = re.compile(r"[A-Z][a-z]")
_ADDRESS = re.compile(r"@|://|^www\.|\.(com|org|net|io|example)$")


@lru_cache(maxsize=65536)
def without_particulars(example: str) -> str:
    """An example request without the particulars it names: quoted values (as in a request:
    `without_quoted_values`), names ("Grainger", "Aetna", "Friday") and addresses. They say which supplier or day
    the example was about, not what it asks for, and would match any request naming the same supplier. Record
    numbers stay: "INV-2031" says invoice, and no two requests share a number by more than chance.

    Cached like `terms`: every index a process builds (each app's registry, each rebuild after an import) reads
    the same example requests, and reading them was two thirds of building the index."""
    kept = []
    starts_sentence = True
    for word in without_quoted_values(example).split():
        bare = word.strip(_PUNCTUATION)
        if not _ADDRESS.search(bare) and (starts_sentence or not _NAME.match(bare)):
            kept.append(word)
        starts_sentence = word.endswith((".", "!", "?"))
    return " ".join(kept)


def _fields(handler: Handler, app_description: str, keywords: tuple[str, ...],
            examples: tuple[str, ...]) -> list[tuple[float, tuple[str, ...]]]:
    c = handler.coordinate
    return [(OPERATION_W, terms(c.operation)), (ENTITY_W, terms(c.entity)), (APP_W, terms(c.app)),
            (MEGA_W, terms(c.mega_tool)), (KEYWORD_W, tuple(t for k in keywords for t in (*terms(k), _BREAK))),
            (DESCRIPTION_W, terms(handler.description)), (APP_DESCRIPTION_W, terms(app_description)),
            (PARAMETER_W, _parameter_terms(handler)),
            (EXAMPLE_W, tuple(t for example in examples for t in (*terms(example), _BREAK)))]


def _parameter_terms(handler: Handler) -> tuple[str, ...]:
    """Parameter names and their descriptions: `due_before`, `priority`, "the approver's comment"."""
    words: list[str] = []
    for name, spec in mapping_of(handler.schema, "properties").items():
        description = keywords_of(spec).get("description")
        words += [*terms(name), *terms(description if isinstance(description, str) else ""), _BREAK]
    return tuple(words)


@dataclass(frozen=True, slots=True)
class Hit:
    handler: Handler
    score: float


class SearchView:
    """Capability search over one corpus (prism.registry.corpus): the built-in handlers plus the integrations an
    organization enabled, whose statistics it ranks with. Every query runs on a view (`SearchIndex.view`); the
    index itself is the view of every integration.

    The documents, their postings (term frequencies, prism.registry.postings) and the per-query caches are the
    index's, shared by its views; what a view adds is its corpus, and the BM25 weights, concepts and embedding rows
    worked out with it, kept per corpus."""

    def __init__(self, index: SearchIndex, corpus: Corpus) -> None:
        self.index = index
        self.corpus = corpus
        self.handlers = index.handlers
        self.idf = corpus.idf
        self.unknown_idf = corpus.unknown_idf
        # The verbs the corpus's operations start with (`mark` of `markDown`, `generate`, `list`), stemmed: a clause
        # that opens with one, or a synonym, asks for an act.
        self.operation_verbs = corpus.operation_verbs
        # BM25's length normalisation of each document of the corpus (0 for the others), by the corpus's average.
        self._norms = [0.0] * index.size
        for start, end in corpus.runs:
            for doc in range(start, end):
                self._norms[doc] = K1 * (1.0 - B + B * index.lengths[doc] / corpus.average)

    def embeddings(self) -> semantic.SemanticIndex | None:
        """The corpus's handler embeddings (centred on its own mean), made once per corpus from the index's; None
        when the semantic extra is missing or switched off."""
        embedded = self.index.embedded()
        if embedded is None:
            return None
        whole = self.corpus.size == self.index.size
        return embedded.within(self.corpus.integrations, None if whole else self.corpus.runs)

    def embeddings_pending(self) -> bool:
        """Whether the next semantic rerank would first have to embed every handler, or work out the corpus's centres
        and row norms (5-20 ms for a corpus of 10,000 handlers): work for the index builder's thread (`warm`)."""
        if not semantic.AVAILABLE:
            return False
        embedded = self.index.embedded_if_made()
        return embedded is None or self.corpus.integrations not in embedded

    def mask(self, visible: tuple[Handler, ...]) -> bytearray:
        masks = self.index.masks
        hit = masks.get(id(visible))
        if hit is not None and hit[0] is visible:
            return hit[1]
        mask = bytearray(self.index.size)
        for h in visible:
            doc = self.index.doc_of.get(h.path)
            if doc is not None:
                mask[doc] = 1
        masks.put(id(visible), (visible, mask))
        return mask

    def search(self, query: str, visible: tuple[Handler, ...], *, limit: int, rerank: bool = False,
               accept: Callable[[Handler], bool] | None = None) -> list[Hit]:
        return self.ranked(query, visible, limit=limit, rerank=rerank, accept=accept)[0]

    def ranked(self, query: str, visible: tuple[Handler, ...], *, limit: int, rerank: bool = False,
               accept: Callable[[Handler], bool] | None = None,
               cosines: np.ndarray | None = None) -> tuple[list[Hit], str]:
        """The hits and the name of the ranker that produced them (FIRST_PASS or one of the reranks).

        `cosines`: the query's embedding scores, when the caller has them already (see `cosines`)."""
        own = list(dict.fromkeys(request_terms(query)))
        shape = QueryShape.of(split_words(query), self.operation_verbs, self.idf, clause_openers(query))
        top = self._first_pass(own, shape, visible, max(limit, RERANK_POOL) if rerank else limit, accept)
        if not rerank:
            return self._hits(top), FIRST_PASS
        embeddings = self.embeddings()
        if embeddings is None:
            return self._hits(self._rerank(query, own, shape, top))[:limit], LEXICAL_RERANK
        if not own:  # nothing but stop words: nothing to look for, in any sense
            return [], SEMANTIC_RERANK
        return (self._hits(self._hybrid(query, own, shape, top, embeddings, visible, accept, cosines))[:limit],
                SEMANTIC_RERANK)

    def cosines(self, query: str) -> np.ndarray | None:
        """The query's cosine with every handler of the corpus (document order); None without the model or
        tokens."""
        embeddings = self.embeddings()
        return None if embeddings is None else embeddings.scores(query)

    def coverage(self, doc: int, query_terms: Sequence[str]) -> float:
        """The idf-weighted share of the query's terms the handler's text says, itself or by a synonym
        (at SYNONYM_WEIGHT): how much of the request this handler accounts for, comparable across requests."""
        present = self._joint(doc).present
        said = total = 0.0
        for t in query_terms:
            weight = self.idf.get(t, self.unknown_idf)
            total += weight
            if t in present:
                said += weight
            elif not SYNONYMS.get(t, frozenset()).isdisjoint(present):
                said += SYNONYM_WEIGHT * weight
        return said / total if total else 0.0

    def known(self, query_terms: Sequence[str]) -> float:
        """The idf-weighted share of the query's terms that some handler of the corpus uses, itself or by a
        synonym: a request in words no handler knows ("flight", "payroll") is about something else."""
        said = total = 0.0
        for t in query_terms:
            weight = self.idf.get(t, self.unknown_idf)
            total += weight
            if any(w in self.idf for w in (t, *SYNONYMS.get(t, ()))):
                said += weight
        return said / total if total else 0.0

    def says(self, doc: int, term: str) -> bool:
        """Whether the document's text (description, keywords, example requests, names) says the index term."""
        return term in self._joint(doc).present

    def names_entity(self, doc: int, query_terms: Sequence[str]) -> bool:
        """Whether the request names this document's entity (its name or a keyword it shares, itself or by a
        synonym)."""
        own = self.index.entity_terms[doc]
        return any(_names(t, own) for t in query_terms)

    def names_another_entity(self, doc: int, query_terms: Sequence[str]) -> bool:
        """Whether the request names an entity of the corpus (its name or a keyword it shares, itself or by a
        synonym), but not this document's: "reopen PO 3310" names a purchase order, not a ticket."""
        own = self.index.entity_terms[doc]
        if any(_names(t, own) for t in query_terms):
            return False
        return any(_names(t, self.corpus.entity_terms) for t in query_terms)

    def _joint(self, doc: int) -> _Joint:
        joints = self.index.joints
        joint = joints.get(doc)
        if joint is None:
            if len(joints) >= JOINT_CACHE:  # bounded: a few MB, not a copy of every document
                joints.clear()
            joint = joints[doc] = _Joint.of(self.handlers[doc], self.index.fields[doc])
        return joint

    def document(self, handler: Handler) -> int | None:
        return self.index.doc_of.get(handler.path)

    def term_postings(self, term: str) -> dict[int, float]:
        """`document → finished BM25 weight` for the corpus's documents that use `term`, in document order (empty if
        none does). Worked out on first use in this corpus and kept. Not to be changed."""
        key = (self.corpus.integrations, term)
        kept = self.index.kept_postings
        found = kept.get(key)
        if found is not None:
            return found
        idf, saturation, norms = self.idf.get(term, self.unknown_idf), K1 + 1.0, self._norms
        found = {}
        for documents, frequencies in self.corpus.slices(term):
            for doc, f in zip(documents, frequencies, strict=True):
                found[doc] = idf * f * saturation / (f + norms[doc])
        if found:
            kept.keep(key, found)
        return found

    def concept_postings(self, term: str, exclude: Sequence[str] = ()) -> dict[int, float]:
        """`term` and its synonyms (at SYNONYM_WEIGHT) as one concept: each document's best match.

        Summing them instead would let a handler that declares several words of one synonym group
        ("supplier", "seller", "vendor") outscore one that matches two different words of the query.
        Built once per term and corpus (synonyms that are themselves words of the query, `exclude`, are left to
        their own concept; that rare case is not cached).
        """
        own_postings = self.term_postings(term)
        if term not in SYNONYMS:
            return own_postings
        key = (self.corpus.integrations, term)
        concepts = self.index.kept_concepts
        cached = None if exclude else concepts.get(key)
        if cached is not None:
            return cached
        concept = dict(own_postings)
        get = concept.get
        for synonym in SYNONYMS.get(term, ()):
            if synonym in exclude:
                continue
            for d, s in self.term_postings(synonym).items():
                if SYNONYM_WEIGHT * s > get(d, 0.0):
                    concept[d] = SYNONYM_WEIGHT * s
        if not exclude:
            concepts.keep(key, concept)
        return concept

    def _first_pass(self, own: Sequence[str], shape: QueryShape, visible: tuple[Handler, ...], pool: int,
                    accept: Callable[[Handler], bool] | None) -> list[tuple[float, int]]:
        """BM25 over the postings, one concept per query word: the best `pool` visible documents as
        (score, -doc), best first."""
        scores: dict[int, float] = {}
        # Rare concepts first: the accumulator grows from the most selective postings. Once there are plenty
        # of candidates, a concept found in most of the corpus's documents only adds to those already there (the
        # "continue" strategy of Moffat & Zobel): its idf is low, so a document matching nothing rarer would rank
        # below them in practice, and skipping it bounds the work on queries full of common words.
        concepts = self._concepts_of(own)
        for postings in sorted((c for c in concepts if c), key=len):
            if not scores:
                scores = dict(postings)
            elif 2 * len(postings) > self.corpus.size and len(scores) >= 4 * pool:
                get = postings.get
                for d, current in scores.items():
                    extra = get(d)
                    if extra is not None:
                        scores[d] = current + extra
            else:
                get = scores.get
                for d, s in postings.items():
                    scores[d] = get(d, 0.0) + s
        if not scores:
            return []
        for doc, word in self._shape_documents(shape).items():
            if doc in scores:
                scores[doc] += self._shape_bonus(doc, word)
        mask = self.mask(visible)
        handlers = self.handlers
        # Ties keep registry order: lower document number first.
        candidates = ((s, -d) for d, s in scores.items()
                      if mask[d] and (accept is None or accept(handlers[d])))
        return heapq.nlargest(pool, candidates)

    def _concepts_of(self, own: Sequence[str]) -> list[dict[int, float]]:
        return [self.concept_postings(t, [o for o in own if o != t and o in SYNONYMS.get(t, ())]) for t in own]

    def _first_pass_scores(self, own: Sequence[str], shape: QueryShape, docs: Iterable[int]) -> list[tuple[float, int]]:
        """These documents' full BM25 scores, as (score, -doc): every concept counted (the first pass may skip a
        common one for a document it had not collected yet), with the shape's bonus."""
        concepts = self._concepts_of(own)
        shaped = self._shape_documents(shape)
        scored = []
        for doc in docs:
            s = sum(c.get(doc, 0.0) for c in concepts)
            if doc in shaped and s:
                s += self._shape_bonus(doc, shaped[doc])
            scored.append((s, -doc))
        return scored

    def _shape_bonus(self, doc: int, word: str) -> float:
        return FIRST_PASS_SHAPE * self.concept_postings(word).get(doc, 0.0)

    def _shape_documents(self, shape: QueryShape) -> dict[int, str]:
        """The list handlers of the entities the request names in the plural, and the read handlers of
        those it names with a number, each with the query word that names it."""
        docs: dict[int, str] = {}
        for kind, words in shape.asked:
            for w in sorted(words):  # sorted: the same word wins a tie on every run
                for t in (w, *SYNONYMS.get(w, ())):
                    for doc in self.index.shaped.get((kind, t), ()):
                        if shape.leaves_to(self.index.entity_operations[doc]):
                            docs.setdefault(doc, w)
        return docs

    def _hits(self, ranked: list[tuple[float, int]]) -> list[Hit]:
        return [Hit(self.handlers[-neg], s) for s, neg in ranked]

    def _rerank(self, query: str, own: Sequence[str], shape: QueryShape,
                top: list[tuple[float, int]]) -> list[tuple[float, int]]:
        """The lexical rerank: (score, -doc), best first; ties keep registry order."""
        if not top or not own:
            return top
        best = top[0][0] or 1.0
        raw_words = split_words(query)
        raw_query = " ".join(raw_words)
        spoken = {stem(w) for w in raw_words}
        question = is_question(query, raw_words)
        pairs = set(pairwise(own))
        rescored: list[tuple[float, int]] = []
        for s, neg in top:
            doc = -neg
            handler = self.handlers[doc]
            joint = _pair_score(self._joint(doc), self.index.fields[doc], own, pairs, raw_query)
            joint += INTENT_WEIGHT * _operation_intent(handler.coordinate.operation, spoken)
            if question and handler.read_only:
                joint += QUESTION_WEIGHT
            if shape.leaves_to(self.index.entity_operations[doc]):
                joint += SHAPE_WEIGHT * shape.fit(handler.coordinate.operation, self.index.entity_terms[doc])
            rescored.append((s / best + PAIR_WEIGHT * joint, neg))
        rescored.sort(reverse=True)
        return rescored

    def _hybrid(self, query: str, own: Sequence[str], shape: QueryShape, top: list[tuple[float, int]],
                embeddings: semantic.SemanticIndex, visible: tuple[Handler, ...],
                accept: Callable[[Handler], bool] | None, cosines: np.ndarray | None) -> list[tuple[float, int]]:
        """Lexical rerank fused with the embedding: candidates from both, one weighted score.

        The embedding's candidates are scored lexically too, as if the first pass had kept them: among
        hundreds of handlers sharing a request's one known word ("cancel it"), the first pass keeps the
        shortest texts, and the handler the embedding finds must not enter with no lexical score at all."""
        if cosines is None:
            cosines = embeddings.scores(query)
        if cosines is None:
            return self._rerank(query, own, shape, top)
        handlers = self.handlers
        take = None if accept is None else (lambda doc: accept(handlers[doc]))
        nearest = embeddings.best(cosines, self.mask(visible), SEMANTIC_POOL, take)
        pooled = {-neg for _, neg in top}
        joined = top + self._first_pass_scores(own, shape, (d for d in nearest if d not in pooled))
        joined.sort(reverse=True)
        lexical = self._rerank(query, own, shape, joined)
        lexical_score = {-neg: s for s, neg in lexical}
        docs = list(lexical_score)
        if not docs:
            return []
        best = max(lexical_score.values(), default=0.0) or 1.0
        # Cosines are scaled over the candidates: only how they compare with each other matters here.
        chosen = cosines[docs]
        low = float(chosen.min())
        span = float(chosen.max()) - low or 1.0
        fused = [(lexical_score[doc] / best + SEMANTIC_WEIGHT * (float(cosines[doc]) - low) / span, -doc)
                 for doc in docs]
        fused.sort(reverse=True)
        return fused


# Corpora kept per index (their views and statistics); a miss costs a few milliseconds at 10,000 handlers.
VIEWS_KEPT = 64


class SearchIndex(SearchView):
    """Postings `term → {doc: field-weighted term frequency}` (prism.registry.postings) over every handler of one
    registry, and the view of every integration (`view` makes the others).

    The corpus statistics a search ranks with are those of its view (prism.registry.corpus): the built-in handlers
    plus the integrations the caller's organization enabled. Another organization's integrations, its own or a
    deployment's it did not connect, neither move an organization's scores and confidences nor are known to it.
    """

    def __init__(self, registry: Registry) -> None:
        self.handlers: tuple[Handler, ...] = tuple(registry)
        self.size = len(self.handlers)
        self._app_descriptions = {name: app.description for name, app in registry.apps.items()}
        # Each document's fields, kept in order for the rerank pass (pairs and proximity need order).
        self.fields: list[tuple[tuple[str, ...], ...]] = []
        entity_words = entity_keywords(self.handlers)
        self._keywords = [handler_keywords(h, entity_words) for h in self.handlers]
        self._examples = [tuple(without_particulars(e) for e in h.examples) for h in self.handlers]
        self.entity_terms = _entity_vocabularies(self.handlers, entity_words)
        self.entity_operations = _entity_operations(self.handlers)
        self.shaped = _shaped_documents(self.handlers, self.entity_terms)
        self.postings = Postings()
        self.lengths: list[float] = []
        for doc, (handler, keywords, examples) in enumerate(zip(self.handlers, self._keywords, self._examples,
                                                                strict=True)):
            tf: dict[str, float] = {}
            fields = _fields(handler, self._app_descriptions.get(handler.coordinate.app, ""), keywords, examples)
            for weight, field_terms in fields:
                for t in field_terms:
                    if t != _BREAK:
                        tf[t] = tf.get(t, 0.0) + weight
            self.fields.append(tuple(f for _, f in fields))
            self.lengths.append(sum(tf.values()))
            for t, f in tf.items():
                self.postings.add(t, doc, f)
        # Per visible tuple (kept alive beside its mask so its id cannot be reused while cached); bounded.
        self.masks: LRU[int, tuple[tuple[Handler, ...], bytearray]] = LRU(256)
        self.doc_of = {h.path: i for i, h in enumerate(self.handlers)}
        self.joints: dict[int, _Joint] = {}
        # BM25 weights and concepts per (corpus, term): kept like the postings they are made of (at 10,000
        # handlers, every synonym's concept held 677,000 entries).
        self.kept_postings = KeptDicts(CACHED_POSTINGS)
        self.kept_concepts = KeptDicts(CACHED_POSTINGS)
        self._groups = _Groups(self.handlers, self.entity_terms)
        self.integrations = frozenset(self._groups.runs) - {BUILT_IN}
        self._views: LRU[frozenset[str], SearchView] = LRU(VIEWS_KEPT)
        # Handler embeddings: made on the first semantic rerank (or by warm), not with the lexical index.
        self._embedded: semantic.Embeddings | None = None
        self._embedded_lock = threading.Lock()
        super().__init__(self, self._corpus(self.integrations))

    def view(self, enabled: Iterable[str]) -> SearchView:
        """The view of an organization that enabled these integrations (names the index does not hold are none
        of its business): the index itself when that is every integration."""
        integrations = self.integrations.intersection(enabled)
        if integrations == self.integrations:
            return self
        found = self._views.get(integrations)
        if found is None:
            found = self._views.put(integrations, SearchView(self, self._corpus(integrations)))
        return found

    def _corpus(self, integrations: frozenset[str]) -> Corpus:
        groups = (BUILT_IN, *sorted(integrations))
        return Corpus(integrations, self._groups.runs_of(groups), self.postings, self.lengths,
                      self._groups.union(self._groups.operation_verbs, groups),
                      self._groups.union(self._groups.entity_terms, groups))

    def embedded_if_made(self) -> semantic.Embeddings | None:
        return self._embedded

    def embedded(self) -> semantic.Embeddings | None:
        """Every handler's and example request's embedding, made once; None when the semantic extra is missing or
        switched off."""
        if not semantic.AVAILABLE:
            return None
        if self._embedded is None:
            with self._embedded_lock:
                if self._embedded is None:
                    embedded = semantic.build(self.handlers, self._keywords, self._examples, split_words)
                    if embedded is not None:
                        embedded.within(self.integrations, None)  # the whole corpus's rows, off the event loop
                    self._embedded = embedded
        return self._embedded


class _Groups:
    """Where each integration's documents are in an index: runs of consecutive document numbers per group (the
    built-in handlers are BUILT_IN), the words each group's operations open with and those naming its entities."""

    def __init__(self, handlers: Sequence[Handler], entity_terms: Sequence[frozenset[str]]) -> None:
        self.groups = [h.integration or BUILT_IN for h in handlers]
        self.runs: dict[str, list[tuple[int, int]]] = {}
        for doc, group in enumerate(self.groups):
            runs = self.runs.setdefault(group, [])
            if runs and runs[-1][1] == doc:
                runs[-1] = (runs[-1][0], doc + 1)
            else:
                runs.append((doc, doc + 1))
        verbs: dict[str, set[str]] = {}
        for h, group in zip(handlers, self.groups, strict=True):
            words = operation_words(h.coordinate.operation)
            if words:
                verbs.setdefault(group, set()).add(words[0])
        self.operation_verbs = {group: frozenset(words) for group, words in verbs.items()}
        named: dict[str, set[str]] = {}
        for group, vocabulary in zip(self.groups, entity_terms, strict=True):
            named.setdefault(group, set()).update(vocabulary)
        self.entity_terms = {group: frozenset(words) for group, words in named.items()}

    def runs_of(self, groups: Iterable[str]) -> list[tuple[int, int]]:
        return [run for group in groups for run in self.runs.get(group, ())]

    @staticmethod
    def union(per_group: dict[str, frozenset[str]], groups: Iterable[str]) -> frozenset[str]:
        return frozenset().union(*(per_group.get(group, frozenset()) for group in groups))


@dataclass(frozen=True, slots=True)
class _Joint:
    """What `_pair_score` reads of one document, built on its first rerank and kept: the terms of its text,
    the word pairs in it, the terms naming its operation and entity, and its coordinate's spellings."""

    present: frozenset[str]
    pairs: frozenset[tuple[str, str]]
    names: frozenset[str]
    spelled: tuple[str, ...]

    @classmethod
    def of(cls, handler: Handler, fields: Sequence[Sequence[str]]) -> _Joint:
        c = handler.coordinate
        # An exact mention: the whole coordinate, "entity operation", or a several-word operation name.
        spelled = [split_words(c.path), split_words(f"{c.entity} {c.operation}"), split_words(c.operation)]
        return cls(frozenset(t for f in fields for t in f), frozenset(p for f in fields for p in pairwise(f)),
                   frozenset(fields[0]) | frozenset(fields[1]),
                   tuple(f" {' '.join(w)} " for w in spelled if len(w) > 1))


def _pair_score(joint: _Joint, fields: Sequence[Sequence[str]], own: Sequence[str], pairs: set[tuple[str, str]],
                raw_query: str) -> float:
    """Joint features of one (query, handler) pair, each in [0, 1] before its weight; synonyms were
    already weighed by the first pass, so here only the query's own words count (coverage excepted)."""
    present = joint.present
    # Coverage: a query word counts when it, or one of its synonyms, is in the handler's text.
    covered = [t for t in own if t in present or not SYNONYMS.get(t, frozenset()).isdisjoint(present)]
    coverage = len(covered) / len(own)
    pair_score = (len(pairs & joint.pairs) / len(pairs)) if pairs else 0.0
    name_terms = joint.names
    # A query word naming the operation or entity counts fully; one whose synonym does, half: a request
    # phrased in the caller's own words ("scrap the compressor") still points at `asset/retire`.
    name_score = sum(1.0 if t in name_terms else 0.5 if not SYNONYMS.get(t, frozenset()).isdisjoint(name_terms)
                     else 0.0 for t in own) / len(own)
    proximity = max((_proximity(f, set(covered)) for f in fields[4:6]), default=0.0)
    padded = f" {raw_query} "
    exact = 1.0 if any(w in padded for w in joint.spelled) else 0.0
    return (COVERAGE_W * coverage + PAIRS_W * pair_score + NAMES_W * name_score + PROXIMITY_W * proximity
            + EXACT_W * exact)


def _per_entity(handlers: Sequence[Handler],
                of_entity: Callable[[tuple[str, str], list[Handler]], frozenset[str]]) -> list[frozenset[str]]:
    """Per document, `of_entity((app, entity), that entity's handlers)`: one set per entity, shared by its
    handlers."""
    groups: dict[tuple[str, str], list[Handler]] = {}
    for h in handlers:
        groups.setdefault((h.coordinate.app, h.coordinate.entity), []).append(h)
    sets = {key: of_entity(key, members) for key, members in groups.items()}
    return [sets[(h.coordinate.app, h.coordinate.entity)] for h in handlers]


def _entity_vocabularies(handlers: Sequence[Handler],
                         entity_words: dict[tuple[str, str], tuple[str, ...]]) -> list[frozenset[str]]:
    """Per document, the words that name its entity: the entity's name and the keywords it shares."""
    return _per_entity(handlers, lambda key, _members: frozenset(
        [*terms(key[1]), *(t for k in entity_words.get(key, ()) for t in terms(k))]))


def _entity_operations(handlers: Sequence[Handler]) -> list[frozenset[str]]:
    """Per document, the words naming the other operations of its entity (`aging`, `ap`, `summary` for
    `invoice/agingApSummary`): not those of the list and read concepts, which the shape itself stands for."""
    generic = {*_KINDS, *(s for kind in _KINDS for s in SYNONYMS.get(kind, ()))}
    return _per_entity(handlers, lambda _key, members: frozenset(
        w for h in members for w in operation_words(h.coordinate.operation) if w not in generic))


def _shaped_documents(handlers: Sequence[Handler],
                      vocabularies: Sequence[frozenset[str]]) -> dict[tuple[str, str], list[int]]:
    """`(kind, word) → documents`: the list, count, breakdown and read handlers (see `_operation_kind`) of the
    entities each word names, so that the first pass finds those a request's shape points at without a scan."""
    shaped: dict[tuple[str, str], list[int]] = {}
    for doc, (h, vocabulary) in enumerate(zip(handlers, vocabularies, strict=True)):
        kind = _operation_kind(h.coordinate.operation)
        if kind is not None:
            for t in vocabulary:
                shaped.setdefault((kind, t), []).append(doc)
    return shaped


def _names(word: str, vocabulary: frozenset[str]) -> bool:
    """Whether a query word (stemmed) names the entity of `vocabulary`, itself or by a synonym."""
    return word in vocabulary or not SYNONYMS.get(word, frozenset()).isdisjoint(vocabulary)


def _is_plural(word: str) -> bool:
    """A noun in the plural, by its form: the stemmer strips an -s ending (not -ss, -us, -is); or an abbreviation's
    plural ("POs", "WOs", "docs")."""
    if word.endswith("s") and word[:-1] in ABBREVIATIONS:
        return True
    return len(word) > 3 and word.endswith("s") and word not in STOPWORDS and stem(word) != word


_LIST, _COUNT, _READ = stem("list"), stem("count"), stem("read")
_KINDS = (_LIST, _COUNT, _READ)
# Records grouped by a field ("tickets by priority and status", "spend per vendor") ask for the entity's breakdown.
_GROUP = stem("breakdown")
_GROUPING = frozenset({"by", "per"})
# Words after "by" that say when, how or who rather than a field to group by: "by Friday", "by mistake", "by me".
_NOT_GROUPING = frozenset(
    "mistake accident hand email mail phone default now then tomorrow today tonight noon midnight end eod cob "
    "close next monday tuesday wednesday thursday friday saturday sunday mon tue wed thu fri sat sun january "
    "february march april may june july august september october november december jan feb mar apr jun jul aug "
    "sep sept oct nov dec me us him her them someone somebody anyone everyone".split())


# Phrases that ask for a count of what follows them ("how many tickets", "the number of open claims").
_COUNT_PHRASES = frozenset({("how", "many"), ("number", "of")})


@dataclass(frozen=True, slots=True)
class QueryShape:
    """What the form of a request says about the operation, beyond its words.

    "Which machines are down", "repair jobs given to Jonas": an entity named in the plural, asked about
    or just named, wants its records listed; "how many tickets are open" wants them counted; "tickets by
    priority", "spend per vendor" want them grouped (the entity's breakdown). "Open alert 123", "what does PO
    #881 contain": an entity named with a number after it wants that one record read. None of them names an
    operation, so the operation intent alone cannot tell the entity's list, count, breakdown or read from its
    other handlers.
    """

    # (operation kind, the stemmed words that name an entity in that shape)
    asked: tuple[tuple[str, frozenset[str]], ...]
    # The request's words, stemmed, less those of a count phrase: what it may name an operation with.
    said: frozenset[str]
    # The synonyms of the request's first word, the verb of an imperative ("rename ticket 5567" says update).
    opening: frozenset[str] = frozenset()

    @classmethod
    def of(cls, words: Sequence[str], operation_verbs: frozenset[str] = frozenset(),
           vocabulary: Container[str] = frozenset(), openers: Sequence[str] = ()) -> QueryShape:
        """The shape of a request (its words, split). `operation_verbs`: the verbs the registry's operations
        start with; a request opening with one of them (or a synonym) asks for that act, not to read a record
        it names with a number ("deactivate agent 17": the instance entity, which has no disable, must not read).
        So does a later clause opening with one (`openers`, see `clause_openers`): "PO 4410 landed yesterday,
        mark it received", "Carrier turned down claim 6003. Record it as denied".
        `vocabulary`: the index's terms; records are grouped only by a word the catalog knows ("by status"), not
        by a name ("sent by Grainger", "opened by raj")."""
        counting = next((i + 2 for i, pair in enumerate(pairwise(words)) if pair in _COUNT_PHRASES), None)
        before_count = words if counting is None else words[:counting - 2]
        numbered = frozenset(stem(before) for before, w in pairwise(words)
                             if w.isdigit() and not before.isdigit() and before not in STOPWORDS)
        asked = [(_LIST, _plural_nouns(before_count)), (_READ, numbered)]
        if counting is not None:
            asked.append((_COUNT, _plural_nouns(words[counting:])))
        grouping = next((i for i, (w, field) in enumerate(pairwise(words)) if w in _GROUPING and field.isalpha()
                         and field not in STOPWORDS and field not in _NOT_GROUPING and stem(field) in vocabulary),
                        None)
        if grouping is not None:  # the records named before "by" are to be grouped, not listed
            asked = [(kind, ws) for kind, ws in asked if kind != _LIST]
            asked.append((_GROUP, frozenset(stem(w) for w in words[:grouping] if w not in STOPWORDS)))
        rest = [*before_count, *([] if counting is None else words[counting:])]
        opening = frozenset().union(*(_naming_verb(w) for w in [*words[:1], *openers]))
        if not opening.isdisjoint(operation_verbs):
            asked = [(kind, ws) for kind, ws in asked if kind != _READ]
        return cls(tuple(asked), frozenset(stem(w) for w in rest if w not in STOPWORDS), opening)

    def leaves_to(self, operations: frozenset[str]) -> bool:
        """Whether the shape may choose among the entity's handlers: it is the default when the request
        names none of the entity's other operations ("overdue payables aging" names `agingApSummary`)."""
        return self.said.isdisjoint(operations) and self.opening.isdisjoint(operations)

    def fit(self, operation: str, vocabulary: frozenset[str]) -> float:
        """1 when the operation is the list, count, breakdown or read the shape asks for, of this entity; else 0."""
        kind = _operation_kind(operation)
        if kind is None:
            return 0.0
        return 1.0 if any(k == kind and any(_names(w, vocabulary) for w in ws) for k, ws in self.asked) else 0.0


# Verbs that ask to see a record as well as what their synonyms say ("open ticket 5567" reads it).
_SEEING = frozenset({"open", "pull", "bring"})


def _naming_verb(word: str) -> frozenset[str]:
    """The word and its synonyms, stemmed, if it opens the request or a clause as a verb naming an operation other
    than the shape's own: "rename" (update), "escalate"; not "open", "show" or "get", which also ask to see a record
    ("open ticket 5567")."""
    synonyms = SYNONYMS.get(stem(word), frozenset()) | {stem(word)}
    return frozenset() if word in STOPWORDS or word in _SEEING or not synonyms.isdisjoint(_KINDS) else synonyms


# Where a clause ends inside a request: a sentence's end, a semicolon or colon, a comma, a dash between spaces.
_CLAUSE_END = re.compile(r"[.;:!?,]\s|\s[-\u2013\u2014]+\s")


def clause_openers(query: str) -> list[str]:
    """The first word of each clause after the first: where an imperative's verb stands."""
    return [words[0] for words in clause_words(query)[1:] if words]


def clause_words(query: str) -> list[list[str]]:
    """The words of each clause of the request, split at a sentence's end, a semicolon, colon or comma, or a
    dash between spaces (`_CLAUSE_END`)."""
    return [split_words(clause) for clause in _CLAUSE_END.split(query)]


def _plural_nouns(words: Sequence[str]) -> frozenset[str]:
    """The words said in the plural, stemmed. A plural noun heads its compound: the word before it often
    names the entity ("gauge values", "repair jobs"), so it counts as said in the plural too."""
    return frozenset(stem(w) for before, after in pairwise(["", *words]) if _is_plural(after)
                     for w in (before, after) if w and w not in STOPWORDS)


@lru_cache(maxsize=65536)
def _operation_kind(operation: str) -> str | None:
    """`_LIST`, `_COUNT` or `_READ` for an operation named by one word of those concepts (`list`, `browse`;
    `count`, `tally`; `read`, `get`, `view`), `_GROUP` for one named `breakdown`, else None."""
    words = operation_words(operation)
    if len(words) != 1:
        return None
    for kind in _KINDS:
        if words[0] == kind or words[0] in SYNONYMS.get(kind, frozenset()):
            return kind
    return _GROUP if words[0] == _GROUP else None


def is_question(query: str, words: Sequence[str]) -> bool:
    """Whether the request is a question: it opens with a question word or has a question mark."""
    return "?" in query or (bool(words) and words[0] in QUESTION_WORDS)


@lru_cache(maxsize=65536)
def operation_words(operation: str) -> tuple[str, ...]:
    """Every word of an operation name, stemmed, stop words included: `markAllRead` → mark all read."""
    return tuple(stem(w) for w in split_words(operation))


def _operation_intent(operation: str, spoken: set[str]) -> float:
    """How much of the operation's name the request says, in its words or their synonyms, in [0, 1).

    The first pass finds the entity; within it, what decides is what the request asks to do. Each word
    of the operation counts 1 when the request says it, INTENT_SYNONYM when it says a synonym; the sum is
    divided by one more than the name's length, so that of two operations the request names fully, the
    longer (more specific) one wins: "mark all as read" → markAllRead before markRead.
    """
    words = operation_words(operation)
    said = sum(1.0 if w in spoken else INTENT_SYNONYM if not SYNONYMS.get(w, frozenset()).isdisjoint(spoken) else 0.0
               for w in words)
    return said / (len(words) + 1)


def _proximity(sequence: Sequence[str], wanted: set[str]) -> float:
    """1 when the wanted words sit side by side in the sequence, falling as the window widens."""
    matched = wanted & set(sequence)
    if len(matched) < 2:
        return 0.0
    last: dict[str, int] = {}
    best = len(sequence) + 1
    for i, t in enumerate(sequence):
        if t in matched:
            last[t] = i
            if len(last) == len(matched):
                best = min(best, i - min(last.values()) + 1)
    return len(matched) / best if best <= len(sequence) else 0.0


_INDEXES: WeakKeyDictionary[Registry, SearchIndex] = WeakKeyDictionary()
# One index is built at a time: a background warm-up and the first search of a registry never build it twice.
_BUILDING = threading.Lock()


def built_index(registry: Registry) -> SearchIndex | None:
    """The registry's index if it is built (and still covers every handler), else None."""
    index = _INDEXES.get(registry)
    return index if index is not None and index.size == len(registry) else None


def index_for(registry: Registry) -> SearchIndex:
    """Built on first use and kept as long as the registry lives; rebuilt if handlers were added. At 10,000
    handlers a build takes about a second: on the event loop, ask `pending` first."""
    index = built_index(registry)
    if index is None:
        with _BUILDING:
            index = built_index(registry)
            if index is None:
                index = _INDEXES[registry] = SearchIndex(registry)
    return index


def pending(registry: Registry, *, embeddings: bool, enabled: Iterable[str] | None = None) -> bool:
    """Whether searching `registry` would first build its index or, with `embeddings` (a semantic rerank), embed
    every handler or centre the rows of the corpus of an organization that enabled `enabled` (None: every
    integration): work for a worker thread (`warm`), not for the event loop or a transaction."""
    index = built_index(registry)
    if index is None:
        return True
    return embeddings and (index if enabled is None else index.view(enabled)).embeddings_pending()


def warm(registries: Iterable[Registry], *, embeddings: bool = False, enabled: Iterable[str] | None = None) -> None:
    """Build indexes ahead of the first query (start-up or benchmarks). The handler embeddings are left
    to the first semantic rerank unless asked for: they cost start-up time and memory a server that never
    reranks should not pay. With `embeddings`, those of the corpus of an organization that enabled `enabled`
    (None: every integration) are made too."""
    for registry in registries:
        index = index_for(registry)
        if embeddings:
            (index if enabled is None else index.view(enabled)).embeddings()


# Index builds off the event loop run on a thread of their own, one after the other. A build that waits for another
# then waits in this executor's queue, holding no thread: on the loop's default executor, builds queued behind a
# long one (an import's registry at 10,000 handlers, a first search meanwhile) held its few threads, and everything
# else sent there (password checks, the tenant descriptor, a registry's assembly) waited for the build.
_INDEX_BUILDER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="prism-search-index")


async def on_index_builder(build: Callable[..., None], *args: object) -> None:
    """Run `build(*args)` (`warm`, or a function that calls it) on the index builder's thread."""
    await asyncio.get_running_loop().run_in_executor(_INDEX_BUILDER, partial(build, *args))
