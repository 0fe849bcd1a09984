"""Whether the sequence predictors' pool decisions depend on the tie tolerance (docs/algorithm.md §4.8), as
JSON lines: ``nctl.sequence.FMN`` (depth 15, the per-example skip test) on strings of the authors' coin
experiment's kind (7 coins of uniform bias, switch probability 0.005, 5,000 bits; seeds 0, 1, ...), each
string's final log evidence and pool event counts (refine, skip, add, evict).

``--float64-tolerance`` replaces the tolerance of float64 (KT) predictions before anything compiles, so run
it once per value, each in its own process, and compare the lines: a program compiled in a process keeps
the tolerance it was traced with.

    python benchmarks/kt_ties.py [--float64-tolerance 1e-6] [--strings 10]
"""

import argparse
import json

import numpy as np

from nctl.core import pool
from nctl.sequence import FMN


def coin_string(seed: int, n: int = 5000, coins: int = 7, switch: float = 0.005) -> np.ndarray:
    """Bits from one of ``coins`` biased coins, the coin redrawn with probability ``switch`` per step."""
    rng = np.random.default_rng(seed)
    bias, coin, bits = rng.uniform(size=coins), 0, []
    for _ in range(n):
        if rng.uniform() < switch:
            coin = rng.integers(coins)
        bits.append(int(rng.uniform() < bias[coin]))
    return np.array(bits)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--float64-tolerance", type=float, default=None)
    parser.add_argument("--strings", type=int, default=10)
    args = parser.parse_args()
    if args.float64_tolerance is not None:
        pool.TIE_TOLERANCE["float64"] = args.float64_tolerance
    for seed in range(args.strings):
        run = FMN(depth=15, joint_evidence=False).run(coin_string(seed))
        print(json.dumps({"seed": seed, "float64_tolerance": pool.tie_tolerance(np.float64),
                          "log_evidence": float(np.asarray(run.evidence).reshape(-1)[-1]),
                          "pool_events": np.asarray(run.events)[-1].tolist()}), flush=True)


if __name__ == "__main__":
    main()
