"""What an adapt50 evaluation costs NCTL: a fork (engine.journal, docs/algorithm.md §6.7) against a
copy of the learner, at the Permuted MNIST network (ten one-vs-all 10-5-1 nets, 784 inputs, L_min 256),
as JSON: the learner's state bytes, the journal's bytes, and the seconds of each way of adapting on 50
rows and giving the learner back (predictions excluded; both read the same adapted state). With
``--trained-members B`` the learner runs in bounded mode; with ``--steps`` 2,040 a pool boundary falls
among the 50 rows (the journal then also copies the pool entries, to memory or with ``--pool-on-disk`` to a
temporary file, and the records' arrays; a fork from the state a file was taken of reuses it, so the forks
after the first do not copy it: ``first_journal_s`` times one copy). A copy that would not fit in free
memory is not timed.

    python benchmarks/fork.py [--context-bits 6] [--steps 2048] [--repeats 3] [--trained-members B] [--pool-on-disk]
"""

import argparse
import json
import time

import jax
import numpy as np

import nctl
from nctl import memory
from nctl.core import engine
from nctl.experiments.run import cpu_name
from nctl.learners import engine_learner
from nctl.pool import Pool


def nbytes(tree) -> int:
    """Bytes in memory: a temporary file's map excluded."""
    return sum(leaf.nbytes for leaf in jax.tree.leaves(tree) if not isinstance(leaf, np.memmap))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--context-bits", type=int, default=6)
    parser.add_argument("--steps", type=int, default=2048, help="rows learned before the forks")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--trained-members", type=int, default=None, help="bounded mode's B (default: exact)")
    parser.add_argument("--pool-on-disk", action="store_true", help="a journal's pool copy goes to a temporary file")
    args = parser.parse_args()
    engine_learner.POOL_COPY_SHARE = 0.0 if args.pool_on_disk else np.inf  # the learner's forks do as told
    rng = np.random.default_rng(0)
    pool = Pool(eviction="spacing", min_segment=256, trained_members=args.trained_members)
    model = nctl.NCTL.paper_permuted_mnist(context_bits=args.context_bits, pool=pool)
    X = rng.standard_normal((args.steps + 50, 784)).astype(np.float32)
    y = rng.integers(0, 10, args.steps + 50)
    model.learn_many(X[:args.steps], y[:args.steps])
    rows, labels = X[args.steps:], y[args.steps:]
    start = time.perf_counter()
    kept = engine.journal(model.state_, model.cfg_, rows, on_disk=args.pool_on_disk)
    journal_s = time.perf_counter() - start  # compiles its gathers; a pool copy included
    if kept is None:
        raise SystemExit("the 50 rows after --steps would enlarge the learner: a fork there is a copy")
    boundaries = (args.steps + 50) // model.cfg_.chunk - args.steps // model.cfg_.chunk
    sizes = {"pool_copy": None if kept.pool is None else "disk" if args.pool_on_disk else "memory",
             "state_bytes": nbytes(model.state_), "journal_bytes": nbytes(kept), "first_journal_s": round(journal_s, 3)}
    del kept
    times = {"fork": [], "copy": []}
    copies = 2 * sizes["state_bytes"] < (memory.available_memory() or np.inf)
    for _ in range(args.repeats + 1):  # the first round compiles
        start = time.perf_counter()
        with model.fork(rows, labels) as adapted:
            jax.block_until_ready(adapted.state_)
        jax.block_until_ready(model.state_)
        times["fork"].append(time.perf_counter() - start)
        if not copies:
            continue
        start = time.perf_counter()
        twin = model.copy()
        twin.learn_many(rows, labels)
        jax.block_until_ready(twin.state_)
        del twin
        times["copy"].append(time.perf_counter() - start)
    fork_s = float(np.median(times["fork"][1:]))
    copy_s = float(np.median(times["copy"][1:])) if copies else None
    print(json.dumps({
        "cpu": cpu_name(), "contexts": 2**args.context_bits, "trained_members": args.trained_members,
        "steps_before": args.steps, "pool_boundaries_among_the_rows": boundaries,
        **sizes,
        "fork_s": round(fork_s, 3), "copy_s": copy_s and round(copy_s, 3),
        "copy_over_fork": copy_s and round(copy_s / fork_s, 2),
    }, indent=2))


if __name__ == "__main__":
    main()
