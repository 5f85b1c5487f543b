"""Fit the confidence of capability search (registry/capability.py CALIBRATION) on task sets.

    python bench/search_calibrate.py [--tasks bench/search_blind_tune.json ...] [--check]

Every result among the first 10 of every task is one example: its features (capability.features) and
whether it is right (grade 2-3, or a step of a multi-step task; no result of a `none` task is). A logistic
regression (Newton's method, a small ridge) is fitted twice, with and without the embedding model, and
its coefficients printed, to be copied into CALIBRATION. The default tasks are every tuning part
(bench/search_fit.py's TUNING): held-out tasks are scored with what this produced, never fitted on.

`--check` leaves one set out: for each task set, the coefficients are fitted on the others, and the no-match
AUC of the set left out (the first result's confidence, matchable tasks against `none` tasks) is printed with
those coefficients and with CALIBRATION as it stands. A new feature or refit is taken only if it holds there.
It needs two sets or more. Like the fit, it reads the results without a plan (`find(..., plan=False)`): where
a multi-step request's plan puts another handler first, search_blind.py's AUC (plan on) differs a little.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np

from bench.search_blind import auc
from bench.search_fit import TUNING
from prism.registry import semantic
from prism.registry.capability import CALIBRATION, find
from prism.registry.model import Handler
from prism.registry.registry import build_registry
from prism.registry.search import SearchIndex, index_for, warm

RIDGE = 0.1


@dataclass
class Examples:
    """One task set's results: the features of each (rows) with whether it is right (labels), and per task
    the features of its first result (None when it has none) and whether some handler does the task."""

    rows: list[tuple[float, ...]]
    labels: list[float]
    firsts: list[tuple[float, ...] | None]
    matchable: list[bool]


def examples(tasks: list[dict[str, Any]], index: SearchIndex, visible: tuple[Handler, ...]) -> Examples:
    found = Examples([], [], [], [])
    for task in tasks:
        right = {p for p, g in task["relevant"].items() if g >= 2} | set(task.get("steps", ()))
        hits = find(index, task["query"], visible, limit=10, plan=False).hits
        for hit in hits:
            found.rows.append(hit.features)
            found.labels.append(1.0 if hit.handler.path in right else 0.0)
        found.firsts.append(hits[0].features if hits else None)
        found.matchable.append(task["kind"] != "none")
    return found


def fit(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    design = np.hstack([np.ones((len(x), 1)), x])
    w = np.zeros(design.shape[1])
    for _ in range(50):
        p = 1.0 / (1.0 + np.exp(-design @ w))
        gradient = design.T @ (p - y) + RIDGE * np.r_[0.0, w[1:]]
        hessian = design.T @ (design * (p * (1 - p))[:, None]) + RIDGE * np.diag(np.r_[0.0, np.ones(len(w) - 1)])
        w -= np.linalg.solve(hessian, gradient)
    return w


def fitted(sets: list[Examples]) -> np.ndarray:
    return fit(np.array([r for s in sets for r in s.rows], dtype=np.float64),
               np.array([y for s in sets for y in s.labels]))


def no_match_auc(examples: Examples, w: np.ndarray) -> float:
    def confidence(first: tuple[float, ...] | None) -> float:
        return 0.0 if first is None else float(1.0 / (1.0 + np.exp(-(w[0] + np.dot(w[1:], first)))))
    scored = [(confidence(f), m) for f, m in zip(examples.firsts, examples.matchable, strict=True)]
    return auc([c for c, m in scored if m], [c for c, m in scored if not m])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tasks", type=Path, nargs="+", default=TUNING)
    p.add_argument("--check", action="store_true", help="leave one set out: the no-match AUC of each set")
    args = p.parse_args()
    if args.check and len(args.tasks) < 2:
        p.error("--check leaves one task set out: give two or more")
    parts = {str(path): json.loads(path.read_text())["tasks"] for path in args.tasks}
    registry = build_registry()
    installed = semantic.AVAILABLE
    for with_model in ((True, False) if installed else (False,)):
        semantic.AVAILABLE = with_model
        warm([registry], embeddings=with_model)
        index, visible = index_for(registry), tuple(registry)
        sets = {name: examples(tasks, index, visible) for name, tasks in parts.items()}
        w = fitted(list(sets.values()))
        labels = [y for s in sets.values() for y in s.labels]
        print(f"{with_model}: ({', '.join(f'{v:.2f}' for v in w)}),  # {len(labels)} results, {int(sum(labels))} right")
        if args.check:
            now = np.array(CALIBRATION[with_model])
            for name, held in sets.items():
                others = fitted([s for other, s in sets.items() if other != name])
                print(f"  {Path(name).name}: no-match AUC {no_match_auc(held, now):.3f} as CALIBRATION stands, "
                      f"{no_match_auc(held, others):.3f} fitted on the other sets")
    semantic.AVAILABLE = installed


if __name__ == "__main__":
    main()
