"""Does a growing learner stop the stream? ``nctl.NCTL`` with its defaults (``depth=None``: the tree
grows with the stream) learns random rows one at a time, as river drives it (``predict_proba_one`` then
``learn_one``), and the time of every row is kept. Prints JSON: the first row (compiling included), rows
per second after it, the slowest rows after it, the block arenas' depth before and after (a
high-dimensional input's arenas start lean and are enlarged as the tree deepens, docs/algorithm.md §6.2;
their programs are compiled ahead, §6.8), the programs the stream itself compiled or loaded from the
persistent cache after its first row (those compiled ahead run in other threads), and every row at
which the state grew: its time and the next row's (the growth's work may finish in the next call: JAX
dispatches asynchronously), the arenas before and after, and the state's bytes before and after (the
enlarged state is new memory, which the operating system hands over page by page on its first write).

    python benchmarks/stream_stalls.py [--rows 5000] [--features 784] [--cache DIR]
"""

import argparse
import json
import threading
import time

import jax
import numpy as np

import nctl
from nctl.compilation import programs_made
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
    growths = []
    with programs_made() as made:
        learn_rows(model, X, y, seconds, growths)
    for growth in growths:  # the row's and the next row's seconds
        growth["s"] = [round(float(t), 3) for t in seconds[growth["row"]:growth["row"] + 2]]
    slowest = np.argsort(seconds)[::-1][:5]
    print(json.dumps({"cpu": cpu_name(), "rows": args.rows, "features": args.features, "first_row_s": round(first_s, 2),
                      "rows_per_s_after_first": round((args.rows - 1) / seconds.sum(), 1),
                      "median_row_ms": round(1e3 * float(np.median(seconds[1:])), 2),
                      "slowest_rows": [{"row": int(i), "s": round(float(seconds[i]), 3)} for i in slowest],
                      "programs_made_after_first_row": made.count(threading.get_ident()),
                      "arena_depth": {"first_row": arena_start, "last_row": model.cfg_.arena_depth},
                      "growths": growths}, indent=2))


def learn_rows(model: "nctl.NCTL", X, y, seconds, growths: list) -> None:
    """Rows 1.. of ``X, y`` one at a time as river drives the learner, each row's seconds kept in
    ``seconds`` and each growth of the state listed in ``growths``."""
    for i in range(1, X.shape[0]):
        cfg, held = model.cfg_, state_bytes(model)
        start = time.perf_counter()
        model.predict_proba_one(X[i])
        model.learn_one(X[i], y[i])
        seconds[i] = time.perf_counter() - start
        if model.cfg_ != cfg:  # its work may land in the next row's time (JAX dispatches asynchronously)
            growths.append({"row": i,
                            "arena_depth": [cfg.arena_depth, model.cfg_.arena_depth],
                            "record_rows": [cfg.record_rows, model.cfg_.record_rows],
                            "state_gb": [round(held / 1e9, 3), round(state_bytes(model) / 1e9, 3)]})


def state_bytes(model: "nctl.NCTL") -> int:
    """Bytes of the arrays the learner's state holds now."""
    return sum(a.nbytes for a in jax.tree.leaves(model.state_))


if __name__ == "__main__":
    main()
