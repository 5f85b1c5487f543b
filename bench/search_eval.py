"""How well capability_search finds the right handler: Recall@5, MRR and NDCG@10, with and without rerank.

    python bench/search_eval.py [--tasks bench/search_tasks.json]

Each task is a plain-language request and the coordinate(s) that answer it. Tasks marked
`"unseen_words": true` were phrased only in words that appear in no handler's coordinate (no mega-tool,
app, entity or operation name, after the same word splitting and stemming the index uses); the script
checks that claim against today's catalog, which has grown since: a task whose words a handler's name now
uses is counted with the named tasks, and the script says how many and which words. The search runs over
the whole registry (built-in apps and installed `prism.apps` packages) as an owner sees it (every handler
visible), through the same SearchIndex the endpoint uses.

Three passes: the first pass alone, rerank with its lexical part only (the semantic extra switched
off), and rerank as the endpoint runs it (with the semantic part when the `semantic` extra is
installed; the row says which ranker ran).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `bench.*` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.harness import write_result
from prism.registry import Registry, semantic
from prism.registry.registry import build_registry
from prism.registry.search import index_for, terms, warm

TASKS = Path(__file__).with_name("search_tasks.json")
DEPTH = 50  # MRR counts a hit anywhere in the first 50
# Held-out tasks by when they were written (their `added`; search_tasks.json's `about` says how).
ADDED = {"semantic-rerank": "written for the semantic pass", "entity-keywords": "written for the entity keywords",
         "operation-intent": "written blind for the operation intent",
         "request-shape": "written blind before the request shape"}


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tasks", type=Path, default=TASKS)
    return p.parse_args()


def name_vocabulary(registry: Registry) -> set[str]:
    words: set[str] = set()
    for handler in registry:
        c = handler.coordinate
        for part in (c.mega_tool, c.app, c.entity, c.operation):
            words.update(terms(part))
    return words


def check_unseen(tasks: list[dict[str, Any]], vocabulary: set[str]) -> list[str]:
    """Unmarks, and lists, the tasks marked `unseen_words` whose words a handler's name uses now."""
    problems = []
    for task in tasks:
        if task.get("unseen_words"):
            shared = sorted(set(terms(task["query"])) & vocabulary)
            if shared:
                task["unseen_words"] = False
                problems.append(f"{task['query']!r} uses handler-name words {shared}")
    return problems


def ranks(registry: Registry, tasks: list[dict[str, Any]], *, rerank: bool) -> tuple[list[list[int]], str]:
    """For each task, the 1-based ranks at which its expected coordinates were found; and the ranker."""
    index = index_for(registry)
    visible = tuple(registry)
    found = []
    rankers = set()
    for task in tasks:
        hits, ranker = index.ranked(task["query"], visible, limit=DEPTH, rerank=rerank)
        rankers.add(ranker)
        paths = [h.handler.path for h in hits]
        found.append([paths.index(e) + 1 for e in task["expected"] if e in paths])
    return found, "/".join(sorted(rankers))


def metrics(tasks: list[dict[str, Any]], found: list[list[int]]) -> dict[str, float]:
    recall5, rr, ndcg = [], [], []
    for task, positions in zip(tasks, found, strict=True):
        recall5.append(1.0 if any(r <= 5 for r in positions) else 0.0)
        rr.append(1.0 / min(positions) if positions else 0.0)
        dcg = sum(1.0 / math.log2(r + 1) for r in positions if r <= 10)
        ideal = sum(1.0 / math.log2(i + 2) for i in range(min(len(task["expected"]), 10)))
        ndcg.append(dcg / ideal)
    return {"tasks": len(tasks), "recall_at_5": round(statistics.fmean(recall5), 3),
            "mrr": round(statistics.fmean(rr), 3), "ndcg_at_10": round(statistics.fmean(ndcg), 3)}


