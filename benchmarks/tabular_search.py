"""The search behind the tabular defaults: NCTL settings ranked against river's models on part of the
river suite's streams, under a speed constraint. Writes a results file.

    python benchmarks/tabular_search.py [--task classification|regression] [--seed 7] [--learner-seeds 2]
                                        [--rows 20000] [--passes 2] [--out FILE]

``classification`` chose ``NCTL.tabular()`` and ``GLN.tabular()``, the river and scikit-learn
classifiers' defaults (docs/guide-river.md, "Defaults"); ``regression`` searches the regressors'
(``NCTLRegressor``, ``GLNRegressor``), whose choice was not adopted (docs/algorithm.md §8.4).

A task's streams in the suite (``benchmarks/river_suite.py``) are split in two. The settings are chosen on
``CHOOSING``, built with ``--seed`` (the suite itself uses 42, so the generators' rows
differ from the suite's); the suite's other streams judge the choice, in the suite's own run. Every
candidate runs as ``StandardScaler() | nctl.river's estimator(**settings, seed=s)`` for ``--learner-seeds``
seeds ``s`` from ``--seed``, beside river's models of the suite in the suite's settings (run once, at the
start, with ``--seed``); a candidate's scores on a stream are its seeds' means.

A candidate is *eligible* when its rows/s over all choosing rows (predict and learn, as the suite times
them) is at least ``SPEED_MARGIN`` times the Hoeffding Adaptive Tree's, measured in the same run: the
goal is to be at least as fast in the suite's own run, and rows/s move by up to about 15% between runs.
Candidates are compared by their mean rank on the choosing streams among river's models and themselves
by each of the task's measures in turn (classification: accuracy, then log loss; regression: MAE, then
RMSE). Among the eligible candidates with the best ranks, those whose quality is within the task's
``same`` of the best one's are not told apart by the search (their differences are of the order of a
change of seed), and the fastest of them is chosen. Quality: the mean accuracy; for regression the mean
of the MAE divided by the best river model's on the stream, negated.

The search is coordinate-wise. It starts from the task's ``start`` (the defaults before the search);
each setting of its ``grid`` in turn takes each of its values, the others fixed, and keeps the chosen
candidate's value (the fastest's where none is eligible); a pass over the grid is repeated until it
changes nothing, at most ``--passes`` times. Every candidate's numbers, the path of the search and the
chosen settings go into the results file (by default ``docs/results/river/TASK-search-N.json``, the
first free N; an existing file is never replaced).
"""

from __future__ import annotations

import argparse
import datetime
import itertools
import json
import os
import shlex
import statistics
import sys
import time
from pathlib import Path
from typing import Callable, NamedTuple

from nctl.learners.presets import SPLIT_GRID
from nctl.pool import with_pool
from nctl.river import NCTLClassifier, NCTLRegressor

sys.path.insert(0, str(Path(__file__).resolve().parent))
import river_suite as suite  # noqa: E402

SPEED_PEER = "Hoeffding Adaptive Tree"
SPEED_MARGIN = 1.25
RESULTS_DIR = suite.REPO / "docs" / "results" / "river"
NETWORKS = [(4, 1), (8, 1), (16, 1), (4, 2, 1), (8, 4, 1), (16, 8, 1)]
CHOOSING = {**suite.DEFAULTS_CHOSEN_ON, "regression": ("ChickWeights", "FriedmanDrift-GRA", "FriedmanDrift-LEA")}


class Task(NamedTuple):
    estimator: type  # nctl's river estimator
    measures: tuple  # (name, bigger is better) of each ranked measure, in the order they are compared
    quality: str  # what ``quality`` computes
    same: float  # qualities closer than this are not told apart
    start: dict
    grid: dict


def mean_accuracy(means: dict, river: dict) -> float:
    return statistics.mean(m["accuracy"] for m in means.values())


def relative_mae(means: dict, river: dict) -> float:
    return -statistics.mean(m["mae"] / min(r["mae"] for r in river[s].values()) for s, m in means.items())


