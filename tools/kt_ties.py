"""Whether the sequence predictors' pool decisions depend on the tie tolerance (docs/algorithm.md §4.8), as
JSON lines: ``nctl.sequence.FMN`` (depth 15, the per-example skip test) on strings of the authors' coin
experiment's kind (7 coins of uniform bias, switch probability 0.005, 5,000 bits; seeds 0, 1, ...; the
strings of ``tests/core/test_sequence_exact.py``'s KT tie test, run from the repository's root), each
string's final log evidence and pool event counts (refine, skip, add, evict).

``--float64-tolerance`` replaces the tolerance of float64 (KT) predictions before anything compiles, so run
it once per value, each in its own process, and compare the lines: a program compiled in a process keeps
the tolerance it was traced with.

    python tools/kt_ties.py [--float64-tolerance 1e-6] [--strings 10]
"""

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path.cwd()))  # the tests package, for the KT test's coin strings
from tests.core.test_sequence_exact import coin_bits  # noqa: E402

from nctl.core import pool  # noqa: E402
from nctl.pool import Pool
from nctl.sequence import FMN  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--float64-tolerance", type=float, default=None)
    parser.add_argument("--strings", type=int, default=10)
    args = parser.parse_args()
    if args.float64_tolerance is not None:
        pool.TIE_TOLERANCE["float64"] = args.float64_tolerance
    for seed in range(args.strings):
        bits = coin_bits(np.random.default_rng(seed), 5000, switch=0.005)
        run = FMN(depth=15, pool=Pool(joint_evidence=False)).run(bits)
        print(json.dumps({"seed": seed, "float64_tolerance": pool.tie_tolerance(np.float64),
                          "log_evidence": float(np.asarray(run.evidence).reshape(-1)[-1]),
                          "pool_events": np.asarray(run.events)[-1].tolist()}), flush=True)


if __name__ == "__main__":
    main()
