"""What a river row costs beyond its learning, as JSON: the river adapter's defaults
(``NCTL.tabular()``) on the first Elec2 rows (8 features), six kinds of work timed in turns in one
process, so that a drift of the machine's speed weighs on all alike (medians over the turns):

* ``river_row``: ``predict_proba_one`` then ``learn_one`` per row (one compiled call per row, the
  river path, docs/algorithm.md §6.9);
* ``engine_row``: the same per row through ``engine.learn_then_predict`` (the engine's entry point that
  ``predict_proba_one`` calls), without the learner's checks and bookkeeping around it;
* ``batched_row``: the same rows learned in calls of ``engine.LEARN_BLOCK`` rows (``learn_many``),
  per row: the learning itself, pool boundaries included;
* ``empty_call``: the step program called on the state with no row to learn and nothing to predict;
* ``predict_call``: the same, predicting one row (the frozen prediction a river row ends with);
* ``pass_call``: a program that takes the state's arrays (donated) and gives them back unchanged: the
  least a call that carries the state costs.

So ``river_row - batched_row`` is what one call per row adds: ``river_row - engine_row`` is the learner's
host work, ``pass_call`` the passing of the state, ``empty_call - pass_call`` the step program's fixed
work (the operations XLA runs once per call whatever the rows, its loop and its branch) and
``predict_call - empty_call`` the frozen prediction.

    python tools/call_anatomy.py [--turns 6] [--rows-per-turn 1024] [--data-dir DIR]
"""

import argparse
import json
import time
from functools import partial
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from nctl import NCTL
from nctl.core import engine
from nctl.data.elec2 import read_elec2
from nctl.data.location import resolve_data_dir
from nctl.experiments.run import cpu_name

WARM = 2048  # rows learned before the turns (and 64 of them one at a time: the one-row programs compile)


@partial(jax.jit, donate_argnums=(0,))
def _pass(state):
    return state, state.schedule.t


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=6)
    parser.add_argument("--rows-per-turn", type=int, default=1024)
    parser.add_argument("--data-dir", default=None)
    args = parser.parse_args()
    data = read_elec2(Path(resolve_data_dir(args.data_dir)) / "elec2" / "elecNormNew.arff")
    X, Y = data.features.astype(np.float32), data.labels.astype(np.int64)
    n = args.rows_per_turn
    if WARM + args.turns * n >= len(X):
        parser.error(f"--turns x --rows-per-turn must stay under Elec2's {len(X) - WARM} rows after the warm-up")

    river, bare, batched = NCTL.tabular(), NCTL.tabular(), NCTL.tabular()  # each learns the same rows
    for learner in (river, bare, batched):
        learner.learn_many(X[:WARM - 64], Y[:WARM - 64])
        for i in range(WARM - 64, WARM):
            learner.predict_proba_one(X[i])
            learner.learn_one(X[i], Y[i])
    Z, labels, _ = engine.compiled.learn_block(X[:1], Y[:1], 0, batched.cfg_)
    probe = {"state": batched.state_}  # empty, predicting and passing calls run on this one

    def river_rows(start):
        for i in range(start, start + n):
            river.predict_proba_one(X[i])
            river.learn_one(X[i], Y[i])
        river.predict_proba_one(X[start + n])  # the last row's learning runs in a call, as the next row's would

    engine_side = {"state": bare.state_, "cfg": bare.cfg_}

    def engine_rows(start):
        for i in range(start, start + n):
            state, engine_side["cfg"], _, _ = engine.learn_then_predict(engine_side["state"], engine_side["cfg"],
                                                                        X[i:i + 1], Y[i:i + 1], X[i + 1])
            engine_side["state"] = state

    def batched_rows(start):
        batched.learn_many(X[start:start + n], Y[start:start + n])
        probe["state"] = batched.state_

    def step_calls(predict):
        def run(_):
            for _ in range(n):
                state, outcome, _ = engine.compiled.run_steps(probe["state"], Z, labels, 0, batched.cfg_, None, Z[0],
                                                    predict)
                probe["state"] = state
                np.asarray(outcome)
            batched.state_ = probe["state"]
        return run

    def pass_calls(_):
        for _ in range(n):
            probe["state"], t = _pass(probe["state"])
            np.asarray(t)
        batched.state_ = probe["state"]

    kinds = {"river_row": river_rows, "engine_row": engine_rows, "batched_row": batched_rows, "empty_call": step_calls(False),
             "predict_call": step_calls(True), "pass_call": pass_calls}
    pass_calls(None)  # compiles the passing program
    times = {name: [] for name in kinds}
    start = WARM
    for turn in range(args.turns):
        for name in kinds if turn % 2 else list(kinds)[::-1]:
            begin = time.perf_counter()
            kinds[name](start)
            times[name].append((time.perf_counter() - begin) / n)
        start += n
    ms = {name: round(1e3 * float(np.median(t)), 3) for name, t in times.items()}
    print(json.dumps({
        "cpu": cpu_name(), "config": "NCTL.tabular(), Elec2's 8 features", "rows_per_turn": n, "turns": args.turns,
        "ms": ms, "ms_spread": {name: [round(1e3 * min(t), 3), round(1e3 * max(t), 3)] for name, t in times.items()},
        "one_call_per_row_adds_ms": round(ms["river_row"] - ms["batched_row"], 3),
        "state_arrays": len(jax.tree.leaves(probe["state"])),
    }, indent=2))


if __name__ == "__main__":
    main()
