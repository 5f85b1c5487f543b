"""Fit the capability search's ranking weights on the blind tuning parts, and check the fit on parts it did not see.

    python bench/search_fit.py [--sweeps 3] [--apply]

The rerank adds up features of each (request, handler) pair with weights (prism/registry/search.py: the
first-pass score, PAIR_WEIGHT over the joint features COVERAGE_W ... EXACT_W, INTENT_WEIGHT, QUESTION_WEIGHT,
SHAPE_WEIGHT, SEMANTIC_WEIGHT; INTENT_SYNONYM and FIRST_PASS_SHAPE inside them). Each was once chosen by hand.
Here they are fitted by coordinate search: each weight in turn is scaled by each of FACTORS (within BOUND of
today's weight), and a change is kept when the objective on the fitting tasks rises; the sweeps repeat until none does.

The objective is what an agent needs of the list: R@1 + (MRR + NDCG@10) / 2 over the matchable tasks, minus
VIOLATION_COST per safe-ordering violation (bench/search_blind.py defines each), through `capability.find` on
the real registry, as served.

Method, so that the figures can be trusted: leave one set out. For each of the tuning parts, the weights are
fitted on the others and scored on it, against today's weights on the same part; only if that holds
should the weights fitted on all of them be taken (`--apply` prints them; they are copied into search.py by hand).
The held-out parts are never read here.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `bench.*` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.search_blind import answer, auc, first_right, ndcg10
from prism.registry import Registry, semantic
from prism.registry import search as search_module
from prism.registry.capability import find
from prism.registry.registry import build_registry
from prism.registry.search import index_for

HERE = Path(__file__).parent
TUNING = [HERE / f"search_blind{n}_tune.json" for n in ("", "2", "3", "4", "5", "6", "7", "8", "9", "10")]
WEIGHTS = ("PAIR_WEIGHT", "SEMANTIC_WEIGHT", "INTENT_WEIGHT", "INTENT_SYNONYM", "QUESTION_WEIGHT", "SHAPE_WEIGHT",
           "FIRST_PASS_SHAPE", "COVERAGE_W", "PAIRS_W", "NAMES_W", "PROXIMITY_W", "EXACT_W")
FACTORS = (0.5, 0.75, 1.33, 2.0)
# Every feature stays (each has tests that hold what it is for), within a factor of BOUND of today's weight; a
# synonym never counts more than the word itself.
BOUND = 4.0
CEILINGS = {"INTENT_SYNONYM": 1.0}
VIOLATION_COST = 0.05
MIN_GAIN = 1e-4
# Requests whose first result the tests hold (tests/test_search_*.py): a weight change that loses one is not taken,
# whatever the blind tasks gain. Read from the tests' own parameters, plus these.
HELD_MODULES = ("tests.test_search_shape", "tests.test_search_request_reading", "tests.test_search_intent")
HELD_FIRST = {"assign a ticket": "workflow_action/itsm/ticket/assign",
              "approve the Grainger invoice now": "workflow_action/finance/invoice/approve",
              "show me spare part 42": "entity_crud/spare_parts/spare_part/read",
              "show me spare part 3f2a9c1e-5b7d-4e8f-9a0b-1c2d3e4f5a6b": "entity_crud/spare_parts/spare_part/read"}
# Held without the embedding model too: these tests switch it off.
HELD_WITHOUT_MODEL_MODULES = ("tests.test_search_shape",)
HELD_WITHOUT_MODEL = {"show me spare part 42": "entity_crud/spare_parts/spare_part/read"}
# Tests that hold a handler among the first few rather than first.
HELD_WITHIN = {"test_everyday_words_for_receiving_and_disabling": 2}
HELD_PLANS = {"receive PO 3350 and close it": ["workflow_action/finance/purchase_order/receive",
                                               "workflow_action/finance/purchase_order/close"]}


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sweeps", type=int, default=3)
    p.add_argument("--apply", action="store_true", help="also fit on all the parts and print the weights")
    return p.parse_args()


def current() -> dict[str, float]:
    return {name: float(getattr(search_module, name)) for name in WEIGHTS}


def use(weights: dict[str, float]) -> None:
    for name, value in weights.items():
        setattr(search_module, name, value)


def scores(registry: Registry, tasks: Sequence[dict[str, Any]]) -> dict[str, float]:
    answers = {t["id"]: answer(registry, t["query"]) for t in tasks}
    matchable = [t for t in tasks if t["kind"] != "none"]
    ranks = [first_right(t, answers[t["id"]].paths) for t in matchable]
    r1 = sum(1.0 for r in ranks if r == 1) / len(matchable)
    mrr = sum(1.0 / r for r in ranks if r) / len(matchable)
    ndcg = sum(ndcg10(t, answers[t["id"]].paths) for t in matchable) / len(matchable)
    violations = sum(1 for t in tasks if not t["asks_destructive"] and (a := answers[t["id"]]).paths
                     and not a.no_match and a.destructive[0])
    unmatchable = [t for t in tasks if t["kind"] == "none"]
    no_match_auc = auc([answers[t["id"]].confidence for t in matchable],
                       [answers[t["id"]].confidence for t in unmatchable])
    return {"objective": r1 + (mrr + ndcg) / 2 - VIOLATION_COST * violations, "r_at_1": r1, "mrr": mrr,
            "ndcg_at_10": ndcg, "violations": violations, "no_match_auc": no_match_auc}


def held_by_tests(modules: tuple[str, ...] = HELD_MODULES,
                  also: dict[str, str] = HELD_FIRST) -> dict[str, tuple[str, int]]:
    """query: (expected path, within how many first results) of every `("query", "expected")` parametrization
    in `modules`, and `also`."""
    held = {query: (path, 1) for query, path in also.items()}
    for name in modules:
        module = importlib.import_module(name)
        for test_name, test in vars(module).items():
            for mark in getattr(test, "pytestmark", []):
                if mark.name == "parametrize" and mark.args[0] == ("query", "expected"):
                    within = HELD_WITHIN.get(test_name, 1)
                    held.update((q, (e, within)) for q, e in mark.args[1] if isinstance(e, str) and "/" in e)
    return held


def keeps_what_tests_hold(registry: Registry, held: dict[str, tuple[str, int]]) -> bool:
    """`held` with the embedding model; and without it, what the tests hold without it
    (HELD_WITHOUT_MODEL_MODULES and HELD_WITHOUT_MODEL)."""
    model = semantic.AVAILABLE
    try:
        if not _keeps(registry, held):
            return False
        semantic.AVAILABLE = False
        return _keeps(registry, held_by_tests(HELD_WITHOUT_MODEL_MODULES, HELD_WITHOUT_MODEL))
    finally:
        semantic.AVAILABLE = model


def _keeps(registry: Registry, held: dict[str, tuple[str, int]]) -> bool:
    index, visible = index_for(registry), tuple(registry)
    for query, (expected, within) in held.items():
        if expected not in [h.handler.path for h in find(index, query, visible, limit=5).hits[:within]]:
            return False
    return all([s.handler.path for s in find(index, query, visible, limit=5).plan] == steps
               for query, steps in HELD_PLANS.items())


def fit(registry: Registry, tasks: Sequence[dict[str, Any]], start: dict[str, float], sweeps: int) -> dict[str, float]:
    best = dict(start)
    use(best)
    best_score = scores(registry, tasks)["objective"]
    held = held_by_tests()
    assert keeps_what_tests_hold(registry, held), "today's weights must pass what the tests hold"
    for _ in range(sweeps):
        improved = False
        for name in WEIGHTS:
            for factor in FACTORS:
                value = round(best[name] * factor, 4)
                if not start[name] / BOUND <= value <= min(start[name] * BOUND, CEILINGS.get(name, value)):
                    continue
                trial = {**best, name: value}
                use(trial)
                score = scores(registry, tasks)["objective"]
                if score > best_score + MIN_GAIN and keeps_what_tests_hold(registry, held):
                    best, best_score, improved = trial, score, True
            use(best)
        if not improved:
            break
    return best


def main() -> None:
    args = parse_args()
    registry = build_registry()
    parts = {path.name: json.loads(path.read_text())["tasks"] for path in TUNING}
    today = current()
    report: dict[str, Any] = {"today": today, "folds": {}}
    for held, held_tasks in parts.items():
        fitting = [t for name, tasks in parts.items() if name != held for t in tasks]
        weights = fit(registry, fitting, today, args.sweeps)
        use(today)
        before = scores(registry, held_tasks)
        use(weights)
        after = scores(registry, held_tasks)
        use(today)
        report["folds"][held] = {"weights": weights, "before": before, "after": after}
        print(f"{held}: R@1 {before['r_at_1']:.3f} -> {after['r_at_1']:.3f}, MRR {before['mrr']:.3f} -> "
              f"{after['mrr']:.3f}, NDCG@10 {before['ndcg_at_10']:.3f} -> {after['ndcg_at_10']:.3f}, AUC "
              f"{before['no_match_auc']:.3f} -> {after['no_match_auc']:.3f}, violations {before['violations']} -> "
              f"{after['violations']}", flush=True)
        print(f"  fitted on the others: {weights}", flush=True)
    if args.apply:
        everything = [t for tasks in parts.values() for t in tasks]
        report["all"] = fit(registry, everything, today, args.sweeps)
        print(f"fitted on all parts: {report['all']}")
    (HERE / "results").mkdir(exist_ok=True)
    (HERE / "results" / "search-fit.json").write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
