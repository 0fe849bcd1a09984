"""How NCTLRegressor and GLNRegressor settings score on regression streams, as JSON: the evidence behind
the regressors' defaults (docs/RESULTS.md, "Regression").

Each setting learns each stream prequentially (every row predicted before it is learned), on features
standardised online (``nctl.streams.running_standardise``: no look-ahead) and raw targets. The score of
a stream is the MAE divided by the MAE of the running mean of the targets (1 = no better than the mean),
so that streams of any scale average; RMSE is reported beside it. The streams are not those of the
regression experiment (``nctl run regression-*``), so that its results are not the ones the defaults were
chosen on:

* ``friedman``: river's stationary ``Friedman`` (10 features, 5 relevant);
* ``friedman-lea``: river's ``FriedmanDrift`` with local expanding abrupt drifts;
* ``planes2d``: river's ``Planes2D`` (a piecewise-linear concept);
* ``recurring``: nctl's recurring nonlinear concepts (``nctl.streams.synthetic_regression``, another
  seed than the experiment's).

    python benchmarks/regression_defaults.py [--rows 5000] [--cache DIR] [--streams a,b]
                                             [--candidates '{"name": {"learning_rate": 0.03}, ...}']
"""

import argparse
import itertools
import json
import time

import numpy as np
from river.datasets import synth

import nctl
from nctl import enable_compilation_cache
from nctl.experiments.run import cpu_name
from nctl.pool import with_pool
from nctl.streams import running_standardise, synthetic_regression

CANDIDATES = {  # NCTLRegressor settings compared, its defaults first; then GLNRegressor's
    "nctl default": ("nctl", {}),
    "nctl lr 0.003": ("nctl", {"learning_rate": 0.003}),
    "nctl lr 0.03": ("nctl", {"learning_rate": 0.03}),
    "nctl 2 context bits": ("nctl", {"context_bits": 2}),
    "nctl 6 context bits": ("nctl", {"context_bits": 6}),
    "nctl L_min 64": ("nctl", {"min_segment": 64}),
    "gln default": ("gln", {}),
    "gln lr 0.03": ("gln", {"learning_rate": 0.03}),
}
LEARNERS = {"nctl": nctl.NCTLRegressor, "gln": nctl.GLNRegressor}


def river_rows(data, rows: int):
    """The first ``rows`` rows of a river data set as (features [n, d] float64, targets [n])."""
    pairs = list(itertools.islice(data, rows))
    names = sorted(pairs[0][0], key=str)
    X = np.array([[float(x[name]) for name in names] for x, _ in pairs])
    return X, np.array([float(y) for _, y in pairs])


def streams(rows: int) -> dict:
    recurring = synthetic_regression(seed=7, segment_length=max(1, rows // 5), n_segments=5)
    return {
        "friedman": river_rows(synth.Friedman(seed=1), rows),
        "friedman-lea": river_rows(synth.FriedmanDrift(drift_type="lea", position=(rows // 4, rows // 2, 3 * rows // 4),
                                                       seed=1), rows),
        "planes2d": river_rows(synth.Planes2D(seed=1), rows),
        "recurring": (recurring.features, recurring.targets),
    }


def running_mean_mae(y: np.ndarray) -> float:
    """MAE of predicting each target by the mean of the targets before it (0 for the first)."""
    before = np.concatenate([[0.0], np.cumsum(y)[:-1] / np.arange(1, len(y))])
    return float(np.abs(y - before).mean())


def score(kind: str, params: dict, X: np.ndarray, y: np.ndarray) -> dict:
    params = {k: tuple(v) if isinstance(v, list) else v for k, v in params.items()}
    model = LEARNERS[kind](**with_pool(params, nctl.NCTLRegressor.pool))  # the search's flat pool settings
    start = time.perf_counter()
    predictions = model.learn_many(running_standardise(X), y)
    seconds = time.perf_counter() - start
    errors = predictions - y
    return {"relative_mae": round(float(np.abs(errors).mean()) / running_mean_mae(y), 4),
            "rmse": round(float(np.sqrt(np.mean(errors**2))), 4), "seconds": round(seconds, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=5000)
    parser.add_argument("--cache", default=None, help="a persistent compilation cache folder")
    parser.add_argument("--candidates", default=None, help='JSON {name: ["nctl" or "gln", {parameters}]}')
    parser.add_argument("--streams", default=None, help="comma-separated stream names (default: all)")
    args = parser.parse_args()
    if args.cache:
        enable_compilation_cache(args.cache)
    candidates = json.loads(args.candidates) if args.candidates else CANDIDATES
    chosen = streams(args.rows)
    if args.streams:
        chosen = {name: chosen[name] for name in args.streams.split(",")}
    results = {}
    for stream_name, (X, y) in chosen.items():
        results[stream_name] = {name: score(kind, params, X, y) for name, (kind, params) in candidates.items()}
        print(json.dumps({stream_name: results[stream_name]}), flush=True)
    mean = {name: round(float(np.mean([results[s][name]["relative_mae"] for s in results])), 4) for name in candidates}
    print(json.dumps({"rows": args.rows, "cpu": cpu_name(), "candidates": candidates, "by_stream": results,
                      "mean_relative_mae": mean}, indent=2))


if __name__ == "__main__":
    main()