def main() -> None:
    args = parse_args()
    tasks: list[dict[str, Any]] = json.loads(args.tasks.read_text())["tasks"]
    registry = build_registry()
    missing = sorted({e for t in tasks for e in t["expected"] if registry.get_path(e) is None})
    if missing:
        sys.exit(f"tasks name coordinates that do not exist: {missing}")
    problems = check_unseen(tasks, name_vocabulary(registry))
    if problems:
        print(f"{len(problems)} tasks marked unseen_words use words of today's handler names; counted as named:\n  "
              + "\n  ".join(problems) + "\n")
    rankers: dict[str, str] = {}
    subsets = {"all": tasks, "named": [t for t in tasks if not t.get("unseen_words")],
               "unseen words": [t for t in tasks if t.get("unseen_words")],
               "tuning": [t for t in tasks if t.get("split") == "tuning"],
               "tuning, unseen words": [t for t in tasks if t.get("split") == "tuning" and t.get("unseen_words")],
               "held-out (never tuned on)": [t for t in tasks if t.get("split") == "held-out"],
               "held-out, unseen words": [t for t in tasks if t.get("split") == "held-out" and t.get("unseen_words")],
               "tuning, written blind": [t for t in tasks if t.get("split") == "tuning" and t.get("added")],
               **{f"held-out, {label}": [t for t in tasks if t.get("split") == "held-out" and t.get("added") == added]
                  for added, label in ADDED.items()}}
    rows: dict[str, dict[str, Any]] = {}
    misses: dict[str, list[dict[str, Any]]] = {}
    semantic_installed = semantic.AVAILABLE
    warm([registry], embeddings=True)
    passes = [("first pass", False, False), ("lexical rerank", True, False)]
    if semantic_installed:
        passes.append(("semantic rerank", True, True))
    for label, rerank, with_semantic in passes:
        semantic.AVAILABLE = with_semantic  # the module's own switch: off gives the lexical rerank
        found_all, ranker = ranks(registry, tasks, rerank=rerank)
        rankers[label] = ranker
        by_query = {t["query"]: f for t, f in zip(tasks, found_all, strict=True)}
        for subset, chosen in subsets.items():
            rows[f"{subset} / {label}"] = metrics(chosen, [by_query[t["query"]] for t in chosen])
        # Only tuning tasks are listed one by one: held-out tasks are reported in aggregate, so that
        # nobody tunes the search on them by reading what they ask.
        misses[label] = [{"query": t["query"], "expected": t["expected"], "ranks": f}
                         for t, f in zip(tasks, found_all, strict=True)
                         if t.get("split") == "tuning" and not any(r <= 5 for r in f)]
    semantic.AVAILABLE = semantic_installed
    print(f"{len(registry)} handlers, {len(tasks)} tasks ({len(subsets['unseen words'])} in unseen words)")
    print("rankers: " + ", ".join(f"{label} = {ranker}" for label, ranker in rankers.items())
          + (f" ({semantic.MODEL})" if semantic_installed else " (semantic extra not installed)") + "\n")
    print("| tasks / pass | n | Recall@5 | MRR | NDCG@10 |\n|---|---:|---:|---:|---:|")
    for name, m in rows.items():
        print(f"| {name} | {m['tasks']} | {m['recall_at_5']:.3f} | {m['mrr']:.3f} | {m['ndcg_at_10']:.3f} |")
    for label, missed in misses.items():
        for miss in missed:
            print(f"  tuning task not in top 5 ({label}): {miss['query']!r} → {miss['expected']}"
                  f" at {miss['ranks'] or 'none'}")
    stem = f"search-eval-{datetime.now(UTC):%Y%m%dT%H%M%SZ}"
    path = write_result(stem, {"handlers": len(registry), "rankers": rankers,
                               "model": semantic.MODEL if semantic_installed else None, "metrics": rows,
                               "misses": misses})
    print(f"results: {path}")


if __name__ == "__main__":
    main()