QUALITY: dict[str, Callable] = {"accuracy": mean_accuracy, "relative_mae": relative_mae}

TASKS = {
    "classification": Task(
        NCTLClassifier, (("accuracy", True), ("log_loss", False)), "accuracy", 0.001,  # a tenth of a point
        start={"layer_sizes": (16, 8, 1), "context_bits": 2, "learning_rate": 0.1, "pool_size": 7,
               "min_segment": 64, "eviction": "fifo", "split_prob": 0.5},
        grid={"layer_sizes": NETWORKS, "context_bits": [1, 2, 3, 4], "learning_rate": [0.03, 0.05, 0.1, 0.2],
              "pool_size": [1, 3, 5, 7, 11], "min_segment": [16, 32, 64, 128, 256], "eviction": ["fifo", "spacing"],
              "split_prob": [0.5, SPLIT_GRID]}),
    "regression": Task(
        NCTLRegressor, (("mae", False), ("rmse", False)), "relative_mae", 0.01,  # 1% of the MAE
        start={"layer_sizes": (16, 8, 1), "context_bits": 2, "learning_rate": 0.02, "pool_size": 15,
               "min_segment": 32, "eviction": "spacing", "split_prob": 0.5},
        grid={"layer_sizes": NETWORKS, "context_bits": [1, 2, 3, 4], "learning_rate": [0.005, 0.01, 0.02, 0.05],
              "pool_size": [1, 3, 7, 15], "min_segment": [16, 32, 64, 128, 256], "eviction": ["fifo", "spacing"],
              "split_prob": [0.5, SPLIT_GRID]}),
}


def key(settings: dict) -> str:
    """A candidate's name: its settings as JSON (tuples as lists)."""
    return json.dumps(settings, sort_keys=True)


def speed(numbers: list) -> float:
    """Rows/s over the runs ``numbers`` (each evaluate's numbers on one stream), each first row apart."""
    return sum(n["scored_rows"] - 1 for n in numbers) / sum(n["seconds"] - n["first_row_s"] for n in numbers)


def score(task: Task, numbers: dict, river: dict) -> dict:
    """A candidate's summary from its numbers (``numbers``: seed -> stream -> evaluate's numbers) beside
    river's (``river``: stream -> model -> numbers): its mean rank by each measure, its quality, its rows/s."""
    runs = list(numbers.values())
    means = {s: {m: statistics.mean(run[s][m] for run in runs) for m, _ in task.measures} for s in river}
    summary = {f"{measure}_rank": statistics.mean(
        suite.ranks({"candidate": means[s][measure], **{m: r[measure] for m, r in river[s].items()}},
                    bigger_is_better)["candidate"] for s in river) for measure, bigger_is_better in task.measures}
    return {**summary, task.quality: QUALITY[task.quality](means, river),
            "rows_per_s": speed([run[s] for run in runs for s in river])}


def best_of(task: Task, summaries: dict) -> str:
    """The chosen one of ``summaries`` (name -> summary, all eligible): the best ranks, then the fastest
    whose quality is within ``task.same`` of the best with those ranks."""
    ranks = lambda s: tuple(s[f"{m}_rank"] for m, _ in task.measures)  # noqa: E731
    best = min(ranks(s) for s in summaries.values())
    tied = {n: s for n, s in summaries.items() if ranks(s) == best}
    top = max(s[task.quality] for s in tied.values())
    return max((n for n, s in tied.items() if s[task.quality] >= top - task.same), key=lambda n: tied[n]["rows_per_s"])


