"""Does a growing learner stop the stream? ``nctl.NCTL`` with its defaults (``depth=None``: the tree
grows with the stream) learns random rows one at a time, as river drives it (``predict_proba_one`` then
``learn_one``), and the time of every row is kept. Prints JSON: the first row (compiling included), rows
per second after it, the slowest rows after it, and the block arenas' depth before and after (a
high-dimensional input's arenas start lean and are enlarged as the tree deepens, docs/algorithm.md §6.2;
their programs are compiled ahead, §6.8).

    python benchmarks/stream_stalls.py [--rows 5000] [--features 784] [--cache DIR]
"""

import argparse
import json
import time

import numpy as np

import nctl
from nctl.experiments.run import cpu_name


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=5000)
    parser.add_argument("--features", type=int, default=784)
    parser.add_argument("--cache", default=None, help="a persistent compilation cache folder (default: none)")
    args = parser.parse_args()
    if args.cache:
        nctl.enable_compilation_cache(args.cache)
    rng = np.random.default_rng(0)
    X = rng.standard_normal((args.rows, args.features)).astype(np.float32)
    y = (X[:, 0] > 0).astype(int)
    model = nctl.NCTL()
    start = time.perf_counter()
    model.learn_one(X[0], y[0])
    first_s = time.perf_counter() - start
    arena_start = model.cfg_.arena_depth
    seconds = np.zeros(args.rows)
    for i in range(1, args.rows):
        start = time.perf_counter()
        model.predict_proba_one(X[i])
        model.learn_one(X[i], y[i])
        seconds[i] = time.perf_counter() - start
    slowest = np.argsort(seconds)[::-1][:5]
    print(json.dumps({"cpu": cpu_name(), "rows": args.rows, "features": args.features, "first_row_s": round(first_s, 2),
                      "rows_per_s_after_first": round((args.rows - 1) / seconds.sum(), 1),
                      "median_row_ms": round(1e3 * float(np.median(seconds[1:])), 2),
                      "slowest_rows": [{"row": int(i), "s": round(float(seconds[i]), 3)} for i in slowest],
                      "arena_depth": {"first_row": arena_start, "last_row": model.cfg_.arena_depth}}, indent=2))


if __name__ == "__main__":
    main()
