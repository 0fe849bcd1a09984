"""What a learner costs to compile when the process has compiled another of the same network, as JSON.

Learns 40 rows with three learners in turn, each in the same process: an NCTL (6 features, a 4-3-1
network, 2 context bits, ``k = 3``), a second NCTL of the same network with another pool (``k = 2``,
spacing eviction), and a GLN of the same network. Each time is the learner's first ``learn_many``,
with the programs it compiles ahead (docs/algorithm.md §6.8). The second and third share with the
first whatever programs do not depend on the pool: the gating hyperplanes (§6.10).

    python benchmarks/second_configuration.py
"""

import json
import time

import numpy as np

import nctl
from nctl.core import engine
from nctl.experiments.run import cpu_name

NETWORK = dict(layer_sizes=(4, 3, 1), context_bits=2)
NCTL_SETTINGS = dict(min_segment=8, reservoir_size=8, depth=9)


def main() -> None:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 6)).astype(np.float32)
    y = (X[:, 0] > 0).astype(int)
    learners = {"first_nctl": lambda: nctl.NCTL(**NETWORK, **NCTL_SETTINGS, pool_size=3),
                "second_nctl_other_pool": lambda: nctl.NCTL(**NETWORK, **NCTL_SETTINGS, pool_size=2, eviction="spacing"),
                "gln_same_network": lambda: nctl.GLN(**NETWORK)}
    out = {"cpu": cpu_name()}
    for name, make in learners.items():
        start = time.perf_counter()
        make().learn_many(X, y)
        engine.finish_compiling()
        out[f"{name}_s"] = round(time.perf_counter() - start, 2)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
