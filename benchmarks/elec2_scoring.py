"""Diagnosis of the Elec2 gap: accuracy when each step is scored before versus after learning it.

Our protocol (PROTOCOLS.md section 4) is test-then-train: the prediction for step t is made by the
state that has learned steps 0..t-1. Scoring the same step with the state that has already learned
(x_t, y_t) leaks the label into its own prediction; on a stream whose label repeats 85% of the time a
learner with a large step size then looks like a near-perfect tracker. This script measures both
scorings for GLN and NCTL (the paper's Elec2 settings, 5 features) and prints them as JSON. It is a
diagnosis, never a result: only the test-then-train numbers are reported as ours.

    python benchmarks/elec2_scoring.py [--data-dir DIR] [--steps N] [--learners gln nctl]
"""

import argparse
import json
import time

import numpy as np

import nctl
from nctl.experiments.runners import tree_depth
from nctl.streams import electricity

LEARNING_RATE = 0.1  # the paper's Elec2 step size for NCTL and GLN


def make(name: str, n_steps: int):
    if name == "gln":
        return nctl.GLN(learning_rate=LEARNING_RATE)
    return nctl.NCTL(learning_rate=LEARNING_RATE, depth=tree_depth(n_steps))


def scored_both_ways(learner, X: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """P(y_t = 1) from the state before and after learning step t: ([n], [n])."""
    before, after = np.empty(len(y)), np.empty(len(y))
    for t in range(len(y)):
        before[t] = learner.learn_many(X[t : t + 1], y[t : t + 1])[0]
        after[t] = learner.predict_proba_many(X[t : t + 1])[0]
    return before, after


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--steps", type=int, default=None, help="first N steps (default: all 45,312)")
    parser.add_argument("--learners", nargs="+", default=["gln", "nctl"], choices=["gln", "nctl"])
    args = parser.parse_args()
    stream = electricity(args.data_dir, n_features=5)
    n = len(stream) if args.steps is None else min(args.steps, len(stream))
    X, y = stream.tasks[0].train_rows(stream.row_of_step[:n])
    out = {"steps": n, "no_change_accuracy": float(np.mean(y[1:] == y[:-1]))}
    for name in args.learners:
        start = time.perf_counter()
        before, after = scored_both_ways(make(name, n), X, y)
        out[name] = {
            "test_then_train_accuracy": float(np.mean((before > 0.5) == y)),
            "train_then_test_accuracy": float(np.mean((after > 0.5) == y)),
            "seconds": time.perf_counter() - start,
        }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
