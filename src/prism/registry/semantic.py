"""The semantic pass of capability search: static token embeddings from WordLlama, mean-pooled.

WordLlama (model `l2_supercat`, 256 dimensions) ships its token-embedding table and its tokenizer inside
its wheel, so nothing is downloaded at run time. A text's vector is the mean of its tokens' vectors —
what `WordLlama.embed` computes — read straight from the wheel's two files: that keeps the cost to the
table (16 MB, half precision), the tokenizer and numpy, and `WordLlama.load()` with its defaults looks for
the tokenizer in a folder the wheel does not have and tries to download it. Handler vectors are centred
on the mean vector of the caller's corpus (prism.registry.corpus) before they are normalised (what all its handler
texts share says nothing about any one of them), so scoring a query is one tokenisation and one matrix-vector
product.

WordLlama (MIT licence; 16 MB of weights and a 1.8 MB tokenizer in its wheel) is a runtime dependency, so
the default install ranks with it. If its files cannot be loaded — or with `AVAILABLE` switched off —
`rerank` stays lexical, and capability_search and prism_search say which ranker ran (`ranker`).
"""

from __future__ import annotations

import importlib.util
import logging
import threading
from collections.abc import Callable, Sequence
from itertools import chain
from pathlib import Path
from typing import TYPE_CHECKING

from prism.kit.heap import release_freed_memory
from prism.kit.lru import LRU
from prism.registry.model import Handler

if TYPE_CHECKING:
    import numpy as np
    from tokenizers import Tokenizer

# Whether the `semantic` extra is installed, found without importing anything: numpy and the tokenizer are
# imported on the first semantic rerank (each function below imports what it uses), so a server that never
# reranks does not carry them. Only wordllama's files are read: importing the package would load far more.
AVAILABLE = all(importlib.util.find_spec(name) is not None
                for name in ("numpy", "safetensors", "tokenizers", "wordllama"))

log = logging.getLogger(__name__)

MODEL = "wordllama l2_supercat 256d"
_WEIGHTS = ("weights", "l2_supercat_256.safetensors")
_TOKENIZER = ("tokenizers", "l2_supercat_tokenizer_config.json")
# Tokens pooled at a time when embedding a registry: bounds the (tokens, 256) scratch arrays (6 MB), whatever
# the texts' lengths. Counted in texts (64) it was 36 MB for a batch of long imported descriptions.
_TOKENS_AT_A_TIME = 4096
# Rows a corpus's lengths are worked out with at a time (in float64: 2 MB of scratch).
_ROWS_AT_A_TIME = 1024
# A row this close to its corpus's mean, relative to their lengths, is the mean (see `_centred_norms`).
_SAME = 1e-12
# Corpora (prism.registry.corpus) whose centres and row lengths are kept per index: as many as the lexical views
# (prism.registry.search.VIEWS_KEPT), ~60 KB each at 10,000 handlers.
CORPORA_KEPT = 64


