"""The first layer's train step of the Split MNIST network on its own, as JSON: how close gathering,
predicting, updating and scattering whole blocks comes to the memory-bandwidth floor, for the block
layouts and scatter forms the engine could use, and for its CPU kernel (docs/algorithm.md §6.11).

Per live slot (10 of them): gather 50 blocks of 16 lanes x 785 weights from an arena, predict with
every row, update every row, scatter the blocks back. The floor moves those rows once each way.

    python benchmarks/first_layer.py [--repeats 30]
"""

import argparse
import json
import time

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from nctl.core import native
from nctl.core.rows import GGMRows
from nctl.experiments.run import cpu_name
from throughput import copy_bandwidth

SLOTS, NEURONS, LANES, WIDTH = 10, 50, 16, 785
BLOCKS = SLOTS * NEURONS * 16
ROWS = GGMRows()  # the engine's row model: predict and update


def flat_blocks(blocks, index, u, x):
    """Arena [A, W * width]: each gathered block is reshaped to [W, width] before the dot products."""
    def body(p, carry):
        blocks, qs = carry
        rows = blocks[index[p]].reshape(NEURONS, LANES, WIDTH)
        q = ROWS.predict(rows, u)
        new = ROWS.update(rows, u, q, x).reshape(NEURONS, LANES * WIDTH)
        return blocks.at[index[p]].set(new, unique_indices=True), qs.at[p].set(q)
    return lax.fori_loop(0, SLOTS, body, (blocks, jnp.zeros((SLOTS, NEURONS, LANES))))


def shaped_blocks(blocks, index, u, x):
    """Arena [A, W, width] (the engine's layout)."""
    def body(p, carry):
        blocks, qs = carry
        rows = blocks[index[p]]
        q = ROWS.predict(rows, u)
        return blocks.at[index[p]].set(ROWS.update(rows, u, q, x), unique_indices=True), qs.at[p].set(q)
    return lax.fori_loop(0, SLOTS, body, (blocks, jnp.zeros((SLOTS, NEURONS, LANES))))


def _clipped_add(old, delta):
    return jnp.clip(old + delta, -ROWS.max_weight, ROWS.max_weight)


_COMBINER = jax.make_jaxpr(_clipped_add)(jnp.float32(0), jnp.float32(0))


def combining_scatter(blocks, index, u, x):
    """Arena [A, W, width]; the update is the scatter's combiner (one read-modify-write pass)."""
    numbers = lax.ScatterDimensionNumbers(update_window_dims=(1, 2), inserted_window_dims=(0,),
                                          scatter_dims_to_operand_dims=(0,))

    def body(p, carry):
        blocks, qs = carry
        q = ROWS.predict(blocks[index[p]], u)
        delta = -(ROWS.learning_rate * (q - x))[..., None] * u
        blocks = lax.scatter_p.bind(blocks, index[p][:, None], delta, update_jaxpr=_COMBINER.jaxpr,
                                    update_consts=tuple(_COMBINER.consts), dimension_numbers=numbers,
                                    indices_are_sorted=False, unique_indices=True,
                                    mode=lax.GatherScatterMode.FILL_OR_DROP)
        return blocks, qs.at[p].set(q)
    return lax.fori_loop(0, SLOTS, body, (blocks, jnp.zeros((SLOTS, NEURONS, LANES))))


def native_kernel(blocks, index, u, x):
    """Arena [A, W, width]; the engine's CPU kernel (docs/algorithm.md §6.11): each row read, predicted
    and written in place, one pass, on XLA's intra-op threads."""
    no_pool = jnp.zeros((NEURONS, 1, 1, WIDTH), jnp.float32)
    lanes = (SLOTS, NEURONS, LANES)
    return native.ggm_rows(blocks, no_pool, index, index, jnp.full(lanes, -1), jnp.zeros(lanes, bool),
                           jnp.zeros(NEURONS, jnp.int32), u, x, SLOTS, ROWS, learn=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    u = jnp.asarray(rng.standard_normal(WIDTH), jnp.float32)
    index = jnp.asarray(rng.permutation(BLOCKS)[:SLOTS * NEURONS].reshape(SLOTS, NEURONS), jnp.int32)
    floor_bytes = SLOTS * NEURONS * LANES * WIDTH * 4 * 2
    bandwidth = copy_bandwidth()
    start_blocks = 50 * rng.standard_normal((BLOCKS, LANES, WIDTH)).astype(np.float32)
    results, outputs = {}, {}
    variants = [("flat_blocks", flat_blocks), ("shaped_blocks", shaped_blocks), ("combining_scatter", combining_scatter)]
    if native.enabled():
        variants.append(("native_kernel", native_kernel))
    for name, fn in variants:
        shape = (BLOCKS, LANES * WIDTH) if name == "flat_blocks" else (BLOCKS, LANES, WIDTH)
        run = jax.jit(fn, donate_argnums=0)
        outputs[name] = np.asarray(run(jnp.asarray(start_blocks).reshape(shape), index, u, 1.0)[0]).reshape(
            BLOCKS, LANES, WIDTH)
        blocks = jnp.zeros(shape, jnp.float32)
        blocks, _ = jax.block_until_ready(run(blocks, index, u, 1.0))
        start = time.perf_counter()
        for _ in range(args.repeats):
            blocks, _ = run(blocks, index, u, 1.0)
        jax.block_until_ready(blocks)
        seconds = (time.perf_counter() - start) / args.repeats
        results[name] = {"ms": round(1e3 * seconds, 3), "over_floor": round(seconds * bandwidth / floor_bytes, 2)}
    for name in set(results) - {"shaped_blocks"}:
        results[name]["equal_to_shaped_blocks"] = bool(np.array_equal(outputs[name], outputs["shaped_blocks"]))
    print(json.dumps({"cpu": cpu_name(), "copy_bandwidth_gb_per_s": round(bandwidth / 1e9, 1),
                      "floor_ms": round(1e3 * floor_bytes / bandwidth, 3), **results}, indent=2))


if __name__ == "__main__":
    main()
