"""The object API one row at a time, as the river path uses it: ``predict_proba_one(x)`` (a regressor's
``predict_one(x)``) then ``learn_one(x, y)`` per row, on standardised random rows with a linear label (a
regressor: the linear target), for each learner and engine (``nctl.engines``) in one run. After ``--warm``
rows (compiling, for JAX), the steady state over ``--rows`` rows: microseconds per row, and each engine's
time against JAX's on the same learner. Prints JSON with the CPU named.

    python benchmarks/per_row.py [--rows 5000] [--warm 500] [--features 8]
                                 [--learners GLN NCTL GLNRegressor NCTLRegressor] [--engines native jax]

The native engine runs the GLN and NCTL (exact mode); a learner it does not run is measured on JAX alone.
"""

import argparse
import json
import os
import time

import numpy as np

import nctl
from nctl.experiments.run import cpu_name

LEARNERS = {"GLN": nctl.GLN.tabular, "NCTL": nctl.NCTL.tabular, "GLNRegressor": nctl.GLNRegressor,
            "NCTLRegressor": nctl.NCTLRegressor}  # the classifiers' adapter defaults; the regressors' own


def microseconds_per_row(make, X, y, warm: int) -> tuple[float, str]:
    """(steady-state microseconds per predicted and learned row after ``warm`` rows, the engine used)."""
    model = make()
    predict = model.predict_one if isinstance(model, nctl.learners.Regressor) else model.predict_proba_one
    for x, label in zip(X[:warm], y[:warm]):
        predict(x)
        model.learn_one(x, label)
    start = time.perf_counter()
    for x, label in zip(X[warm:], y[warm:]):
        predict(x)
        model.learn_one(x, label)
    return (time.perf_counter() - start) / (len(X) - warm) * 1e6, model.engine_


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=5000)
    parser.add_argument("--warm", type=int, default=500)
    parser.add_argument("--features", type=int, default=8)
    parser.add_argument("--learners", nargs="+", default=list(LEARNERS), choices=list(LEARNERS))
    parser.add_argument("--engines", nargs="+", default=["native", "jax"], choices=["native", "jax"])
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    X = rng.standard_normal((args.warm + args.rows, args.features)).astype(np.float32)
    target = X @ rng.standard_normal(args.features)
    results = {}
    for learner in args.learners:
        rows = {}
        y = target if learner.endswith("Regressor") else (target > 0).astype(np.int64)
        for engine in args.engines:
            os.environ["NCTL_ENGINE"] = engine
            us, used = microseconds_per_row(LEARNERS[learner], X, y, args.warm)
            if used == engine:
                rows[engine] = {"us_per_row": round(us, 1), "rows_per_s": round(1e6 / us)}
        if "jax" in rows:
            for engine in rows:
                rows[engine]["speed_against_jax"] = round(rows["jax"]["us_per_row"] / rows[engine]["us_per_row"], 2)
        results[learner] = rows
    print(json.dumps({"cpu": cpu_name(), "features": args.features, "rows": args.rows, "warm": args.warm,
                      "learners": results}, indent=2))


if __name__ == "__main__":
    main()
