"""The river path, as users take it: ``StandardScaler() | NCTLClassifier()`` in
``river.evaluate.progressive_val_score`` on the first rows of Elec2 (8 features), against river's own
Adaptive Random Forest and Hoeffding Adaptive Tree in the same run; with ``--task regression``,
``StandardScaler() | NCTLRegressor()`` on river's FriedmanDrift (10 features, local expanding abrupt
drifts at a quarter, half and three quarters of the rows) against their regressors. Prints JSON: examples
per second of each model (learn + predict per row, river's overhead included), their ratios to ARF, the
accuracy (regression: the mean absolute error), and the first-example latency of NCTL (which includes
compiling, or loading compiled programs from the persistent cache, on the JAX engine). NCTL and ARF each
learn the stream twice, from fresh models, in the order NCTL, ARF, ARF, NCTL, and their rates are taken
over both passes: a drift of the machine's speed during the run (seen up to a fifth on shared 2-core
machines) then weighs on both alike.

    python benchmarks/river_speed.py [--task classification|regression] [--rows 5000] [--data-dir DIR]
                                     [--nctl-args '{"learning_rate": 0.1}'] [--cache DIR [--no-exported]]

With ``--cache DIR`` the run uses (and fills) a persistent compilation cache there: run it twice to see
the first-example latency of a process that compiles and of one that loads.
"""

import argparse
import json
import time
from pathlib import Path

from river import evaluate, forest, metrics, preprocessing, tree
from river.datasets import synth

from nctl import enable_compilation_cache
from nctl.data.location import resolve_data_dir
from nctl.data.elec2 import read_elec2
from nctl.experiments.run import cpu_name
from nctl.river import NCTLClassifier, NCTLRegressor


def elec2_rows(data_dir: str | None, rows: int):
    folder = resolve_data_dir(data_dir)
    data = read_elec2(Path(folder) / "elec2" / "elecNormNew.arff")
    return [(dict(zip(data.columns, map(float, x))), bool(y)) for x, y in zip(data.features[:rows], data.labels[:rows])]


def friedman_rows(data_dir: str | None, rows: int):
    stream = synth.FriedmanDrift(drift_type="lea", position=(rows // 4, rows // 2, 3 * rows // 4), seed=1)
    return list(stream.take(rows))


# task: (its rows, nctl's estimator, river's ARF and Hoeffding Adaptive Tree, the metric, its name)
TASKS = {
    "classification": (elec2_rows, NCTLClassifier, forest.ARFClassifier, tree.HoeffdingAdaptiveTreeClassifier,
                       metrics.Accuracy, "accuracy"),
    "regression": (friedman_rows, NCTLRegressor, forest.ARFRegressor, tree.HoeffdingAdaptiveTreeRegressor,
                   metrics.MAE, "mae"),
}


def one_pass(model, stream, metric) -> tuple[float, float]:
    """(seconds, score) of ``model`` in river's progressive validation over ``stream``, scored by ``metric``."""
    start = time.perf_counter()
    evaluate.progressive_val_score(stream, model, metric)
    return time.perf_counter() - start, metric.get()


def summary(passes: list, rows: int, score: str) -> dict:
    """Examples per second over all ``passes`` (each ``(seconds, score)`` of ``rows`` rows)."""
    seconds = sum(s for s, _ in passes)
    scores = {round(a, 4) for _, a in passes}
    assert len(scores) == 1, f"the passes of one model disagree: {scores}"
    return {"examples_per_s": round(rows * len(passes) / seconds, 1), score: scores.pop(),
            "seconds": round(seconds, 2), "pass_seconds": [round(s, 2) for s, _ in passes]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", choices=list(TASKS), default="classification")
    parser.add_argument("--rows", type=int, default=5000)
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--nctl-args", default="{}", help="JSON of nctl's estimator's parameters (default: its defaults)")
    parser.add_argument("--cache", default=None, help="a persistent compilation cache folder (default: none)")
    parser.add_argument("--no-exported", action="store_true",
                        help="with --cache: compiled programs only, not the engine's exported ones (algorithm §6.10)")
    args = parser.parse_args()
    if args.cache:
        enable_compilation_cache(args.cache, exported=not args.no_exported)
    rows_of, estimator, arf, hat, metric, score = TASKS[args.task]
    stream = rows_of(args.data_dir, args.rows)

    def nctl_pass():
        """A fresh NCTL learns the stream; its first example (the first pass's compiles or loads the
        programs) is timed apart and left out of the pass."""
        model = preprocessing.StandardScaler() | estimator(**json.loads(args.nctl_args))
        start = time.perf_counter()
        model.predict_one(stream[0][0]) if args.task == "regression" else model.predict_proba_one(stream[0][0])
        model.learn_one(*stream[0])
        first_example_s.append(time.perf_counter() - start)
        return one_pass(model, stream[1:], metric())

    first_example_s, passes = [], {"nctl": [], "arf": []}
    for name in ("nctl", "arf", "arf", "nctl"):
        passes[name].append(nctl_pass() if name == "nctl" else one_pass(arf(seed=0), stream, metric()))
    results = {"nctl": summary(passes["nctl"], len(stream) - 1, score), "arf": summary(passes["arf"], len(stream), score)}
    results["nctl"]["first_example_s"] = round(first_example_s[0], 2)
    results["hat"] = summary([one_pass(hat(seed=0), stream, metric())], len(stream), score)
    for name in results:
        results[name]["over_arf"] = round(results[name]["examples_per_s"] / results["arf"]["examples_per_s"], 2)
    print(json.dumps({"task": args.task, "rows": args.rows, "cpu": cpu_name(), "cache": args.cache,
                      "exported": bool(args.cache) and not args.no_exported, "nctl_args": json.loads(args.nctl_args),
                      **results}, indent=2))


if __name__ == "__main__":
    main()
