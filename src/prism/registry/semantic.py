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
# Corpora (prism.registry.corpus) whose centred rows are kept per index, within a bound on their rows.
CORPORA_KEPT = 16


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
    search index, and the stuff each corpus's `SemanticIndex` is made of (prism.registry.corpus)."""

    def __init__(self, model: Model, texts: Sequence[str], examples: Sequence[Sequence[str]]) -> None:
        import numpy as np

        self.model = model
        # Lower case on both sides: the tokenizer tells `Vendor` from `vendor`, a request's meaning does not.
        self.vectors = model.embed([t.lower() for t in texts])
        # Each example request's vector, with the document it belongs to; documents without examples own none.
        flat = [example for own in examples for example in own]
        self.example_vectors = model.embed([e.lower() for e in flat])
        self.example_owners = np.fromiter((doc for doc, own in enumerate(examples) for _ in own), dtype=np.int64,
                                          count=len(flat))
        # At most twice the rows of the whole index, besides its own vectors: a corpus of a few integrations is
        # small, and one of nearly all of them comes back in ~20 ms at 10,000 handlers.
        self._corpora: LRU[frozenset[str], SemanticIndex] = LRU(
            CORPORA_KEPT, max_weight=2 * (len(self.vectors) + len(self.example_vectors)),
            weigh=lambda index: len(index.rows) + len(index.example_rows))

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
    """Unit vectors of the handlers of one corpus (every handler of the index, or those in some runs of document
    numbers) and of their example requests, each centred on the corpus's own mean: what the corpus's texts share
    says nothing about any one of them, and another corpus's texts must not move it."""

    def __init__(self, embedded: Embeddings, runs: Sequence[tuple[int, int]] | None) -> None:
        import numpy as np

        self.model = embedded.model
        self.size = len(embedded.vectors)
        if runs is None:
            self.documents = None
            self.rows, self.center = _unit_rows(embedded.vectors.copy())
            chosen = np.ones(len(embedded.example_owners), dtype=np.bool_)
        else:
            self.documents = np.concatenate([np.arange(start, end, dtype=np.int64) for start, end in runs]
                                            or [np.zeros(0, dtype=np.int64)])
            self.rows, self.center = _unit_rows(embedded.vectors[self.documents])
            member = np.zeros(self.size, dtype=np.bool_)
            member[self.documents] = True
            chosen = member[embedded.example_owners]
        self.example_rows, self.example_center = _unit_rows(embedded.example_vectors[chosen])
        self.example_owners = embedded.example_owners[chosen]

    def scores(self, query: str) -> np.ndarray | None:
        """Cosine similarity of the query with every handler (with its description, or its nearest example request
        if that is nearer); None when the query has no tokens."""
        import numpy as np

        ids = self.model.ids(query.lower())
        if not ids:
            return None
        pooled = self.model.table[ids].astype(np.float32).mean(axis=0)
        vector = pooled - self.center
        norm = float(np.linalg.norm(vector))
        if norm == 0.0:
            return None
        # numpy's own single-threaded loop, not `rows @ vector`: BLAS hands a product this size to worker
        # threads, and waking them between requests cost 1-10 ms here against ~0.4 ms for 10,000 rows.
        scores: np.ndarray = np.vecdot(self.rows, vector / norm)
        if self.documents is not None:  # in the index's document order; documents outside the corpus never score
            local, scores = scores, np.full(self.size, -np.inf, dtype=np.float32)
            scores[self.documents] = local
        if len(self.example_rows):
            # A handler is as near as its description or its nearest example request, whichever is nearer: an
            # example says one way of asking, so the best one counts, not their mean (which blurs them together).
            asked = pooled - self.example_center
            asked /= max(float(np.linalg.norm(asked)), 1e-12)
            nearest = np.full(len(scores), -np.inf, dtype=np.float32)
            np.maximum.at(nearest, self.example_owners, np.vecdot(self.example_rows, asked))
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


def _unit_rows(vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The vectors (changed in place) centred on their mean (what they all share says nothing about any one) and
    normalised, with that mean."""
    import numpy as np

    center = vectors.mean(axis=0) if len(vectors) else np.zeros(vectors.shape[1], dtype=np.float32)
    vectors -= center  # in place: no second copy of the matrix, even for a moment
    vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    return vectors, center


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
