"""Diagnosis of the Elec2 gap: accuracy when each step is scored before versus after learning it.

Our protocol (docs/protocols.md §4) is test-then-train: the prediction for step t is made by the
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

from nctl.evaluate.scores import accuracy, no_change_correct
from nctl.experiments import configs
from nctl.experiments.runners import learner_factory, make_stream

EXPERIMENT = "elec2-5"  # the paper's settings: 5 features, lr 0.1, NCTL depth ceil(log2 n)


def scored_both_ways(learner, X: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """P(y_t = 1) from the state before and after learning step t: ([n], [n])."""
    before, after = np.empty(len(y)), np.empty(len(y))
    for t in range(len(y)):
        before[t] = learner.learn_many(X[t : t + 1], y[t : t + 1])[0]
        after[t] = learner.predict_proba_many(X[t : t + 1])[0]
    return before, after


def median_run_length(y: np.ndarray) -> float:
    """Median length of the runs of equal consecutive labels."""
    changes = np.flatnonzero(np.diff(y) != 0) + 1
    return float(np.median(np.diff(np.concatenate([[0], changes, [len(y)]]))))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--steps", type=int, default=None, help="first N steps (default: all 45,312)")
    parser.add_argument("--learners", nargs="+", default=["gln", "nctl"], choices=["gln", "nctl"])
    args = parser.parse_args()
    exp = configs.get(EXPERIMENT)
    stream = make_stream(exp, 0, args.data_dir)
    n = len(stream) if args.steps is None else min(args.steps, len(stream))
    X, y = stream.tasks[0].train_rows(stream.row_of_step[:n])
    out = {"steps": n, "no_change_accuracy": float(np.mean(no_change_correct(y))),
           "median_label_run": median_run_length(y)}
    for name in args.learners:
        start = time.perf_counter()
        before, after = scored_both_ways(learner_factory(name, exp, stream, seed=0)(), X, y)
        out[name] = {
            "test_then_train_accuracy": accuracy(before, y),
            "train_then_test_accuracy": accuracy(after, y),
            "seconds": time.perf_counter() - start,
        }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
