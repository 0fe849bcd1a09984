"""First use as a new user meets it: how long a new Python process waits for its first prediction, and
the slowest row after it.

Each case runs in a process of its own with an empty home (``HOME`` and ``XDG_CACHE_HOME`` in a
temporary folder, so no cache of the user's is read or written): first a first-ever process, then a
second process with the same home, which finds whatever the first one left in its caches. The cases:

- ``river``: ``StandardScaler() | NCTLClassifier()`` on river's dicts of ``--features`` random
  features, ``predict_proba_one`` then ``learn_one`` per row (what ``progressive_val_score`` does);
- ``core``: ``nctl.NCTL()`` on numpy rows, ``predict_proba_one`` then ``learn_one`` per row.

For each process: ``import_s`` (importing nctl, and river's pipeline for ``river``), ``first_row_s``
(the first prediction and learning, counted from the end of the imports), ``first_prediction_s`` (the
same up to the first prediction only; for a learner that has learned nothing it is immediate, so the
second row's prediction is reported too: ``second_prediction_s``), and over the next ``--rows`` rows
the slowest row and where it was. Prints JSON with the CPU named.

    python benchmarks/first_use.py [--rows 500] [--features 8] [--cases river core] [--env NAME=VALUE ...]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

from nctl.experiments.run import cpu_name

CHILD = r"""
import json, sys, time
start = time.perf_counter()
case, rows, features = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
import numpy as np
import nctl
if case == "river":
    from river import preprocessing
    from nctl.river import NCTLClassifier
    model = preprocessing.StandardScaler() | NCTLClassifier()
else:
    model = nctl.NCTL()
imported = time.perf_counter()
rng = np.random.default_rng(0)
X = rng.standard_normal((rows + 2, features))
y = X[:, 0] + 0.5 * X[:, 1] > 0
seconds, predicted = [], []
for i in range(rows + 2):
    row_start = time.perf_counter()
    if case == "river":
        x = {f"f{j}": float(v) for j, v in enumerate(X[i])}
        model.predict_proba_one(x)
        predicted.append(time.perf_counter() - row_start)
        model.learn_one(x, bool(y[i]))
    else:
        model.predict_proba_one(X[i])
        predicted.append(time.perf_counter() - row_start)
        model.learn_one(X[i], int(y[i]))
    seconds.append(time.perf_counter() - row_start)
later = seconds[2:]
slowest = max(range(len(later)), key=later.__getitem__)
print(json.dumps({"import_s": round(imported - start, 2), "first_prediction_s": round(predicted[0], 3),
                  "first_row_s": round(seconds[0], 2), "second_prediction_s": round(predicted[1], 3),
                  "first_two_rows_s": round(seconds[0] + seconds[1], 2),
                  "slowest_later_row_s": round(later[slowest], 3), "slowest_later_row": slowest + 2,
                  "median_later_row_ms": round(1e3 * sorted(later)[len(later) // 2], 2)}))
"""


def run_case(case: str, home: str, rows: int, features: int, extra_env: dict) -> dict:
    env = {**os.environ, "HOME": home, "XDG_CACHE_HOME": os.path.join(home, ".cache"), **extra_env}
    for name in ("NCTL_CACHE_DIR", "JAX_COMPILATION_CACHE_DIR"):  # a user's own settings would hide the defaults
        if name not in extra_env:
            env.pop(name, None)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", CHILD, case, str(rows), str(features)], env=env, cwd=home,
                          capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"the {case} process failed:\n{done.stderr}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result["process_s"] = round(time.perf_counter() - start, 2)
    result["notices"] = [line for line in done.stderr.splitlines() if line.startswith("nctl")]
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=500, help="rows after the first two")
    parser.add_argument("--features", type=int, default=8)
    parser.add_argument("--cases", nargs="+", default=["river", "core"], choices=["river", "core"])
    parser.add_argument("--env", nargs="*", default=[], help="NAME=VALUE set in every process (e.g. NCTL_QUIET=1)")
    args = parser.parse_args()
    extra_env = dict(item.split("=", 1) for item in args.env)
    results = {"cpu": cpu_name(), "cores": os.cpu_count(), "rows": args.rows, "features": args.features,
               "env": extra_env}
    for case in args.cases:
        with tempfile.TemporaryDirectory(prefix="nctl-first-use-") as home:
            results[case] = {"first_process": run_case(case, home, args.rows, args.features, extra_env),
                             "second_process": run_case(case, home, args.rows, args.features, extra_env)}
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
