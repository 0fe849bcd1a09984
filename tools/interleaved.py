"""Two engines in one process, timed in turns: the river path's row (``predict_proba_one`` then
``learn_one``) and the pool boundary, of this checkout's ``nctl`` against another checkout's, as JSON.

On a shared 2-core machine the speed drifts by a tenth or more between runs, more than a change of a
few percent; here both engines run in the same process, in alternating blocks of rows (and boundaries),
so that a drift weighs on both alike and their ratio is what is reported. The other checkout's package
is copied to a temporary folder as ``nctl_base`` (its imports renamed), so both import side by side.
Rows: ``NCTL.tabular()`` (the river adapter's defaults) on the first Elec2 rows, its 8 features in
column order, after 1,000 rows learned at once and 100 one at a time; the two engines' predictions are
compared too. Boundaries:
each engine's boundary program on the state due at a few steps, run on fresh copies in turns, and the
states they give compared with their blocks in (slot, neuron, context) order (``state_digests.
in_place_order``: the engines may lay their blocks out apart, docs/algorithm.md §6.2).

With ``--network`` it times one of the throughput benchmark's networks instead (``split-mnist``: 784
inputs, 50-25-1; ``permuted-mnist``: ten one-vs-all 10-5-1 networks, C = 2^8, spacing eviction, L_min
256; optionally bounded with ``--trained-members``), on ``benchmarks/throughput.py``'s windows spread
over a 60,000-step stream, pools full: both engines learn each window in alternating blocks of 64 rows,
and their steps and their boundaries (every L_min rows) are timed apart; their predictions after each
window are compared.

    python tools/interleaved.py BASE_CHECKOUT [--rows 5000] [--block 100] [--data-dir DIR]
    python tools/interleaved.py BASE_CHECKOUT --network split-mnist [--windows 4]
    python tools/interleaved.py BASE_CHECKOUT --network permuted-mnist --trained-members 4 [--windows 2]
"""

import argparse
import json
import re
import shutil
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace

import jax
import jax.numpy as jnp
import numpy as np

from nctl.data.elec2 import read_elec2
from nctl.data.location import resolve_data_dir
from nctl.experiments.run import cpu_name
from state_digests import in_place_order

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))  # throughput.py, the windows timed
import throughput  # noqa: E402

WARM = 1000  # rows learned at once before the timed rows
WARM_ONE_BY_ONE = 100  # and rows learned one at a time
BOUNDARY_STEPS = (2048, 3072, 4096)  # boundaries timed (steps t = 0 mod P with several closes)
BOUNDARY_TURNS = 30
WINDOW_STEPS = 256  # --network: steps per window, as throughput.py learns them


def import_renamed(checkout: Path, folder: Path):
    """``checkout``'s ``src/nctl`` copied into ``folder`` as the package ``nctl_base`` and imported."""
    target = folder / "nctl_base"
    shutil.copytree(checkout / "src" / "nctl", target)
    for path in target.rglob("*.py"):
        text = path.read_text()
        text = re.sub(r"\bfrom nctl([. ])", r"from nctl_base\1", text)
        text = re.sub(r"\bimport nctl\b", "import nctl_base as nctl", text)
        text = re.sub(r'"nctl_(\w+)"', r'"nctl_base_\1"', text)  # its CPU kernels' FFI targets, under names of its own
        path.write_text(text.replace('"nctl.core.', '"nctl_base.core.'))  # the stored programs' module check
    sys.path.insert(0, str(folder))
    import nctl_base

    return nctl_base


