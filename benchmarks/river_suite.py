"""River's classifiers and regressors beside nctl's, on river's datasets and drift generators, as river's
users measure them: progressive validation (each row is predicted, scored, then learned), one run per
table, every model on every stream. Writes a results file; ``--page`` writes docs/benchmarks-river.md
from one.

    python benchmarks/river_suite.py [--task classification|regression|both] [--rows 20000] [--seed 42]
                                     [--data-dir DIR] [--streams a,b] [--models a,b] [--limit N] [--out FILE]
    python benchmarks/river_suite.py --page docs/results/river-suite/river-suite-1.json

Classification streams: river's Phishing, Bananas and ImageSegments, Elec2 (the data folder: ``--data-dir``,
else ``$NCTL_DATA``), and river's generators with concept changes, ``--rows`` rows each. Regression:
river's TrumpApproval and ChickWeights, and FriedmanDrift (global recurring, global gradual and local
expanding drift), ``--rows`` rows each. The river models take the settings of river's own benchmarks
(river's ``benchmarks/config.py``); nctl's adapters their defaults. Every model that draws random numbers
gets ``--seed``.

Per model and stream: accuracy and log loss (classification) or MAE and RMSE (regression), rows per
second (predict and learn, the first row apart: nctl compiles its programs there), the first row's
seconds, the model's memory at the end (river's ``_raw_memory_usage``; for nctl's estimators the bytes
of their learner's state arrays), and the model's rank on the stream (1 = best, ties share their mean
rank). Log loss is river's: ``-log p(true label)``, ``p`` clipped to [1e-15, 1 - 1e-15], a label the
model gives no probability counting as 1e-15. A row a model cannot predict yet (no class seen: an empty
``predict_proba_one``) is learned but not scored, as ``progressive_val_score`` does.

A run writes a new results file (by default ``docs/results/river-suite/river-suite-N.json``, the first
free N) and never replaces one: ``--out`` naming an existing file is refused.
"""

from __future__ import annotations

import argparse
import datetime
import itertools
import json
import math
import os
import platform
import shlex
import statistics
import sys
import time
from pathlib import Path

import jax
import river
from river import (datasets, ensemble, forest, linear_model, multiclass, naive_bayes, neighbors, optim,
                   preprocessing, tree)
from river.datasets import synth

import nctl
from nctl import atomic
from nctl.experiments.run import cpu_name
from nctl.river import GLNClassifier, GLNRegressor, NCTLClassifier, NCTLRegressor

sys.path.insert(0, str(Path(__file__).resolve().parent))
from river_speed import elec2_rows  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
RESULTS_DIR = REPO / "docs" / "results" / "river-suite"
PAGE = REPO / "docs" / "benchmarks-river.md"
FORMAT = "nctl river suite 1"
PROBA_CLIP = 1e-15  # river's LogLoss and CrossEntropy clip probabilities so
TASKS = ("classification", "regression")


# -- streams: name -> (description, make(rows, seed, data_dir) -> list of (x, y))

