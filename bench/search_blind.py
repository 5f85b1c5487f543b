"""Capability search on requests written blind: R@1, R@5, MRR, NDCG@10, "nothing fits" and safe ordering.

    python bench/search_blind.py [--tasks bench/search_blind_tune.json] [--lexical]

The task sets were written by people who saw only the catalog (each handler's path, description and
arguments) and a list of business situations — never the ranker, its synonym table or earlier task sets.
Each task is a request and how the handlers answer it:

- `kind`: `single` (one handler does it), `multi` (ordered `steps`, one handler each) or `none` (no handler
  does it: flights, payroll, the weather);
- `relevant`: `{path: grade}`, 3 the exact handler, 2 a good alternative, 1 related;
- `asks_destructive`: whether the request asks for an irreversible act (delete, void, cancel, retire ...).

The search runs on the whole registry as an owner sees it (built-in apps and installed `prism.apps`
packages, every handler visible), through `capability.find`, what capability_search and `prism_search`
answer with. Metrics:

- R@1: the first result is right — grade 2 or 3 for a single task, the first step for a multi-step one;
  R@5 and MRR the same, within the first 5 and by the rank of the first right result (0 beyond 10);
- NDCG@10 with graded gains (2^grade - 1) over every relevant handler (every step of a multi-step task);
- no-match AUC: the area under the ROC curve of the first result's confidence, matchable tasks against
  `none` tasks (1.0: every matchable task is more confident than every unmatchable one);
- no-match rate: the share of `none` tasks answered empty or flagged (`no_match`), and the share of
  matchable tasks wrongly flagged;
- safe-ordering violations: a destructive handler first (and not flagged) for a request that does not ask
  for an irreversible act, unless the writer graded that handler the exact answer (3): the request asks for its
  very act, one the writer did not count as irreversible ("disable the agent til morning", `agent/disable`).
  Those are listed apart;
- word overlap: the share of a request's words (after the index's own tokenisation: split, stop words out,
  stemmed) found in its grade-3 handlers' own text (coordinate and description). Low overlap is what real
  requests look like; a set with high overlap flatters a lexical ranker. "with examples" counts the handlers'
  example requests (`Handler.examples`, written from the catalog alone) as their text too.

`--lexical` switches the embedding model off (the ranking without the embedding model); `--synthetic 10000`
adds 10,000 synthetic handlers whose words overlap the real ones (bench/synthetic_app.py): whether the ranking
holds at scale, and its latency there. With `--enabled K` the synthetic apps are imported integrations instead
(each app one, as `integration/import-openapi` makes them) and the search runs as an organization that enabled the
first K (in name order): it sees and ranks with the built-in handlers and those K apps' (docs/search.md, "Whose
statistics"); `view_s` is what its first search costs on top of the index (its corpus and embedding rows).
`--imported` adds eight real services as imported integrations, all enabled (bench/imported_services.py): for the
sets written on their catalog, `search_imported_tune.json` and `search_imported_heldout.json`.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import json
import math
import os
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from weakref import WeakKeyDictionary

if __package__ in (None, ""):  # run as a script: make `bench.*` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.harness import write_result
from bench.imported_services import SERVICES, with_services
from prism.registry import Handler, Registry, semantic
from prism.registry.capability import find
from prism.registry.registry import build_registry
from prism.registry.search import index_for, terms

TASKS = Path(__file__).with_name("search_blind_tune.json")
SHOWN = 10  # results asked for, as an agent would; R@5, MRR and NDCG@10 look no deeper


@dataclass(frozen=True)
class Answer:
    paths: list[str]
    destructive: list[bool]
    confidence: float  # the first result's; 0 when there is none
    no_match: bool
    ranker: str
    seconds: float  # wall time of the search
    cpu: float  # CPU time of the thread that searched: what the search costs on a machine shared with others


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tasks", type=Path, default=TASKS)
    p.add_argument("--lexical", action="store_true", help="switch the embedding model off")
    p.add_argument("--show", type=int, default=0, help="print this many misses with what came first")
    p.add_argument("--synthetic", type=int, default=0, metavar="N",
                   help="add N synthetic handlers (bench/synthetic_app.py) as distractors: the ranking at scale")
    p.add_argument("--enabled", type=int, default=None, metavar="K",
                   help="with --synthetic: the synthetic apps are integrations, K of them enabled by the searcher")
    p.add_argument("--imported", action="store_true",
                   help="add eight real services as integrations, all enabled (bench/imported_services.py); for "
                        "bench/search_imported_*.json")
    return p.parse_args()


def answer(registry: Registry, query: str, enabled: frozenset[str] | None = None) -> Answer:
    """`enabled`: the integrations the searching organization enabled (None: all of them)."""
    index = index_for(registry)
    view = index if enabled is None else index.view(enabled)
    visible = everything(registry, enabled)
    started, cpu = time.perf_counter(), time.thread_time()
    found = find(view, query, visible, limit=SHOWN)
    seconds, cpu = time.perf_counter() - started, time.thread_time() - cpu
    hits = found.hits
    return Answer([h.handler.path for h in hits], [h.handler.destructive for h in hits],
                  hits[0].confidence if hits else 0.0, found.no_match or not hits, found.ranker, seconds, cpu)


def everything(registry: Registry, enabled: frozenset[str] | None = None) -> tuple[Handler, ...]:
    """Every handler (of the built-in apps and the `enabled` integrations), as one tuple per registry: a caller's
    visible handlers are memoised per grant (registry/visibility.py), and the index keeps a visibility mask per
    tuple, so a fresh tuple per search would time the mask's construction (2-3 ms at 10,000 handlers), which a
    served search does once per grant."""
    kept = _EVERYTHING.setdefault(registry, {})
    held = kept.get(enabled)
    if held is None:
        held = kept[enabled] = tuple(h for h in registry if enabled is None or h.integration is None
                                     or h.integration in enabled)
    return held


def as_integrations(registry: Registry, apps: Sequence[str]) -> Registry:
    """The registry with these apps' handlers as imported integrations, one per app."""
    made = Registry()
    for handler in registry:
        app = handler.coordinate.app
        made.add(dataclasses.replace(handler, integration=app) if app in apps else handler)
    made.apps.update(registry.apps)
    return made.freeze()


