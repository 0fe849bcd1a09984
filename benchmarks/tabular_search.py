"""The search behind the tabular defaults (``NCTL.tabular()``, ``GLN.tabular()`` and so the river and
scikit-learn adapters; docs/guide-river.md, "Defaults"): NCTL settings ranked against river's classifiers
on part of the river suite's streams, under a speed constraint. Writes a results file.

    python benchmarks/tabular_search.py [--seed 7] [--learner-seeds 2] [--rows 20000] [--passes 2] [--out FILE]

The suite's classification streams (``benchmarks/river_suite.py``) are split in two. The settings are
chosen on ``CHOOSING``, built with ``--seed`` (the suite itself uses 42, so the generators' rows
differ from the suite's); the suite's other streams (``HELD_OUT``) judge the choice, in the suite's own
run. Every candidate runs as ``StandardScaler() | NCTLClassifier(**settings, seed=s)`` for ``--learner-seeds``
seeds ``s`` from ``--seed``, beside river's eight classifiers of the suite in the suite's settings (run once,
at the start, with ``--seed``); a candidate's accuracy and log loss on a stream are its seeds' means.

A candidate is *eligible* when its rows/s over all choosing rows (predict and learn, as the suite times
them) is at least ``SPEED_MARGIN`` times the Hoeffding Adaptive Tree's, measured in the same run: the
goal is to be at least as fast in the suite's own run, and rows/s move by up to about 15% between runs.
Candidates are compared by their mean accuracy rank on the choosing streams among river's classifiers
and themselves, then their mean log loss rank (lower is better). Among the eligible candidates with the
best ranks, those whose mean accuracy is within ``SAME_ACCURACY`` of the best one's are not told apart
by the search (their differences are of the order of a change of seed), and the fastest of them is chosen.

The search is coordinate-wise. It starts from ``START``; each setting of ``GRID`` in turn takes each of
its values, the others fixed, and keeps the chosen candidate's value (the fastest's where none is
eligible); a pass over ``GRID`` is repeated
until it changes nothing, at most ``--passes`` times. Every candidate's numbers, the path of the
search and the chosen settings go into the results file (by default
``docs/results/river/tabular-search-N.json``, the first free N; an existing file is never replaced).
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

from nctl.learners.presets import SPLIT_GRID
from nctl.river import NCTLClassifier

sys.path.insert(0, str(Path(__file__).resolve().parent))
import river_suite as suite  # noqa: E402

CHOOSING = suite.DEFAULTS_CHOSEN_ON
HELD_OUT = tuple(s for s in suite.CLASSIFICATION_STREAMS if s not in CHOOSING)
RIVER_MODELS = tuple(m for m in suite.CLASSIFIERS if m not in ("NCTL", "GLN"))
SPEED_PEER = "Hoeffding Adaptive Tree"
SPEED_MARGIN = 1.25
SAME_ACCURACY = 0.001  # a tenth of a point of mean accuracy

START = {"layer_sizes": (16, 8, 1), "context_bits": 2, "learning_rate": 0.1, "pool_size": 7, "min_segment": 64,
         "eviction": "fifo", "split_prob": 0.5}
GRID = {
    "layer_sizes": [(4, 1), (8, 1), (16, 1), (4, 2, 1), (8, 4, 1), (16, 8, 1)],
    "context_bits": [1, 2, 3, 4],
    "learning_rate": [0.03, 0.05, 0.1, 0.2],
    "pool_size": [1, 3, 5, 7, 11],
    "min_segment": [16, 32, 64, 128, 256],
    "eviction": ["fifo", "spacing"],
    "split_prob": [0.5, SPLIT_GRID],
}
RESULTS_DIR = suite.REPO / "docs" / "results" / "river"


def key(settings: dict) -> str:
    """A candidate's name: its settings as JSON (tuples as lists)."""
    return json.dumps(settings, sort_keys=True)


def score(numbers: dict, river: dict) -> dict:
    """A candidate's numbers on the choosing streams (``numbers``: seed -> stream -> evaluate's numbers)
    beside river's (``river``: stream -> model -> numbers): its mean ranks, mean accuracy and rows/s."""
    runs = list(numbers.values())
    mean = {s: {m: statistics.mean(run[s][m] for run in runs) for m in ("accuracy", "log_loss")} for s in CHOOSING}
    ranked = {}
    for measure, bigger_is_better in (("accuracy", True), ("log_loss", False)):
        ranked[measure] = statistics.mean(
            suite.ranks({"candidate": mean[s][measure], **{m: river[s][m][measure] for m in RIVER_MODELS}},
                        bigger_is_better)["candidate"] for s in CHOOSING)
    seconds = sum(run[s]["seconds"] - run[s]["first_row_s"] for run in runs for s in CHOOSING)
    rows = sum(run[s]["scored_rows"] - 1 for run in runs for s in CHOOSING)
    return {"accuracy_rank": ranked["accuracy"], "log_loss_rank": ranked["log_loss"],
            "accuracy": statistics.mean(mean[s]["accuracy"] for s in CHOOSING), "rows_per_s": rows / seconds}