class Model:
    """The token table and tokenizer; `embed` pools exactly as `WordLlama.embed` does (a plain mean)."""

    def __init__(self, table: np.ndarray, tokenizer: Tokenizer) -> None:
        self.table = table
        self.tokenizer = tokenizer
        self.dim = int(table.shape[1])

    def ids(self, text: str) -> list[int]:
        # Word by word: this tokenizer has no pre-tokenizer, so given a whole text its cache would keep one
        # entry per distinct text (tens of MB for a large registry, growing with every new query). No token
        # spans a space, so the tokens are the same; only a run of spaces, which means nothing, is lost.
        words = text.split()
        return self.tokenizer.encode(words, is_pretokenized=True, add_special_tokens=False).ids if words else []

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """One float32 row per text; a text without tokens gets zeros."""
        import numpy as np

        # A registry's texts share most of their words (10,000 handlers: a million words, 20,000 distinct), and
        # since no token spans a space, a text's tokens are its words' tokens: each word is tokenized once.
        known: dict[str, list[int]] = {}
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        batch: list[tuple[int, list[int]]] = []
        pending = 0
        for row, text in enumerate(texts):
            ids = self._ids_of(text.split(), known)
            if ids:
                batch.append((row, ids))
                pending += len(ids)
            if pending >= _TOKENS_AT_A_TIME:
                self._pool(batch, out)
                batch, pending = [], 0
        if batch:
            self._pool(batch, out)
        return out

    def _pool(self, batch: list[tuple[int, list[int]]], out: np.ndarray) -> None:
        """Each text's row of `out`: the mean of its tokens' rows."""
        import numpy as np

        rows = np.fromiter((row for row, _ in batch), dtype=np.int64, count=len(batch))
        lengths = np.fromiter((len(ids) for _, ids in batch), dtype=np.int64, count=len(batch))
        flat = np.fromiter(chain.from_iterable(ids for _, ids in batch), dtype=np.int64, count=int(lengths.sum()))
        offsets = np.concatenate(([0], np.cumsum(lengths)[:-1]))
        # Summed in float32 straight from the half-precision rows: no float32 copy of every token's row.
        sums = np.add.reduceat(self.table[flat], offsets, axis=0, dtype=np.float32)
        out[rows] = sums / lengths[:, None]

    def _ids_of(self, words: list[str], known: dict[str, list[int]]) -> list[int]:
        ids: list[int] = []
        for word in words:
            found = known.get(word)
            if found is None:
                found = known[word] = self.tokenizer.encode([word], is_pretokenized=True,
                                                            add_special_tokens=False).ids
            ids += found
        return ids


_model: Model | None = None
_model_lock = threading.Lock()


def load_model() -> Model | None:
    """The model, loaded once per process; None (and semantic search off) when it cannot be loaded."""
    global _model, AVAILABLE
    if _model is not None or not AVAILABLE:
        return _model
    with _model_lock:
        if _model is None and AVAILABLE:
            try:
                _model = _load()
            except Exception:  # a broken install must not break search: rerank stays lexical
                log.exception("semantic search is off: the WordLlama files could not be loaded")
                AVAILABLE = False
    return _model


def _load() -> Model:
    from safetensors import safe_open
    from tokenizers import Tokenizer

    spec = importlib.util.find_spec("wordllama")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("the wordllama package is not installed")
    root = Path(next(iter(spec.submodule_search_locations)))
    with safe_open(str(root.joinpath(*_WEIGHTS)), framework="np") as weights:
        table = weights.get_tensor("embedding.weight")
    return Model(table, Tokenizer.from_file(str(root.joinpath(*_TOKENIZER))))


def handler_text(handler: Handler, keywords: Sequence[str], split: Callable[[str], list[str]]) -> str:
    """What a handler is, in words: its operation, entity and app, its description and `keywords` (its own
    and those its entity shares).

    Parameter names are left out: with them the semantic ranking of the tuning tasks was worse (alone,
    Recall@5 0.80 without them, 0.72 with them). So is the mega-tool: its words ("entity crud", "report
    query") are shared by whole swaths of handlers and only blur each one's vector (alone, NDCG@10 of the
    tuning tasks 0.842 without it, 0.824 with it).
    """
    c = handler.coordinate
    name = " ".join(w for part in (c.operation, c.entity, c.app) for w in split(part))
    return f"{name}. {handler.description} {', '.join(keywords)}"