def search(name: str, streams: dict, seed: int, learner_seeds: int, passes: int, log) -> dict:
    """River's models once, then the coordinate search (module docstring) over ``streams`` (name -> rows)."""
    task, (_, models, _, _) = TASKS[name], suite.SUITE[name]
    river_models = [m for m in models if m not in ("NCTL", "GLN")]
    classes = {s: max(2, len({y for _, y in rows})) if name == "classification" else None for s, rows in streams.items()}
    options = lambda s: {"n_classes": classes[s]} if classes[s] else {}  # noqa: E731
    river = {s: {m: suite.stored(suite.evaluate(models[m][1](classes[s], seed), rows, name)) for m in river_models}
             for s, rows in streams.items()}
    for s in streams:
        log(f"{s}: " + ", ".join(f"{m} {river[s][m][task.measures[0][0]]:.4g} ({river[s][m]['rows_per_s']:.0f}/s)"
                                  for m in river_models))
    floor = SPEED_MARGIN * speed([river[s][SPEED_PEER] for s in streams])
    candidates, path = {}, []

    def run(settings: dict) -> dict:
        if key(settings) not in candidates:
            numbers = {str(k): {s: suite.stored(suite.evaluate(
                suite.Scaler() | task.estimator(**with_pool(settings), **options(s), seed=k), rows, name))
                for s, rows in streams.items()} for k in range(seed, seed + learner_seeds)}
            summary = score(task, numbers, river)
            summary["eligible"] = summary["rows_per_s"] >= floor
            candidates[key(settings)] = {"settings": settings, "summary": summary, "streams": numbers}
            log(f"{key(settings)}: " + ", ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}"
                                                 for k, v in summary.items()))
        return candidates[key(settings)]["summary"]

    best = dict(task.start)
    for n in range(passes):
        changed = False
        for setting, values in task.grid.items():
            tried = {json.dumps(v): run({**best, setting: v}) for v in values}
            eligible = {v: s for v, s in tried.items() if s["eligible"]}
            value = json.loads(best_of(task, eligible) if eligible else max(tried, key=lambda v: tried[v]["rows_per_s"]))
            value = tuple(value) if isinstance(value, list) else value
            changed |= value != best[setting]
            best[setting] = value
            path.append({"pass": n + 1, "setting": setting, "chosen": value})
            log(f"pass {n + 1}: {setting} = {value}")
        if not changed:
            break
    return {"task": name, "choosing": list(streams), "speed_peer": SPEED_PEER, "speed_margin": SPEED_MARGIN,
            "speed_floor_rows_per_s": floor, "same": task.same, "start": task.start, "grid": task.grid,
            "river": river, "candidates": list(candidates.values()), "path": path, "chosen": best}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", choices=list(TASKS), default="classification")
    parser.add_argument("--seed", type=int, default=7, help="of the choosing streams and of every model")
    parser.add_argument("--learner-seeds", type=int, default=2, help="seeds of each candidate, from --seed")
    parser.add_argument("--rows", type=int, default=20_000, help="rows of each synthetic stream")
    parser.add_argument("--passes", type=int, default=2, help="at most this many passes over the grid")
    parser.add_argument("--out", default=None, help="the results file to write (refused if it exists)")
    args = parser.parse_args()
    if args.out and Path(args.out).exists():
        parser.error(f"{args.out} exists; a results file is never replaced")
    log = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731
    all_streams = suite.SUITE[args.task][0]
    streams = {s: all_streams[s][1](args.rows, args.seed, None) for s in CHOOSING[args.task]}
    loadavg_start, started, start = os.getloadavg(), datetime.datetime.now(datetime.timezone.utc), time.perf_counter()
    found = search(args.task, streams, args.seed, args.learner_seeds, args.passes, log)
    run = {"command": shlex.join(["python", "benchmarks/tabular_search.py"] + sys.argv[1:]), "arguments": vars(args),
           "started": started.isoformat(timespec="seconds"), "seconds": round(time.perf_counter() - start, 1),
           "machine": suite.machine(), "versions": suite.versions(),
           "loadavg_start": [round(v, 2) for v in loadavg_start], "loadavg_end": [round(v, 2) for v in os.getloadavg()]}
    out = Path(args.out) if args.out else next(
        p for n in itertools.count(1) if not (p := RESULTS_DIR / f"{args.task}-search-{n}.json").exists())
    suite.write_new(out, json.dumps({"format": "nctl tabular search 1", "run": run, **found}, indent=1) + "\n")
    print(json.dumps(found["chosen"]))
    print(f"wrote {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
