"""What a new NCTL configuration costs to compile, program by program, as JSON: the test suite's
time is mostly this (each test configuration compiles its own programs).

Creates a small learner of the kind the tests use (a 3-1 network, 3 features, ``k = 2``, ``P = 4``),
learns 40 rows, then predicts batches of 1, 3, 9, 40, 130 and 300 rows, and waits for the programs
compiled ahead (algorithm §6.8). JAX reports each tracing, lowering and XLA compilation with its
duration; they are summed per program, with the count of XLA compilations of each.

    python benchmarks/compile_costs.py
"""

import collections
import json
import time

import jax
import numpy as np

import nctl
from nctl.core import engine
from nctl.experiments.run import cpu_name

EVENTS = {"jaxpr_trace_duration": "trace_s", "jaxpr_to_mlir_module_duration": "lower_s",
          "backend_compile_duration": "compile_s"}


def event_kind(event: str) -> str | None:
    """``trace_s``, ``lower_s`` or ``compile_s`` for JAX's duration event of that stage, else None."""
    return EVENTS.get(event.rsplit("/", 1)[-1])


PREDICTION_SIZES = (1, 3, 9, 40, 130, 300)


def main() -> None:
    costs = collections.defaultdict(lambda: collections.Counter())

    def listener(event, duration, fun_name=None, **_):
        kind = event_kind(event)
        if kind is not None:
            name = str(fun_name).removeprefix("jit(").removesuffix(")")
            costs[name][kind] += duration
            if kind == "compile_s":
                costs[name]["compilations"] += 1

    jax.monitoring.register_event_duration_secs_listener(listener)
    X = np.random.default_rng(0).normal(size=(300, 3)).astype(np.float32)
    start = time.perf_counter()
    model = nctl.NCTL(layer_sizes=(3, 1), context_bits=1, pool_size=2, min_segment=4, depth=9, seed=3)
    model.learn_many(X[:40], (X[:40, 0] > 0).astype(int))
    learned = time.perf_counter()
    for size in PREDICTION_SIZES:
        model.predict_proba_many(X[:size])
    engine.finish_compiling()
    end = time.perf_counter()
    seconds = {name: sum(v for k, v in c.items() if k != "compilations") for name, c in costs.items()}
    programs = {name: {k: round(v, 3) for k, v in sorted(costs[name].items())}
                for name in sorted(seconds, key=seconds.get, reverse=True) if seconds[name] >= 0.05}
    print(json.dumps({"cpu": cpu_name(), "jax": jax.__version__, "prediction_sizes": PREDICTION_SIZES,
                      "first_learn_s": round(learned - start, 2), "predictions_s": round(end - learned, 2),
                      "programs": programs}, indent=2))


if __name__ == "__main__":
    main()