class Embeddings:
    """Every handler's vector and every example request's, as the model pools them (document order): made once per
    search index, and shared by every corpus's `SemanticIndex` (prism.registry.corpus), which keeps only its centre
    and one number per row besides them."""

    def __init__(self, model: Model, texts: Sequence[str], examples: Sequence[Sequence[str]]) -> None:
        import numpy as np

        self.model = model
        # Lower case on both sides: the tokenizer tells `Vendor` from `vendor`, a request's meaning does not.
        lowered = [t.lower() for t in texts]
        # Each example request's vector, with the document it belongs to; documents without examples own none.
        flat = [example.lower() for own in examples for example in own]
        previous = _latest
        self.vectors = _embed_reusing(model, lowered, previous, of_examples=False)
        self.example_vectors = _embed_reusing(model, flat, previous, of_examples=True)
        del previous  # kept by the module only until this build is remembered in its place
        self.example_owners = np.fromiter((doc for doc, own in enumerate(examples) for _ in own), dtype=np.int64,
                                          count=len(flat))
        # Where each document's examples start among them (they follow document order): a run of documents owns
        # one run of examples.
        self.example_starts = np.concatenate(([0], np.cumsum([len(own) for own in examples], dtype=np.int64)))
        # Each row's squared length, in float64: with a corpus's centre c, |v - c|² = |v|² - 2 v·c + |c|².
        self.squares = _squares(self.vectors)
        self.example_squares = _squares(self.example_vectors)
        # A corpus costs one float32 per handler and per example (~60 KB at 10,000 handlers), so as many are kept as
        # the lexical views (a miss costs 5-20 ms at 10,000 handlers).
        self._corpora: LRU[frozenset[str], SemanticIndex] = LRU(CORPORA_KEPT)
        _remember(model, lowered, self.vectors, flat, self.example_vectors)

    def __contains__(self, key: frozenset[str]) -> bool:
        """Whether the `SemanticIndex` kept under `key` is made."""
        return key in self._corpora

    def within(self, key: frozenset[str], runs: Sequence[tuple[int, int]] | None) -> SemanticIndex:
        """The `SemanticIndex` of the documents in `runs` (every document if None), kept under `key`."""
        found = self._corpora.get(key)
        if found is None:
            found = self._corpora.put(key, SemanticIndex(self, runs))
        return found


class SemanticIndex:
    """Cosines of a query with the handlers of one corpus (every handler of the index, or those in some runs of
    document numbers) and with their example requests, each vector centred on the corpus's own mean: what the
    corpus's texts share says nothing about any one of them, and another corpus's texts must not move it.

    No centred copy of the rows is made: with the corpus's centre c and a query's unit vector q (centred on c too),
    cos(q, v - c) = (q·v - q·c) / |v - c|, where q·v is one pass over the index's shared rows and |v - c| is worked
    out once per corpus from |v|² - 2 v·c + |c|² (in float64). So a corpus keeps c and one float32 per row, not its
    own copy of the rows (1 KB a row)."""

    def __init__(self, embedded: Embeddings, runs: Sequence[tuple[int, int]] | None) -> None:
        self.model = embedded.model
        self.size = len(embedded.vectors)
        self.vectors = embedded.vectors
        self.example_vectors = embedded.example_vectors
        self.example_owners = embedded.example_owners
        self.runs = _joined(runs) if runs is not None else ((0, self.size),)
        starts = embedded.example_starts
        self.example_runs = tuple((int(starts[start]), int(starts[end])) for start, end in self.runs)
        self.examples = sum(end - start for start, end in self.example_runs)
        self.center, self.scale = _centred_norms(self.vectors, embedded.squares, self.runs)
        self.example_center, self.example_scale = _centred_norms(self.example_vectors, embedded.example_squares,
                                                                 self.example_runs)

    def scores(self, query: str) -> np.ndarray | None:
        """Cosine similarity of the query with every handler (with its description, or its nearest example request
        if that is nearer); None when the query has no tokens. Documents outside the corpus score -inf."""
        import numpy as np

        ids = self.model.ids(query.lower())
        if not ids:
            return None
        pooled = self.model.table[ids].astype(np.float32).mean(axis=0)
        vector = pooled - self.center
        norm = float(np.linalg.norm(vector))
        if norm == 0.0:
            return None
        scores = _cosines(self.vectors, self.runs, self.center, self.scale, vector / norm,
                          np.full(self.size, -np.inf, dtype=np.float32))
        if self.examples:
            # A handler is as near as its description or its nearest example request, whichever is nearer: an
            # example says one way of asking, so the best one counts, not their mean (which blurs them together).
            asked = pooled - self.example_center
            asked /= max(float(np.linalg.norm(asked)), 1e-12)
            cosines = _cosines(self.example_vectors, self.example_runs, self.example_center, self.example_scale,
                               asked, np.empty(len(self.example_vectors), dtype=np.float32))
            nearest = np.full(self.size, -np.inf, dtype=np.float32)
            for start, end in self.example_runs:
                np.maximum.at(nearest, self.example_owners[start:end], cosines[start:end])
            scores = np.maximum(scores, nearest)
        return scores

    @staticmethod
    def best(scores: np.ndarray, visible: bytearray, count: int,
             accept: Callable[[int], bool] | None = None) -> list[int]:
        """Documents with the highest scores among the visible ones (and those `accept` takes), best first.

        The product ran over every row — one contiguous pass is cheaper than gathering the visible rows —
        so the visibility mask is applied here, before anything is picked.
        """
        import numpy as np

        masked = np.where(np.frombuffer(visible, dtype=np.bool_), scores, -np.inf)
        # A narrowed search (accept) may skip some: look a little deeper than asked.
        depth = min(len(masked), count * (4 if accept else 1))
        if depth <= 0:
            return []
        head = np.argpartition(-masked, depth - 1)[:depth]
        picked: list[int] = []
        for doc in head[np.argsort(-masked[head], kind="stable")].tolist():
            if masked[doc] == -np.inf or len(picked) == count:
                break
            if accept is None or accept(doc):
                picked.append(doc)
        return picked


