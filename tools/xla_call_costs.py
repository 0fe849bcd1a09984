"""What a compiled call costs on this machine apart from its arithmetic, as JSON: the price of each XLA
operation and of each state buffer, against which the engine's operation counts (``tools/step_profile.py
--tabular``) and its state's arrays (about 45) can be weighed.

Three families of tiny programs, each timed over many calls (a call returns one scalar to the host,
as the engine's do):

* ``chain``: ``n`` operations that each need the one before (a gather, a dot and an elementwise
  step, repeated) on an 8 x 8 array: the cost per operation when XLA:CPU runs them one after another;
* ``independent``: ``n`` such operations that need nothing from each other, summed at the end: the
  cost per operation when XLA:CPU may run them concurrently on its thread pool;
* ``buffers``: a call that takes ``n`` donated 4 KB arrays and gives them back, one of them changed:
  the cost per argument buffer, as the engine's state (about 45 arrays) pays it at every call.

And ``sorts``, calls of one search each: the pool boundary's searches by XLA's sort and top-k against
the engine's forms (docs/algorithm.md §6.5, §6.9): a reservoir merge's ``top_k`` of 200 float64 keys
for each of 25 neurons against ``reservoir.largest_first`` (and the plain sort of the same keys as
int64, what it is built from); a stable argsort of 31 x 25 pool keys against ``pool.stable_order``;
the first 32 free rows of a 79,664-row record arena by one top-k against ``records.first_unheld``.

    python tools/xla_call_costs.py [--calls 2000]
"""

import argparse
import json
import re
import time
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from nctl.experiments.run import cpu_name


def chain(n: int):
    @jax.jit
    def program(x, index):
        for _ in range(n):
            x = jnp.tanh(x[index] @ x.T)
        return x[0, 0]
    return program


def independent(n: int):
    @jax.jit
    def program(x, index):
        return sum(jnp.tanh(x[(index + i) % 8] @ x.T)[0, 0] for i in range(n))
    return program


def entry_operations(compiled) -> int:
    """Operations of a compiled program's entry computation that run (parameters, constants, tuples
    and bitcasts are free)."""
    entry = re.search(r"\nENTRY .*?\n}\n", compiled.as_text(), re.S).group(0)
    free = ("parameter(", "constant(", "get-tuple-element(", " tuple(", " bitcast(")
    return sum(1 for line in entry.splitlines()[1:-1] if " = " in line and not any(f in line for f in free))


def per_call_us(call, calls: int) -> float:
    for _ in range(50):
        call()
    start = time.perf_counter()
    for _ in range(calls):
        call()
    return 1e6 * (time.perf_counter() - start) / calls


def operation_costs(make, sizes, calls: int) -> dict:
    x, index = jnp.full((8, 8), 0.01, jnp.float32), jnp.arange(8)[::-1]
    rows = []
    for n in sizes:
        program = make(n)
        rows.append({"n": n, "operations": entry_operations(program.lower(x, index).compile()),
                     "us_per_call": round(per_call_us(lambda: np.asarray(program(x, index)), calls), 1)})
    first, last = rows[0], rows[-1]
    slope = (last["us_per_call"] - first["us_per_call"]) / (last["operations"] - first["operations"])
    return {"calls": rows, "us_per_operation": round(slope, 2)}


def buffer_costs(sizes, calls: int) -> dict:
    @partial(jax.jit, donate_argnums=0)
    def program(state, z):
        state = list(state)
        state[0] = state[0] + z
        return tuple(state), state[0][0]

    rows = []
    for n in sizes:
        box = [tuple(jnp.zeros(1024, jnp.float32) for _ in range(n))]

        def call():
            box[0], out = program(box[0], np.float32(1))
            np.asarray(out)

        rows.append({"buffers": n, "us_per_call": round(per_call_us(call, calls), 1)})
    first, last = rows[0], rows[-1]
    return {"calls": rows, "us_per_buffer": round((last["us_per_call"] - first["us_per_call"]) /
                                                  (last["buffers"] - first["buffers"]), 2)}


def sort_costs(calls: int) -> dict:
    from nctl.core import pool, reservoir
    from nctl.core.engine import records

    rng = np.random.default_rng(0)
    keys = jnp.asarray(np.log(rng.random((25, 200))) / rng.uniform(1, 5, (25, 1)))
    entries = jnp.asarray(rng.integers(0, 40, (31, 25)), jnp.int32)
    held = jnp.asarray(rng.random(79664) > 0.001)
    forms = {
        "merge_top_k": (jax.jit(jax.vmap(lambda k: jax.lax.top_k(k, 100)[1])), keys),
        "merge_largest_first": (jax.jit(jax.vmap(lambda k: reservoir.largest_first(k, 100))), keys),
        "int64_sort_of_the_merge_keys": (jax.jit(lambda k: jnp.sort(jax.lax.bitcast_convert_type(k, jnp.int64))), keys),
        "pool_argsort": (jax.jit(lambda e: jnp.argsort(e, axis=0, stable=True)), entries),
        "pool_stable_order": (jax.jit(pool.stable_order), entries),
        "free_rows_top_k": (jax.jit(lambda h: jax.lax.top_k((~h).astype(jnp.float32), 32)[1]), held),
        "free_rows_first_unheld": (jax.jit(lambda h: records.first_unheld(h, 32)), held),
    }
    out = {}
    for name, (program, argument) in forms.items():
        out[name + "_us"] = round(per_call_us(lambda: np.asarray(program(argument)), calls), 1)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    args = parser.parse_args()
    print(json.dumps({"cpu": cpu_name(), "jax": jax.__version__,
                      "chain": operation_costs(chain, (1, 10, 40), args.calls),
                      "independent": operation_costs(independent, (1, 10, 40), args.calls),
                      "buffers": buffer_costs((1, 10, 45, 90), args.calls),
                      "sorts": sort_costs(args.calls)}, indent=2))


if __name__ == "__main__":
    main()
