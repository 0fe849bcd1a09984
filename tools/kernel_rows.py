"""The CPU kernel's row training alone (docs/algorithm.md §6.11), on the shapes of the river defaults'
first layer with the learner's pool of 15 (16 neurons, 16 lanes of 9 weights, 21 slots, 4 contexts, 31
pool entries; the adapters' pool of 7 has 8 lanes), as JSON: the
time of one call of ``nctl_train_rows`` for 0, 7, 14 and 21 live slots (medians of ``--calls`` calls,
in turns), and the work per live slot (the slope). A call with no live slot is the call's own cost.

    python tools/kernel_rows.py [--calls 2000]
"""

import argparse
import json
import time
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from nctl.core import native
from nctl.core.rows import GGMRows
from nctl.experiments.run import cpu_name

BLOCKS, LANES, WIDTH, SLOTS, NEURONS, CONTEXTS, ENTRIES = 1344, 16, 9, 21, 16, 4, 31
LIVE = (0, 7, 14, 21)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    args = parser.parse_args()
    if jax.default_backend() != "cpu" or not native.enabled():
        parser.error("the kernel runs on a CPU where it is built")
    rows = GGMRows(learning_rate=0.1)
    rng = np.random.default_rng(0)
    blocks = jnp.asarray(rng.normal(0, 1, (1, BLOCKS, LANES, WIDTH)).astype(np.float32))
    read = rng.permutation(BLOCKS)[:SLOTS * NEURONS].reshape(1, SLOTS, NEURONS).astype(np.int32)
    fixed = [jnp.asarray(a) for a in (
        rng.normal(0, 1, (1, NEURONS, CONTEXTS, ENTRIES, WIDTH)).astype(np.float32),  # pool rows
        read, read,  # every item reads and writes its block
        rng.integers(-1, ENTRIES, (1, SLOTS, NEURONS, LANES)).astype(np.int32),  # sources
        rng.random((1, SLOTS, NEURONS, LANES)) < 0.02,  # lanes new to their block
        rng.integers(0, CONTEXTS, (1, NEURONS)).astype(np.int32),
        rng.normal(0, 2, (1, WIDTH)).astype(np.float32), np.float32([1.0]))]

    @partial(jax.jit, donate_argnums=(0,))
    def train(blocks, size):
        return jax.vmap(lambda b, *a: native.ggm_rows(b, *a, rows, learn=True))(blocks, *fixed, size)

    sizes = [jnp.asarray(np.int32([live])) for live in LIVE]
    for size in sizes:
        blocks, q = train(blocks, size)
    q.block_until_ready()
    times = {live: [] for live in LIVE}
    for _ in range(args.calls):
        for live, size in zip(LIVE, sizes):
            start = time.perf_counter()
            blocks, q = train(blocks, size)
            q.block_until_ready()
            times[live].append(time.perf_counter() - start)
    us = {live: round(1e6 * float(np.median(t)), 1) for live, t in times.items()}
    print(json.dumps({"cpu": cpu_name(), "shape": {"neurons": NEURONS, "lanes": LANES, "width": WIDTH, "slots": SLOTS},
                      "us_per_call": {str(live): t for live, t in us.items()},
                      "us_per_live_slot": round((us[LIVE[-1]] - us[0]) / LIVE[-1], 2)}, indent=2))


if __name__ == "__main__":
    main()