_EVERYTHING: WeakKeyDictionary[Registry, dict[frozenset[str] | None, tuple[Handler, ...]]] = WeakKeyDictionary()


def first_right(task: dict[str, Any], paths: Sequence[str]) -> int | None:
    """1-based rank of the first right result: a grade 2-3 handler, or a multi-step task's first step."""
    if task["kind"] == "multi":
        wanted = {task["steps"][0]}
    else:
        wanted = {p for p, g in task["relevant"].items() if g >= 2}
    return next((i + 1 for i, p in enumerate(paths) if p in wanted), None)


def ndcg10(task: dict[str, Any], paths: Sequence[str]) -> float:
    grades: dict[str, int] = dict(task["relevant"])
    for step in task.get("steps", ()):
        grades[step] = 3
    dcg = sum((2 ** grades.get(p, 0) - 1) / math.log2(i + 2) for i, p in enumerate(paths[:10]))
    ideal = sum((2 ** g - 1) / math.log2(i + 2) for i, g in enumerate(sorted(grades.values(), reverse=True)[:10]))
    return dcg / ideal if ideal else 0.0


def auc(positives: Sequence[float], negatives: Sequence[float]) -> float:
    """Mann-Whitney: the chance that a random positive scores above a random negative (ties count half)."""
    if not positives or not negatives:
        return float("nan")
    wins = sum(1.0 if p > n else 0.5 if p == n else 0.0 for p in positives for n in negatives)
    return wins / (len(positives) * len(negatives))


def own_text_terms(registry: Registry, path: str, *, with_examples: bool = False) -> set[str]:
    handler = registry.get_path(path)
    assert handler is not None
    own = set(terms(handler.coordinate.path)) | set(terms(handler.description))
    return own.union(*(terms(e) for e in handler.examples)) if with_examples else own


def overlap(registry: Registry, task: dict[str, Any], *, with_examples: bool = False) -> float | None:
    words = set(terms(task["query"]))
    exact = [p for p, g in task["relevant"].items() if g == 3]
    if not words or not exact:
        return None
    text = set().union(*(own_text_terms(registry, p, with_examples=with_examples) for p in exact))
    return len(words & text) / len(words)


def mean(values: Sequence[float]) -> float:
    return round(statistics.fmean(values), 3) if values else float("nan")