def rows_in_turns(packages: dict, X, Y, block: int) -> dict:
    """Microseconds per row of each package's ``NCTL.tabular()``, the rows in alternating blocks."""
    learners = {name: package.NCTL.tabular() for name, package in packages.items()}
    for learner in learners.values():  # then rows one at a time: the one-row programs compile before the timing
        learner.learn_many(X[:WARM], Y[:WARM])
        for i in range(WARM, WARM + WARM_ONE_BY_ONE):
            learner.predict_proba_one(X[i])
            learner.learn_one(X[i], Y[i])
    spent, predictions = dict.fromkeys(learners, 0.0), {name: [] for name in learners}
    names = list(learners)
    for turn, start in enumerate(range(WARM + WARM_ONE_BY_ONE, len(X), block)):
        for name in names if turn % 2 else names[::-1]:
            learner, out, begin = learners[name], predictions[name], time.perf_counter()
            for i in range(start, min(start + block, len(X))):
                out.append(learner.predict_proba_one(X[i]))
                learner.learn_one(X[i], Y[i])
            spent[name] += time.perf_counter() - begin
    rows = len(X) - WARM - WARM_ONE_BY_ONE
    return {"us_per_row": {name: round(1e6 * s / rows, 1) for name, s in spent.items()},
            "ratio": round(spent["this"] / spent["base"], 3),
            "same_predictions": predictions["this"] == predictions["base"]}


def boundaries_in_turns(packages: dict, X, Y) -> list:
    """Milliseconds (median) of each package's boundary program on the state due at each step of
    ``BOUNDARY_STEPS``, run on fresh copies in turns, and whether the two give the same state."""
    out = []
    for steps in BOUNDARY_STEPS:
        due, cfgs = {}, {}
        for name, package in packages.items():
            engine = package.core.engine
            learner = package.NCTL.tabular()
            learner.learn_many(X[:steps - 1], Y[:steps - 1])
            Z, labels = engine.compiled.learn_block(X[steps - 1:steps], Y[steps - 1:steps], 0, learner.cfg_)[:2]
            state, outcome, _ = engine.compiled.run_steps(learner.state_, Z, labels, 1, learner.cfg_, None, Z[0], False)
            assert engine.compiled.unpack(np.asarray(outcome), learner.cfg_)[3], "no boundary due"
            due[name], cfgs[name] = (state, engine.ahead.boundary_program(state, learner.cfg_).program()), learner.cfg_
        times, results = {name: [] for name in due}, {}
        for turn in range(BOUNDARY_TURNS):
            for name in list(due) if turn % 2 else list(due)[::-1]:
                state, program = due[name]
                copy = jax.block_until_ready(jax.tree.map(jnp.copy, state))
                begin = time.perf_counter()
                results[name] = jax.block_until_ready(program(copy))
                times[name].append(time.perf_counter() - begin)
        # compared with the blocks in (slot, neuron, context) order: the two engines may lay them out apart
        ordered = {name: (in_place_order(state, cfgs[name]), unheld) for name, (state, unheld) in results.items()}
        same = all(np.array_equal(a, b)
                   for a, b in zip(jax.tree.leaves(ordered["this"]), jax.tree.leaves(ordered["base"])))
        medians = {name: float(np.median(t)) for name, t in times.items()}
        out.append({"step": steps, "ms": {name: round(1e3 * m, 3) for name, m in medians.items()},
                    "ratio": round(medians["this"] / medians["base"], 3), "same_state": same})
    return out


@contextmanager
def timed_boundaries(packages: dict, spent: dict):
    """Each package's boundary programs, as ``learn`` runs them, timed into ``spent[name]``."""
    originals = {name: package.core.engine.driver.boundary_program for name, package in packages.items()}

    def timing(name, original):
        def boundary_program(state, cfg):
            program = original(state, cfg).program()

            def run(*args):
                begin = time.perf_counter()
                out = jax.block_until_ready(program(*args))
                spent[name] += time.perf_counter() - begin
                return out

            return SimpleNamespace(program=lambda: run)

        return boundary_program

    for name, package in packages.items():
        package.core.engine.driver.boundary_program = timing(name, originals[name])
    try:
        yield
    finally:
        for name, package in packages.items():
            package.core.engine.driver.boundary_program = originals[name]


