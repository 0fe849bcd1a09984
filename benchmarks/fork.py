"""What an adapt50 evaluation costs NCTL: a fork (engine.journal, docs/algorithm.md §6.7) against a
copy of the learner, at the Permuted MNIST network (ten one-vs-all 10-5-1 nets, 784 inputs, L_min 256),
as JSON: the learner's state bytes, the journal's bytes, and the seconds of each way of adapting on 50
rows and giving the learner back (predictions excluded; both read the same adapted state). With
``--trained-members B`` the learner runs in bounded mode; with ``--steps`` 2,040 a pool boundary falls
among the 50 rows (the journal then also copies the pool entries and the records' arrays).

    python benchmarks/fork.py [--context-bits 6] [--steps 2048] [--repeats 3] [--trained-members B]
"""

import argparse
import json
import time

import jax
import numpy as np

import nctl
from nctl.core import engine
from nctl.experiments.run import cpu_name


def nbytes(tree) -> int:
    return sum(leaf.nbytes for leaf in jax.tree.leaves(tree))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--context-bits", type=int, default=6)
    parser.add_argument("--steps", type=int, default=2048, help="rows learned before the forks")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--trained-members", type=int, default=None, help="bounded mode's B (default: exact)")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    model = nctl.NCTL.paper_permuted_mnist(context_bits=args.context_bits, eviction="spacing", min_segment=256,
                                           trained_members=args.trained_members)
    X = rng.standard_normal((args.steps + 50, 784)).astype(np.float32)
    y = rng.integers(0, 10, args.steps + 50)
    model.learn_many(X[:args.steps], y[:args.steps])
    rows, labels = X[args.steps:], y[args.steps:]
    kept = engine.journal(model.state_, model.cfg_, rows)
    if kept is None:
        raise SystemExit("the 50 rows after --steps would enlarge the learner: a fork there is a copy")
    boundaries = (args.steps + 50) // model.cfg_.chunk - args.steps // model.cfg_.chunk
    times = {"fork": [], "copy": []}
    for _ in range(args.repeats + 1):  # the first round compiles
        start = time.perf_counter()
        with model.fork(rows, labels) as adapted:
            jax.block_until_ready(adapted.state_)
        jax.block_until_ready(model.state_)
        times["fork"].append(time.perf_counter() - start)
        start = time.perf_counter()
        twin = model.copy()
        twin.learn_many(rows, labels)
        jax.block_until_ready(twin.state_)
        del twin
        times["copy"].append(time.perf_counter() - start)
    fork_s, copy_s = (float(np.median(times[k][1:])) for k in ("fork", "copy"))
    print(json.dumps({
        "cpu": cpu_name(), "contexts": 2**args.context_bits, "trained_members": args.trained_members,
        "steps_before": args.steps, "pool_boundaries_among_the_rows": boundaries,
        "state_bytes": nbytes(model.state_), "journal_bytes": nbytes(kept),
        "fork_s": round(fork_s, 3), "copy_s": round(copy_s, 3), "copy_over_fork": round(copy_s / fork_s, 2),
    }, indent=2))


if __name__ == "__main__":
    main()