def evaluate(registry: Registry, tasks: list[dict[str, Any]],
             enabled: frozenset[str] | None = None) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    matchable = [t for t in tasks if t["kind"] != "none"]
    unmatchable = [t for t in tasks if t["kind"] == "none"]
    answers = {t["id"]: answer(registry, t["query"], enabled) for t in tasks}
    rows: dict[str, Any] = {}
    for name, chosen in (("all matchable", matchable), ("single", [t for t in matchable if t["kind"] == "single"]),
                         ("multi-step", [t for t in matchable if t["kind"] == "multi"])):
        ranks = [first_right(t, answers[t["id"]].paths) for t in chosen]
        rows[name] = {"tasks": len(chosen), "r_at_1": mean([1.0 if r == 1 else 0.0 for r in ranks]),
                      "r_at_5": mean([1.0 if r is not None and r <= 5 else 0.0 for r in ranks]),
                      "mrr": mean([1.0 / r if r else 0.0 for r in ranks]),
                      "ndcg_at_10": mean([ndcg10(t, answers[t["id"]].paths) for t in chosen]),
                      "overlap": mean([o for t in chosen if (o := overlap(registry, t)) is not None]),
                      "overlap_with_examples": mean([o for t in chosen
                                                     if (o := overlap(registry, t, with_examples=True)) is not None])}
    destructive_first = [t for t in tasks if not t["asks_destructive"] and (a := answers[t["id"]]).paths
                         and not a.no_match and a.destructive[0]]
    # The writer graded that very handler as the exact answer: the request asks for its act, which the writer
    # did not count as irreversible ("disable the ap-triage agent til morning": `agent/disable`, which `enable`
    # takes back).
    asked_for = [t["id"] for t in destructive_first if t["relevant"].get(answers[t["id"]].paths[0]) == 3]
    violations = [t["id"] for t in destructive_first if t["id"] not in asked_for]
    services = sorted({t["service"] for t in matchable if "service" in t})  # the imported sets name theirs
    by_service = {service: {"tasks": len(ranks), "r_at_1": mean([1.0 if r == 1 else 0.0 for r in ranks]),
                            "r_at_5": mean([1.0 if r is not None and r <= 5 else 0.0 for r in ranks])}
                  for service in services
                  for ranks in [[first_right(t, answers[t["id"]].paths) for t in matchable
                                 if t.get("service") == service]]}
    seconds = sorted(a.seconds for a in answers.values())
    cpu = sorted(a.cpu for a in answers.values())
    summary = {
        "tasks": len(tasks), "matchable": len(matchable), "none": len(unmatchable),
        "rankers": sorted({a.ranker for a in answers.values()}), "metrics": rows, "by_service": by_service,
        # Four decimals: a figure at a target's bar (0.90) must say on which side of it it falls.
        "no_match_auc": round(auc([answers[t["id"]].confidence for t in matchable],
                                  [answers[t["id"]].confidence for t in unmatchable]), 4),
        "none_flagged": mean([1.0 if answers[t["id"]].no_match else 0.0 for t in unmatchable]),
        "matchable_flagged": mean([1.0 if answers[t["id"]].no_match else 0.0 for t in matchable]),
        "safe_ordering_violations": len(violations), "violations": violations,
        "destructive_first_graded_exact": asked_for,
        "latency_ms": {"p50": round(1000 * seconds[len(seconds) // 2], 2), "max": round(1000 * seconds[-1], 2),
                       "cpu_p50": round(1000 * cpu[len(cpu) // 2], 2), "cpu_max": round(1000 * cpu[-1], 2)},
    }
    details = [{"id": t["id"], "kind": t["kind"], "query": t["query"], "first": answers[t["id"]].paths[:3],
                "confidence": round(answers[t["id"]].confidence, 4), "no_match": answers[t["id"]].no_match,
                "rank": first_right(t, answers[t["id"]].paths) if t["kind"] != "none" else None,
                "expected": t.get("steps") or [p for p, g in t["relevant"].items() if g == 3]}
               for t in tasks]
    return summary, details


def check(tasks: list[dict[str, Any]]) -> list[str]:
    """What in the task list does not have the shape the metrics read (see the module docstring)."""
    problems = []
    ids = [t.get("id") for t in tasks]
    if len(set(ids)) != len(ids) or None in ids:
        problems.append("every task needs an id of its own")
    for t in tasks:
        name = t.get("id", t.get("query"))
        if not isinstance(t.get("query"), str) or not t["query"].strip():
            problems.append(f"{name}: no query")
        if t.get("kind") not in ("single", "multi", "none"):
            problems.append(f"{name}: kind must be single, multi or none")
        if not isinstance(t.get("relevant"), dict) or (t.get("kind") != "none") != bool(t.get("relevant")):
            problems.append(f"{name}: relevant must name handlers exactly when the task is matchable")
        if t.get("kind") == "multi" and not t.get("steps"):
            problems.append(f"{name}: a multi-step task needs its steps")
        if not isinstance(t.get("asks_destructive"), bool):
            problems.append(f"{name}: asks_destructive must be true or false")
    return problems


def main() -> None:
    args = parse_args()
    tasks: list[dict[str, Any]] = json.loads(args.tasks.read_text())["tasks"]
    extra: list[str] = []
    if args.synthetic:
        os.environ["PRISM_BENCH_HANDLERS"] = str(args.synthetic)
        from bench.synthetic_app import specs
        extra = specs().split(",")
    problems = check(tasks)
    if problems:
        sys.exit("the task file does not have the expected shape:\n  " + "\n  ".join(problems[:20]))
    registry = build_registry(extra)
    if args.imported:
        registry = with_services(registry)
    missing = sorted({p for t in tasks for p in [*t["relevant"], *t.get("steps", ())] if registry.get_path(p) is None})
    if missing:
        sys.exit(f"tasks name coordinates that do not exist: {missing}")
    enabled = frozenset(SERVICES) if args.imported else None
    if args.enabled is not None:
        synthetic = sorted({h.coordinate.app for h in registry if h.func.__module__.startswith("bench.")})
        registry = as_integrations(registry, synthetic)
        enabled = frozenset(synthetic[:args.enabled])
    if args.lexical:
        semantic.AVAILABLE = False
    # The first search of a fresh process pays for the index, the model and the handler embeddings.
    started = time.perf_counter()
    answer(registry, tasks[0]["query"])
    first_call = time.perf_counter() - started
    # ...and an organization's first search for its corpus (`--enabled`): its statistics and embedding rows.
    started = time.perf_counter()
    answer(registry, tasks[0]["query"], enabled)
    view_call = time.perf_counter() - started
    # As `prism serve` does once its app is built (kit/collector.py): what exists now is never collected, so
    # a full collection does not walk 10,000 handlers in the middle of a search (a 360 ms pause here).
    gc.freeze()
    summary, details = evaluate(registry, tasks, enabled)
    summary["handlers"] = len(registry)
    summary["visible_handlers"] = len(everything(registry, enabled))
    summary["first_call_s"] = round(first_call, 2)
    if enabled is not None:
        summary["view_s"] = round(view_call, 3)
    summary["model"] = semantic.MODEL if semantic.AVAILABLE else None
    print(f"{args.tasks.name}: {len(tasks)} tasks ({summary['matchable']} matchable, {summary['none']} with no "
          f"matching handler), {len(registry)} handlers, ranker {'/'.join(summary['rankers'])}"
          + (f" ({summary['model']})" if summary["model"] else "") + "\n")
    print("| tasks | n | R@1 | R@5 | MRR | NDCG@10 | word overlap | with examples |\n"
          "|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, m in summary["metrics"].items():
        print(f"| {name} | {m['tasks']} | {m['r_at_1']:.3f} | {m['r_at_5']:.3f} | {m['mrr']:.3f} | "
              f"{m['ndcg_at_10']:.3f} | {m['overlap']:.2f} | {m['overlap_with_examples']:.2f} |")
    print(f"\nno-match AUC {summary['no_match_auc']:.4f}; `none` tasks flagged {summary['none_flagged']:.3f}; "
          f"matchable tasks flagged {summary['matchable_flagged']:.3f}; safe-ordering violations "
          f"{summary['safe_ordering_violations']} {summary['violations']} (destructive first and graded the exact "
          f"answer: {summary['destructive_first_graded_exact']}); latency p50 "
          f"{summary['latency_ms']['p50']} ms, max {summary['latency_ms']['max']} ms (CPU p50 "
          f"{summary['latency_ms']['cpu_p50']} ms, max {summary['latency_ms']['cpu_max']} ms); first call "
          f"(index, model and embeddings built) {summary['first_call_s']} s"
          + (f"; the organization's first ({summary['visible_handlers']} handlers visible) {summary['view_s']} s"
             if "view_s" in summary else ""))
    if summary["by_service"]:
        print("\n| service | n | R@1 | R@5 |\n|---|---:|---:|---:|")
        for service, m in summary["by_service"].items():
            print(f"| {service} | {m['tasks']} | {m['r_at_1']:.3f} | {m['r_at_5']:.3f} |")
    misses = [d for d in details
              if (d["kind"] != "none" and d["rank"] != 1) or (d["kind"] == "none" and not d["no_match"])]
    for d in misses[:args.show]:
        print(f"  {d['id']} {d['kind']} {d['query']!r}\n     expected {d['expected']}, rank {d['rank']}, "
              f"conf {d['confidence']}, flagged {d['no_match']}, got {d['first']}")
    path = write_result(f"search-blind-{datetime.now(UTC):%Y%m%dT%H%M%SZ}",
                        {"tasks_file": str(args.tasks), **summary, "details": details})
    print(f"results: {path}")


if __name__ == "__main__":
    main()
