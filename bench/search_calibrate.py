"""Fit the confidence of capability search (registry/capability.py CALIBRATION) on a task set.

    python bench/search_calibrate.py [--tasks bench/search_blind_tune.json]

Every result among the first 10 of every task is one example: its features (capability.features) and
whether it is right (grade 2-3, or a step of a multi-step task; no result of a `none` task is). A logistic
regression (Newton's method, a small ridge) is fitted twice, with and without the embedding model, and
its coefficients printed, to be copied into CALIBRATION. Fit on the tuning tasks only: held-out tasks are
scored with what this produced.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np

from bench.search_blind import TASKS
from prism.registry import semantic
from prism.registry.capability import find
from prism.registry.registry import build_registry
from prism.registry.search import index_for, warm

RIDGE = 0.1


def examples(tasks: list[dict[str, Any]]) -> tuple[np.ndarray, np.ndarray]:
    registry = build_registry()
    warm([registry], embeddings=semantic.AVAILABLE)
    index = index_for(registry)
    visible = tuple(registry)
    rows, labels = [], []
    for task in tasks:
        right = {p for p, g in task["relevant"].items() if g >= 2} | set(task.get("steps", ()))
        for hit in find(index, task["query"], visible, limit=10, plan=False).hits:
            rows.append(hit.features)
            labels.append(1.0 if hit.handler.path in right else 0.0)
    return np.array(rows, dtype=np.float64), np.array(labels)


def fit(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    design = np.hstack([np.ones((len(x), 1)), x])
    w = np.zeros(design.shape[1])
    for _ in range(50):
        p = 1.0 / (1.0 + np.exp(-design @ w))
        gradient = design.T @ (p - y) + RIDGE * np.r_[0.0, w[1:]]
        hessian = design.T @ (design * (p * (1 - p))[:, None]) + RIDGE * np.diag(np.r_[0.0, np.ones(len(w) - 1)])
        w -= np.linalg.solve(hessian, gradient)
    return w


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tasks", type=Path, default=TASKS)
    tasks = json.loads(p.parse_args().tasks.read_text())["tasks"]
    installed = semantic.AVAILABLE
    for with_model in ((True, False) if installed else (False,)):
        semantic.AVAILABLE = with_model
        x, y = examples(tasks)
        w = fit(x, y)
        print(f"{with_model}: ({', '.join(f'{v:.2f}' for v in w)}),  # {len(y)} results, {int(y.sum())} right")
    semantic.AVAILABLE = installed


if __name__ == "__main__":
    main()