def network_in_turns(packages: dict, net: "throughput.Network", windows: int, trained_members: int | None = None,
                     block: int = 64) -> dict:
    """Milliseconds per step of each package's NCTL of ``net`` (bounded with ``trained_members``) on
    ``throughput.py``'s windows, learned in turns in blocks of ``block`` rows, and of its boundaries (per
    boundary); whether the predictions agree."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((WINDOW_STEPS, net.features)).astype(np.float32)
    y = rng.integers(0, net.classes, len(X))

    def learner(package):
        pool = dict(pool_size=net.pool, trained_members=trained_members, eviction=net.eviction,
                    min_segment=net.min_segment)
        if hasattr(package, "Pool"):  # a checkout with nctl.Pool (the earlier ones take the flat keywords)
            pool = {"pool": package.Pool(**{"size" if k == "pool_size" else k: v for k, v in pool.items()})}
        model = package.NCTL(layer_sizes=net.layers, context_bits=net.context_bits, **pool, n_classes=net.classes,
                             depth=net.depth)
        model.learn_many(X[:block], y[:block])
        return model

    def jump(model, package, w):
        throughput.jump_to(model, throughput.window_start(w, windows, net.stream), package.core.engine, pool=net.pool)

    for package in packages.values():  # compile every program the windows need, ahead or not
        model = learner(package)
        for w in range(windows):
            jump(model, package, w)
            model.learn_many(X, y)
        del model  # one learner's arenas at a time beside the timed two
        package.core.engine.finish_compiling()
    models = {name: learner(package) for name, package in packages.items()}
    spent, boundaries = dict.fromkeys(packages, 0.0), dict.fromkeys(packages, 0.0)
    predictions, turn = {name: [] for name in packages}, 0
    with timed_boundaries(packages, boundaries):
        for w in range(windows):
            for name, model in models.items():
                jump(model, packages[name], w)
            for start in range(0, len(X), block):
                for name in list(models) if turn % 2 else list(models)[::-1]:
                    begin = time.perf_counter()
                    models[name].learn_many(X[start:start + block], y[start:start + block])
                    jax.block_until_ready(models[name].state_)
                    spent[name] += time.perf_counter() - begin
                turn += 1
            for name, model in models.items():
                predictions[name].append(np.asarray(model.predict_proba_many(X[:16])))
    steps, count = windows * len(X), windows * len(X) // net.min_segment
    return {"ms_per_step": {name: round(1e3 * s / steps, 3) for name, s in spent.items()},
            "ratio": round(spent["this"] / spent["base"], 3),
            "boundary_ms": {name: round(1e3 * s / count, 2) for name, s in boundaries.items()},
            "boundary_ratio": round(boundaries["this"] / boundaries["base"], 3),
            "same_predictions": all(np.array_equal(a, b) for a, b in zip(predictions["this"], predictions["base"]))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("base", help="the other checkout (its src/nctl is compared with this one's)")
    parser.add_argument("--rows", type=int, default=5000)
    parser.add_argument("--block", type=int, default=100, help="rows per turn")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--network", choices=sorted(throughput.NETWORKS),
                        help="time this network's steps and boundaries instead of the river rows")
    parser.add_argument("--trained-members", type=int, default=None, help="with --network: bounded mode's B")
    parser.add_argument("--windows", type=int, default=4, help="with --network: windows of the stream")
    args = parser.parse_args()
    import nctl

    if args.network:
        with tempfile.TemporaryDirectory() as folder:
            packages = {"base": import_renamed(Path(args.base), Path(folder)), "this": nctl}
            timed = network_in_turns(packages, throughput.NETWORKS[args.network], args.windows, args.trained_members)
            print(json.dumps({"cpu": cpu_name(), "base": str(args.base), "network": args.network,
                              "trained_members": args.trained_members, "windows": timed}, indent=2))
        return
    data = read_elec2(Path(resolve_data_dir(args.data_dir)) / "elec2" / "elecNormNew.arff")
    X, Y = data.features[:args.rows].astype(np.float32), data.labels[:args.rows].astype(np.int64)

    with tempfile.TemporaryDirectory() as folder:
        packages = {"base": import_renamed(Path(args.base), Path(folder)), "this": nctl}
        print(json.dumps({"cpu": cpu_name(), "base": str(args.base), "rows": rows_in_turns(packages, X, Y, args.block),
                          "boundaries": boundaries_in_turns(packages, X, Y)}, indent=2))


if __name__ == "__main__":
    main()