def switching(make, settings, rows: int, seed: int) -> list:
    """``rows`` rows of river generators ``make(setting, seed)``, one setting after another in equal
    segments, chained with river's ``ConceptDriftStream`` (each switch spread over 1% of a segment)."""
    segment = rows // len(settings)
    stream = make(settings[-1], seed + len(settings) - 1)
    for i in reversed(range(len(settings) - 1)):
        stream = synth.ConceptDriftStream(make(settings[i], seed + i), stream, position=segment,
                                          width=max(1, segment // 100), seed=seed + i)
    return list(itertools.islice(stream, rows))


def friedman(drift_type: str, positions: tuple, rows: int, seed: int) -> list:
    """``rows`` rows of river's FriedmanDrift, its changes at the ``positions`` (fractions of ``rows``)."""
    stream = synth.FriedmanDrift(drift_type=drift_type, position=tuple(int(p * rows) for p in positions),
                                 transition_window=rows // 20, seed=seed)
    return list(itertools.islice(stream, rows))


CLASSIFICATION_STREAMS = {
    "Phishing": ("river's Phishing", lambda rows, seed, data: list(datasets.Phishing())),
    "Bananas": ("river's Bananas", lambda rows, seed, data: list(datasets.Bananas())),
    "ImageSegments": ("river's ImageSegments",
                      lambda rows, seed, data: list(datasets.ImageSegments())),
    "Elec2": ("Elec2, the data folder's elec2/elecNormNew.arff",
              lambda rows, seed, data: elec2_rows(data, None)),
    "SEA": ("river's SEA, variants 0, 1, 2, 3 in turn (abrupt changes)",
            lambda rows, seed, data: switching(lambda v, s: synth.SEA(variant=v, seed=s), (0, 1, 2, 3), rows, seed)),
    "Agrawal": ("river's Agrawal, classification functions 0, 2, 4, 6 in turn (abrupt changes)",
                lambda rows, seed, data: switching(lambda f, s: synth.Agrawal(classification_function=f, seed=s),
                                                   (0, 2, 4, 6), rows, seed)),
    "Hyperplane": ("river's rotating Hyperplane: 10 features, 5 drifting (mag_change 0.001), 5% label noise "
                   "(gradual drift)",
                   lambda rows, seed, data: list(itertools.islice(synth.Hyperplane(
                       seed=seed, n_features=10, n_drift_features=5, mag_change=0.001, noise_percentage=0.05), rows))),
    "STAGGER": ("river's STAGGER, functions 0, 1, 2, 0, 1, 2 in turn (recurring concepts)",
                lambda rows, seed, data: switching(lambda f, s: synth.STAGGER(classification_function=f, seed=s),
                                                   (0, 1, 2, 0, 1, 2), rows, seed)),
}

REGRESSION_STREAMS = {
    "TrumpApproval": ("river's TrumpApproval", lambda rows, seed, data: list(datasets.TrumpApproval())),
    "ChickWeights": ("river's ChickWeights", lambda rows, seed, data: list(datasets.ChickWeights())),
    "FriedmanDrift-GRA": ("river's FriedmanDrift, global recurring abrupt drift at 1/3 and 2/3 of the stream",
                          lambda rows, seed, data: friedman("gra", (1 / 3, 2 / 3), rows, seed)),
    "FriedmanDrift-GSG": ("river's FriedmanDrift, global slow gradual drift from 1/3 and 2/3 of the stream "
                          "(transition over 1/20 of it)",
                          lambda rows, seed, data: friedman("gsg", (1 / 3, 2 / 3), rows, seed)),
    "FriedmanDrift-LEA": ("river's FriedmanDrift, local expanding abrupt drift at 1/4, 1/2 and 3/4 of the stream",
                          lambda rows, seed, data: friedman("lea", (1 / 4, 1 / 2, 3 / 4), rows, seed)),
}


# -- models: name -> (description, make(n_classes, seed) -> river model)

def one_vs_rest(model, n_classes: int):
    """A binary-only river classifier, wrapped one-vs-rest where the stream has more than two classes."""
    return multiclass.OneVsRestClassifier(model) if n_classes > 2 else model


Scaler = preprocessing.StandardScaler

CLASSIFIERS = {
    "NCTL": ("StandardScaler() | nctl.river.NCTLClassifier(seed)",
             lambda k, seed: Scaler() | NCTLClassifier(n_classes=k, seed=seed)),
    "GLN": ("StandardScaler() | nctl.river.GLNClassifier(seed)",
            lambda k, seed: Scaler() | GLNClassifier(n_classes=k, seed=seed)),
    "Logistic regression": ("StandardScaler() | LogisticRegression(optimizer=SGD(0.005))",
                            lambda k, seed: Scaler() | one_vs_rest(
                                linear_model.LogisticRegression(optimizer=optim.SGD(0.005)), k)),
    "ALMA": ("StandardScaler() | ALMAClassifier()",
             lambda k, seed: Scaler() | one_vs_rest(linear_model.ALMAClassifier(), k)),
    "Naive Bayes": ("GaussianNB()", lambda k, seed: naive_bayes.GaussianNB()),
    "Hoeffding Tree": ("HoeffdingTreeClassifier()", lambda k, seed: tree.HoeffdingTreeClassifier()),
    "Hoeffding Adaptive Tree": ("HoeffdingAdaptiveTreeClassifier(seed)",
                                lambda k, seed: tree.HoeffdingAdaptiveTreeClassifier(seed=seed)),
    "Adaptive Random Forest": ("ARFClassifier(seed)", lambda k, seed: forest.ARFClassifier(seed=seed)),
    "Leveraging Bagging": ("LeveragingBaggingClassifier(HoeffdingTreeClassifier(), seed)",
                           lambda k, seed: ensemble.LeveragingBaggingClassifier(tree.HoeffdingTreeClassifier(),
                                                                                seed=seed)),
    "k-Nearest Neighbors": ("StandardScaler() | KNNClassifier()",
                            lambda k, seed: Scaler() | neighbors.KNNClassifier()),
}

REGRESSORS = {
    "NCTL": ("StandardScaler() | nctl.river.NCTLRegressor(seed)",
             lambda k, seed: Scaler() | NCTLRegressor(seed=seed)),
    "GLN": ("StandardScaler() | nctl.river.GLNRegressor(seed)", lambda k, seed: Scaler() | GLNRegressor(seed=seed)),
    "Linear regression": ("StandardScaler() | LinearRegression()",
                          lambda k, seed: Scaler() | linear_model.LinearRegression()),
    "Hoeffding Tree": ("StandardScaler() | HoeffdingTreeRegressor()",
                       lambda k, seed: Scaler() | tree.HoeffdingTreeRegressor()),
    "Hoeffding Adaptive Tree": ("StandardScaler() | HoeffdingAdaptiveTreeRegressor(seed)",
                                lambda k, seed: Scaler() | tree.HoeffdingAdaptiveTreeRegressor(seed=seed)),
    "Adaptive Random Forest": ("StandardScaler() | ARFRegressor(seed)",
                               lambda k, seed: Scaler() | forest.ARFRegressor(seed=seed)),
    "k-Nearest Neighbors": ("StandardScaler() | KNNRegressor()",
                            lambda k, seed: Scaler() | neighbors.KNNRegressor()),
}

# The streams nctl's defaults were chosen on, per task (benchmarks/tabular_search.py, with other rows of the
# generators), and where the choice is described; the page ranks the models on the other streams apart.
DEFAULTS_CHOSEN_ON = {"classification": ("Bananas", "SEA", "Agrawal", "Hyperplane")}
DEFAULTS_PAGE = {"classification": "[the river guide](guide-river.md#defaults)"}

SUITE = {  # task -> (streams, models, the metric ranked, whether bigger is better)
    "classification": (CLASSIFICATION_STREAMS, CLASSIFIERS, "accuracy", True),
    "regression": (REGRESSION_STREAMS, REGRESSORS, "mae", False),
}


# -- measuring

def memory_bytes(model) -> int:
    """The model's memory: river's ``_raw_memory_usage``, but for nctl's estimators (alone or in a
    pipeline) the bytes of the arrays their learner's state holds."""
    steps = model.steps.values() if hasattr(model, "steps") else [model]
    return sum(sum(leaf.nbytes for leaf in jax.tree.leaves(step.learner.state_)) if hasattr(step, "learner")
               else step._raw_memory_usage for step in steps)


def evaluate(model, stream: list, task: str) -> dict:
    """Progressive validation of ``model`` on ``stream``: each row predicted, scored, then learned (the
    loop of river's ``progressive_val_score``), with the first row timed apart."""
    scored, correct, loss, absolute, squared = 0, 0, 0.0, 0.0, 0.0
    start = time.perf_counter()
    for i, (x, y) in enumerate(stream):
        if task == "classification":
            proba = model.predict_proba_one(x)
            if proba:
                scored += 1
                correct += max(proba, key=proba.get) == y
                loss -= math.log(min(max(proba.get(y, 0.0), PROBA_CLIP), 1 - PROBA_CLIP))
        else:
            error = model.predict_one(x) - y
            scored, absolute, squared = scored + 1, absolute + abs(error), squared + error * error
        model.learn_one(x, y)
        if i == 0:
            first_row_s, start = time.perf_counter() - start, time.perf_counter()
    rest_s = time.perf_counter() - start
    numbers = ({"accuracy": correct / scored, "log_loss": loss / scored} if task == "classification" else
               {"mae": absolute / scored, "rmse": math.sqrt(squared / scored)})
    return {**numbers, "scored_rows": scored, "rows_per_s": (len(stream) - 1) / rest_s,
            "first_row_s": first_row_s, "seconds": first_row_s + rest_s, "memory_bytes": memory_bytes(model)}


def ranks(scores: dict, bigger_is_better: bool) -> dict:
    """Each model's rank by its score (1 = best); tied scores share the mean of their ranks."""
    ordered = sorted(scores.values(), reverse=bigger_is_better)
    return {name: statistics.mean(i + 1 for i, s in enumerate(ordered) if s == score) for name, score in scores.items()}


def stored(numbers: dict) -> dict:
    """The numbers as the results file keeps them: floats to 6 significant digits."""
    return {k: float(f"{v:.6g}") if isinstance(v, float) else v for k, v in numbers.items()}


def run_task(task: str, streams: list, models: list, rows: int, seed: int, data_dir=None,
             limit: int | None = None, log=print) -> dict:
    """Every model of ``models`` on every stream of ``streams`` (names from ``SUITE[task]``): each stream's
    numbers per model, with ranks, and every model's mean rank over the streams."""
    all_streams, all_models, metric, bigger_is_better = SUITE[task]
    built = {name: all_streams[name][1](rows, seed, data_dir)[:limit] for name in streams}  # all before the first model
    results, described = {}, {}
    for stream_name, stream in built.items():
        n_classes = max(2, len({y for _, y in stream})) if task == "classification" else None
        described[stream_name] = {"description": all_streams[stream_name][0], "rows": len(stream),
                                  "features": len(stream[0][0]), **({"classes": n_classes} if n_classes else {})}
        results[stream_name] = {}
        for name in models:
            numbers = stored(evaluate(all_models[name][1](n_classes, seed), stream, task))
            results[stream_name][name] = numbers
            log(f"{task} {stream_name} {name}: " + ", ".join(f"{k} {v}" for k, v in numbers.items()))
        for key, bigger in [(metric, bigger_is_better)] + ([("log_loss", False)] if task == "classification" else []):
            for name, rank in ranks({m: r[key] for m, r in results[stream_name].items()}, bigger).items():
                results[stream_name][name][f"{key}_rank"] = rank
    keys = [f"{metric}_rank"] + (["log_loss_rank"] if task == "classification" else [])
    mean_ranks = {key: {name: round(statistics.mean(results[s][name][key] for s in streams), 3) for name in models}
                  for key in keys}
    return {"metric": metric, "bigger_is_better": bigger_is_better, "streams": described,
            "models": {name: all_models[name][0] for name in models}, "results": results, "mean_ranks": mean_ranks}


def suite(plan: dict, rows: int, seed: int, data_dir, limit: int | None, log, command: str, arguments: dict) -> dict:
    """The results of ``plan`` (task -> (streams, models), as ``run_task`` takes them) with the run's
    command, machine, versions and load averages: what a results file holds."""
    loadavg_start, started, start = os.getloadavg(), datetime.datetime.now(datetime.timezone.utc), time.perf_counter()
    parts = {task: run_task(task, streams, models, rows, seed, data_dir, limit, log)
             for task, (streams, models) in plan.items()}
    return {"format": FORMAT,
            "run": {"command": command, "arguments": arguments, "started": started.isoformat(timespec="seconds"),
                    "seconds": round(time.perf_counter() - start, 1), "machine": machine(), "versions": versions(),
                    "loadavg_start": [round(v, 2) for v in loadavg_start],
                    "loadavg_end": [round(v, 2) for v in os.getloadavg()]},
            "tasks": parts}


def machine() -> dict:
    return {"cpu": cpu_name(), "cores": os.cpu_count(), "platform": platform.platform()}


def versions() -> dict:
    return {"python": platform.python_version(), "river": river.__version__, "nctl": nctl.__version__,
            "jax": jax.__version__}


def first_free(folder: Path) -> Path:
    """``folder/river-suite-N.json`` with the first N not taken."""
    return next(path for n in itertools.count(1) if not (path := folder / f"river-suite-{n}.json").exists())


def write_new(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` whole or not at all; FileExistsError if ``path`` exists (a results file is
    never replaced): written to a temporary file, then linked to ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(temp, "x") as file:
        file.write(text)
        file.flush()
        os.fsync(file.fileno())
    try:
        os.link(temp, path)
    finally:
        temp.unlink()


# -- the page

def _number(value: float, digits: int) -> str:
    return f"{value:,.{digits}f}"


def _memory(n_bytes: int) -> str:
    for unit, size in (("MB", 1e6), ("KB", 1e3)):
        if n_bytes >= size:
            return f"{n_bytes / size:.1f} {unit}"
    return f"{n_bytes} B"


def _table(header: list, rows: list) -> list:
    return ["| " + " | ".join(header) + " |", "|" + "|".join(" --- " for _ in header) + "|"] + \
           ["| " + " | ".join(row) + " |" for row in rows]


SCORES = {  # task -> its scores as a stream's table shows them (header, format), the ranked one first
    "classification": [("Accuracy (%)", lambda r: _number(100 * r["accuracy"], 2)),
                       ("Log loss", lambda r: _number(r["log_loss"], 3))],
    "regression": [("MAE", lambda r: _number(r["mae"], 3)), ("RMSE", lambda r: _number(r["rmse"], 3))],
}
COSTS = [("Rows/s", lambda r: _number(r["rows_per_s"], 0)), ("First row (s)", lambda r: _number(r["first_row_s"], 2)),
         ("Memory", lambda r: _memory(r["memory_bytes"]))]


def _task_section(task: str, part: dict) -> list:
    """The page's section of one task: the ranked score of every model on every stream with the mean
    ranks (also over the streams nctl's defaults were not chosen on), the streams, the models, then each
    stream's table."""
    streams, results, mean = list(part["streams"]), part["results"], dict(part["mean_ranks"])
    rank_key = f"{part['metric']}_rank"
    (score_name, score), *_ = SCORES[task]
    rank_names = {rank_key: "Mean rank", "log_loss_rank": "Mean log loss rank"}
    lines = [f"## {task.capitalize()}", "",
             f"{score_name} of each model on each stream, and its mean rank over the streams (1 = best)"
             + (", by accuracy and by log loss." if task == "classification" else ", by MAE."), ""]
    chosen_on = [s for s in DEFAULTS_CHOSEN_ON.get(task, ()) if s in streams]
    held_out = [s for s in streams if s not in chosen_on]
    if chosen_on and held_out:
        mean["held_out"] = {m: statistics.mean(results[s][m][rank_key] for s in held_out) for m in part["models"]}
        rank_names["held_out"] = "Mean rank, " + ", ".join(held_out)
        lines[-1:] = [f"nctl's defaults were chosen on {', '.join(chosen_on[:-1])} and "
                      f"{chosen_on[-1]} (the generators with another seed; `benchmarks/tabular_search.py`, "
                      f"{DEFAULTS_PAGE[task]}); the last column ranks the models on the other "
                      "streams alone.", ""]
    lines += _table(["Model"] + streams + [rank_names[k] for k in mean],
                    [[m] + [score(results[s][m]) for s in streams] + [f"{mean[k][m]:g}" for k in mean]
                     for m in sorted(part["models"], key=lambda m: mean[rank_key][m])])
    lines += ["", "### Streams", ""] + _table(
        ["Stream", "Rows", "Features"] + (["Classes"] if task == "classification" else []) + ["What it is"],
        [[s, _number(d["rows"], 0), str(d["features"])] + ([str(d["classes"])] if "classes" in d else [])
         + [d["description"]] for s, d in part["streams"].items()])
    lines += ["", "### Models", ""] + _table(["Model", "As built"], [[m, spec.replace("|", "\\|")]
                                                                      for m, spec in part["models"].items()])
    columns = SCORES[task] + COSTS + [("Rank", lambda r: f"{r[rank_key]:g}")]
    for stream in streams:
        ordered = sorted(results[stream], key=lambda m: results[stream][m][rank_key])
        lines += ["", f"### {stream}", ""] + _table(["Model"] + [c for c, _ in columns],
                                                    [[m] + [f(results[stream][m]) for _, f in columns] for m in ordered])
    return lines + [""]


def page(results: dict, link: str) -> str:
    """The benchmarks page (Markdown) of a results file; ``link`` is its path from the page."""
    run = results["run"]
    lines = ["# Benchmarks against river", "",
             "nctl's river estimators beside river's own classifiers and regressors, measured as river measures "
             "them: progressive validation (each row is predicted, scored, then learned), every model on every "
             "stream, one run. The river models have the settings of river's own benchmarks; nctl's have their "
             "defaults; every model that draws random numbers has the run's seed. Rows/s counts predicting and learning, the first row apart (nctl compiles its programs "
             "there, or loads them from its cache); memory is the model's at the end of the stream (river's "
             "`_raw_memory_usage`; for nctl's estimators, the bytes of their learner's state). Log loss is river's: "
             f"probabilities clipped to [{PROBA_CLIP:g}, 1 - {PROBA_CLIP:g}]. Multi-class streams: nctl's "
             "classifiers with `n_classes` set, river's binary-only classifiers one-vs-rest. Ranks: 1 = best, by "
             "the results file's numbers (6 significant digits); ties share their mean rank.", "",
             f"Results file: [{Path(link).name}]({link}).", ""]
    for task in TASKS:
        if task in results["tasks"]:
            lines += _task_section(task, results["tasks"][task])
    load = f"{', '.join(map(str, run['loadavg_start']))} at the start, {', '.join(map(str, run['loadavg_end']))} at the end"
    lines += ["## Machine and command", "",
              f"{run['machine']['cpu']}, {run['machine']['cores']} cores; load average (1, 5, 15 minutes) {load}; "
              f"{_number(run['seconds'] / 60, 1)} minutes in all. "
              + ", ".join(f"{k} {v}" for k, v in run["versions"].items()) + ".", "",
              "```", run["command"], "```", "",
              "The page is written from the results file: "
              f"`python benchmarks/river_suite.py --page {os.path.normpath(Path('docs') / link)}`.", ""]
    return "\n".join(lines)


def write_page(results_path: Path, page_path: Path = PAGE) -> None:
    results = json.loads(results_path.read_text())
    if results.get("format") != FORMAT:
        raise ValueError(f"{results_path} is not a results file of this suite (format {FORMAT!r})")
    atomic.write_text(page_path, page(results, os.path.relpath(results_path.resolve(), page_path.resolve().parent)))


def chosen(text: str | None, names) -> list:
    """The names of ``names`` listed in the comma-separated ``text``, in ``names``' order; all without it."""
    return [n for n in names if n in text.split(",")] if text else list(names)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", choices=TASKS + ("both",), default="both")
    parser.add_argument("--rows", type=int, default=20_000, help="rows of each synthetic stream")
    parser.add_argument("--seed", type=int, default=42, help="of the synthetic streams and of the models")
    parser.add_argument("--data-dir", default=None, help="the data folder holding elec2/ (default: $NCTL_DATA)")
    parser.add_argument("--streams", default=None, help="comma-separated stream names (default: all of the task)")
    parser.add_argument("--models", default=None, help="comma-separated model names (default: all of the task)")
    parser.add_argument("--limit", type=int, default=None, help="at most this many rows of every stream (quick checks)")
    parser.add_argument("--out", default=None, help="the results file to write (refused if it exists; default: "
                                                    "docs/results/river-suite/river-suite-N.json, the first free N)")
    parser.add_argument("--page", metavar="RESULTS", default=None,
                        help="write docs/benchmarks-river.md from this results file, and run nothing")
    args = parser.parse_args()
    if args.page:
        write_page(Path(args.page))
        print(f"wrote {PAGE}", file=sys.stderr)
        return
    if args.out and Path(args.out).exists():
        parser.error(f"{args.out} exists; a results file is never replaced")
    plan = {}  # task -> (streams, models)
    for task in TASKS if args.task == "both" else (args.task,):
        streams, models = (chosen(text, SUITE[task][i]) for i, text in enumerate((args.streams, args.models)))
        if streams and models:
            plan[task] = (streams, models)
    unknown = {n for text in (args.streams, args.models) if text for n in text.split(",")} - \
        {n for task in TASKS for names in SUITE[task][:2] for n in names}
    if unknown or not plan:
        parser.error(f"no such stream or model: {', '.join(sorted(unknown))}" if unknown else "nothing to run")
    log = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731
    command = shlex.join(["python", "benchmarks/river_suite.py"] + sys.argv[1:])
    try:
        results = suite(plan, args.rows, args.seed, args.data_dir, args.limit, log, command, vars(args))
    except FileNotFoundError as error:  # Elec2 not in the data folder
        parser.error(f"{error}; give the data folder (--data-dir or NCTL_DATA) or leave Elec2 out (--streams)")
    out = Path(args.out) if args.out else first_free(RESULTS_DIR)
    write_new(out, json.dumps(results, indent=1) + "\n")
    print(f"wrote {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