def _joined(runs: Sequence[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    """Sorted runs of document numbers, those that touch made one: each integration is a run of its own, and a
    corpus of 39 scored run by run took a third longer."""
    joined: list[tuple[int, int]] = []
    for start, end in sorted(runs):
        if joined and joined[-1][1] == start:
            joined[-1] = (joined[-1][0], end)
        elif start < end:
            joined.append((start, end))
    return tuple(joined)


def _centred_norms(vectors: np.ndarray, squares: np.ndarray,
                   runs: Sequence[tuple[int, int]]) -> tuple[np.ndarray, np.ndarray]:
    """The mean of the rows in `runs` (what they all share says nothing about any one) and, per row, 1 / |v - mean|
    (0 outside the runs, and for a row that is the mean itself, whose cosine is 0).

    The mean is taken over the rows gathered in order, exactly as over a matrix of just those rows: a corpus's
    scores do not depend on rows outside it, down to the last bit. |v - c|² = |v|² - 2 v·c + |c|² in float64 (the
    products of float32 numbers are exact there), a block of rows at a time: no centred copy of the rows."""
    import numpy as np

    if len(runs) == 1:
        start, end = runs[0]
        chosen = vectors[start:end]
    else:
        chosen = np.concatenate([vectors[start:end] for start, end in runs]) if runs else vectors[:0]
    center = chosen.mean(axis=0) if len(chosen) else np.zeros(vectors.shape[1], dtype=np.float32)
    del chosen  # a corpus's gathered rows live only this long
    wide = center.astype(np.float64)
    center_square = float(np.vecdot(wide, wide))
    scale = np.zeros(len(vectors), dtype=np.float32)
    for start, end in runs:
        for low in range(start, end, _ROWS_AT_A_TIME):
            high = min(end, low + _ROWS_AT_A_TIME)
            squared = squares[low:high] - 2.0 * np.vecdot(vectors[low:high].astype(np.float64), wide) + center_square
            # A row equal to the mean (a corpus of one text) has no direction: rounding must not give it one.
            distinct = squared > _SAME * (squares[low:high] + center_square)
            scale[low:high] = np.where(distinct, 1.0 / np.sqrt(np.where(distinct, squared, 1.0)), 0.0)
    return center, scale


def _cosines(vectors: np.ndarray, runs: Sequence[tuple[int, int]], center: np.ndarray, scale: np.ndarray,
             unit: np.ndarray, out: np.ndarray) -> np.ndarray:
    """`out`, with the cosine of `unit` (a query centred on `center`, of length 1) and each row in `runs` centred on
    `center`: (unit·v - unit·c) / |v - c|. Rows outside the runs are left as they are."""
    import numpy as np

    offset = float(np.vecdot(center.astype(np.float64), unit.astype(np.float64)))
    for start, end in runs:
        # numpy's own single-threaded loop, not `rows @ unit`: BLAS hands a product this size to worker
        # threads, and waking them between requests cost 1-10 ms here against ~0.4 ms for 10,000 rows.
        part = np.vecdot(vectors[start:end], unit, out=out[start:end])
        part -= offset
        part *= scale[start:end]
    return out


def _squares(vectors: np.ndarray) -> np.ndarray:
    """Each row's squared length, in float64 (exact products of float32 numbers), a block of rows at a time."""
    import numpy as np

    squares = np.empty(len(vectors), dtype=np.float64)
    for low in range(0, len(vectors), _ROWS_AT_A_TIME):
        block = vectors[low:low + _ROWS_AT_A_TIME].astype(np.float64)
        squares[low:low + len(block)] = np.vecdot(block, block)
    return squares


class _Embedded:
    """The texts the latest `Embeddings` pooled (lower case) and their vectors: what the next one reuses."""

    def __init__(self, model: Model, texts: list[str], vectors: np.ndarray, example_texts: list[str],
                 example_vectors: np.ndarray) -> None:
        self.model = model
        self.texts = texts
        self.vectors = vectors
        self.example_texts = example_texts
        self.example_vectors = example_vectors


# The latest embeddings made in this process. An index is rebuilt whenever an organization imports an integration,
# and a handler's vector depends only on its text and the model: the new index takes every vector whose text the
# latest embedded, and embeds only the new texts. Replaced by each build, so an old index's vectors are kept alive
# for reuse only until the next build (they are shared with the live index's, no copy).
_latest: _Embedded | None = None
_latest_lock = threading.Lock()


def _remember(model: Model, texts: list[str], vectors: np.ndarray, example_texts: list[str],
              example_vectors: np.ndarray) -> None:
    global _latest
    with _latest_lock:
        _latest = _Embedded(model, texts, vectors, example_texts, example_vectors)


def _embed_reusing(model: Model, texts: list[str], previous: _Embedded | None,
                   of_examples: bool) -> np.ndarray:
    """`model.embed(texts)`, taking the rows of the texts `previous` embedded from it: a text's vector is the same
    whatever is embedded beside it (`Model.embed` pools each text alone)."""
    import numpy as np

    if previous is None or previous.model is not model:
        return model.embed(texts)
    known_texts, known = ((previous.example_texts, previous.example_vectors) if of_examples
                          else (previous.texts, previous.vectors))
    row_of = {text: row for row, text in enumerate(known_texts)}
    # Numbers, not a list of pairs: tens of thousands of new tuples would set off the collector's full pass over
    # every handler of the process (~0.2 s at 10,000 handlers).
    olds = np.fromiter((row_of.get(text, -1) for text in texts), dtype=np.int64, count=len(texts))
    del row_of
    found = olds >= 0
    out = np.empty((len(texts), model.dim), dtype=np.float32)
    out[found] = known[olds[found]]
    new = np.flatnonzero(~found)
    if len(new):
        out[new] = model.embed([texts[row] for row in new.tolist()])
    return out


def build(handlers: Sequence[Handler], keywords: Sequence[Sequence[str]], examples: Sequence[Sequence[str]],
          split: Callable[[str], list[str]]) -> Embeddings | None:
    """Embeddings of the handlers, each described with `keywords` (its own and those of its entity), and of each
    one's `examples` (its example requests, as the lexical index reads them)."""
    model = load_model()
    if model is None:
        return None
    # Before: this runs on a worker thread, whose heap cannot reuse what the others hold free, so the build's
    # peak would stack on top of it. After: the tokens and scratch arrays of every handler (prism.kit.heap).
    release_freed_memory()
    embedded = Embeddings(model, [handler_text(h, k, split) for h, k in zip(handlers, keywords, strict=True)],
                          examples)
    release_freed_memory()
    return embedded