def best_of(summaries: dict):
    """The chosen one of ``summaries`` (name -> summary, all eligible): the best ranks, then the fastest
    whose mean accuracy is within ``SAME_ACCURACY`` of the most accurate with those ranks."""
    ranks = min((s["accuracy_rank"], s["log_loss_rank"]) for s in summaries.values())
    tied = {n: s for n, s in summaries.items() if (s["accuracy_rank"], s["log_loss_rank"]) == ranks}
    top = max(s["accuracy"] for s in tied.values())
    return max((n for n, s in tied.items() if s["accuracy"] >= top - SAME_ACCURACY), key=lambda n: tied[n]["rows_per_s"])


def river_speed(river: dict, name: str) -> float:
    """A river model's rows/s over all choosing rows, the first row apart."""
    return (sum(river[s][name]["scored_rows"] - 1 for s in CHOOSING)
            / sum(river[s][name]["seconds"] - river[s][name]["first_row_s"] for s in CHOOSING))


def search(streams: dict, seed: int, learner_seeds: int, passes: int, log) -> dict:
    """River's models once, then the coordinate search (module docstring) over ``streams`` (name -> rows)."""
    classes = {s: max(2, len({y for _, y in rows})) for s, rows in streams.items()}
    river = {s: {m: suite.stored(suite.evaluate(suite.CLASSIFIERS[m][1](classes[s], seed), rows, "classification"))
                 for m in RIVER_MODELS} for s, rows in streams.items()}
    for s in CHOOSING:
        log(f"{s}: " + ", ".join(f"{m} {river[s][m]['accuracy']:.4f} ({river[s][m]['rows_per_s']:.0f}/s)"
                                  for m in RIVER_MODELS))
    floor = SPEED_MARGIN * river_speed(river, SPEED_PEER)
    candidates, path = {}, []

    def run(settings: dict) -> dict:
        name = key(settings)
        if name not in candidates:
            numbers = {str(k): {s: suite.stored(suite.evaluate(
                suite.Scaler() | NCTLClassifier(**settings, n_classes=classes[s], seed=k), rows, "classification"))
                for s, rows in streams.items()} for k in range(seed, seed + learner_seeds)}
            summary = score(numbers, river)
            summary["eligible"] = summary["rows_per_s"] >= floor
            candidates[name] = {"settings": settings, "summary": summary, "streams": numbers}
            log(f"{name}: " + ", ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}"
                                        for k, v in summary.items()))
        return candidates[name]["summary"]

    best = dict(START)
    for n in range(passes):
        changed = False
        for setting, values in GRID.items():
            tried = {json.dumps(v): run({**best, setting: v}) for v in values}
            eligible = {v: s for v, s in tried.items() if s["eligible"]}
            value = json.loads(best_of(eligible) if eligible else max(tried, key=lambda v: tried[v]["rows_per_s"]))
            value = tuple(value) if isinstance(value, list) else value
            changed |= value != best[setting]
            best[setting] = value
            path.append({"pass": n + 1, "setting": setting, "chosen": value})
            log(f"pass {n + 1}: {setting} = {value}")
        if not changed:
            break
    return {"choosing": list(CHOOSING), "held_out": list(HELD_OUT), "speed_peer": SPEED_PEER,
            "speed_margin": SPEED_MARGIN, "speed_floor_rows_per_s": floor,
            "same_accuracy": SAME_ACCURACY, "start": START, "grid": GRID, "river": river,
            "candidates": list(candidates.values()), "path": path, "chosen": best}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=7, help="of the choosing streams and of every model")
    parser.add_argument("--learner-seeds", type=int, default=2, help="seeds of each candidate, from --seed")
    parser.add_argument("--rows", type=int, default=20_000, help="rows of each synthetic stream")
    parser.add_argument("--passes", type=int, default=2, help="at most this many passes over the grid")
    parser.add_argument("--out", default=None, help="the results file to write (refused if it exists)")
    args = parser.parse_args()
    if args.out and Path(args.out).exists():
        parser.error(f"{args.out} exists; a results file is never replaced")
    log = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731
    streams = {s: suite.CLASSIFICATION_STREAMS[s][1](args.rows, args.seed, None) for s in CHOOSING}
    loadavg_start, started, start = os.getloadavg(), datetime.datetime.now(datetime.timezone.utc), time.perf_counter()
    found = search(streams, args.seed, args.learner_seeds, args.passes, log)
    run = {"command": shlex.join(["python", "benchmarks/tabular_search.py"] + sys.argv[1:]), "arguments": vars(args),
           "started": started.isoformat(timespec="seconds"), "seconds": round(time.perf_counter() - start, 1),
           "machine": suite.machine(), "versions": suite.versions(),
           "loadavg_start": [round(v, 2) for v in loadavg_start], "loadavg_end": [round(v, 2) for v in os.getloadavg()]}
    out = Path(args.out) if args.out else next(
        p for n in itertools.count(1) if not (p := RESULTS_DIR / f"tabular-search-{n}.json").exists())
    suite.write_new(out, json.dumps({"format": "nctl tabular search 1", "run": run, **found}, indent=1) + "\n")
    print(json.dumps(found["chosen"]))
    print(f"wrote {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
