"""Where two platforms part: every state leaf of a learner after each step, as ``.npz``, or the first
step at which this platform departs from such a file.

The learner and stream are a case of ``tests/core/test_nctl_literal.py`` (run from the repository's
root). ``--save FILE`` writes ``{step}/pred`` and ``{step}/{leaf path}`` for the first ``--steps`` rows,
learned one row per call. ``--compare FILE`` learns the same rows here, starting from the saved gating
hyperplanes (platforms may round the normals' normalisation differently, and the literal reference takes
them from the learner anyway), and prints the first step whose prediction or state differs and the first
differences of each leaf. ``--decisions N`` prints, for the first N steps, every member ranking of
bounded mode (log weights and lanes), every winner choice and every pool comparison (``a``, ``b``, ``a
beats b``), from the saved hyperplanes where ``--compare`` names a file: run on two platforms, the first
line that differs shows which decision parted them (for instance where a bounded-mode case departs
from the reference on a GPU).

    python tools/trace_steps.py CASE --save gpu.npz          # on the GPU machine
    python tools/trace_steps.py CASE --compare gpu.npz       # here, on the CPU
    python tools/trace_steps.py CASE --compare gpu.npz --decisions 3   # on each platform
"""

import argparse
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, str(Path.cwd()))  # the tests package, for the literal test's cases and stream
from tests.core.test_nctl_literal import recurring_stream, settings  # noqa: E402

import nctl  # noqa: E402
from nctl.core import engine, pool  # noqa: E402


def leaves(learner, step: int, prediction) -> dict:
    arrays = {f"{step}/pred": np.asarray(prediction)}
    for path, leaf in jax.tree_util.tree_leaves_with_path(learner.state_):
        arrays[f"{step}/{jax.tree_util.keystr(path)}"] = np.asarray(leaf)
    return arrays


def show(label: str, *arrays) -> None:
    jax.debug.callback(lambda *a: print(label, *(np.asarray(v).tolist() for v in a)), *arrays)


def print_decisions() -> None:
    """Have the engine's programs print their pool comparisons, winners and lane choices as they run."""
    beats, select_winner, assign_lanes = pool.beats, pool.select_winner, engine.posterior.assign_lanes

    def shown_beats(a, b, margin, tolerance):
        out = beats(a, b, margin, tolerance)
        show("beats", a, b, out)
        return out

    def shown_winner(loglik, valid, tolerance):
        out = select_winner(loglik, valid, tolerance)
        show("winner", loglik, valid, out)
        return out

    def shown_lanes(net, sched, cfg):
        lanes, since = assign_lanes(net, sched, cfg)
        show("lanes", sched.t, (net.slots.logprior + net.slots.loglik)[:, :, 0], lanes[:, 0])  # first neuron, every slot
        return lanes, since

    pool.beats, pool.select_winner, engine.step.assign_lanes = shown_beats, shown_winner, shown_lanes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("case")
    parser.add_argument("--steps", type=int, default=48)
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--save", type=Path)
    target.add_argument("--compare", type=Path)
    parser.add_argument("--decisions", type=int, metavar="N")
    args = parser.parse_args()
    if args.decisions:
        print_decisions()
        args.steps = args.decisions
    n_features, kwargs = settings(args.case)
    X, y = recurring_stream(args.steps, n_features, kwargs.get("n_classes", 2))
    learner = nctl.NCTL(**kwargs)
    other = np.load(args.compare) if args.compare else None
    if other is not None:
        learner.predict_proba_many(X[:1])  # creates the state; the learner does not change
        nets = learner.state_.nets._replace(gates=learner.state_.nets.gates._replace(
            normals=jnp.asarray(other["0/.nets.gates.normals"]), offsets=jnp.asarray(other["0/.nets.gates.offsets"])))
        learner.state_ = learner.state_._replace(nets=nets)
    saved = {}
    for step in range(args.steps):
        if args.decisions:
            print(f"step {step}", flush=True)
            prediction = learner.learn_many(X[step:step + 1], y[step:step + 1])
            jax.effects_barrier()
            print("pred", prediction.tolist(), flush=True)
            continue
        arrays = leaves(learner, step, learner.learn_many(X[step:step + 1], y[step:step + 1]))
        if other is None:
            saved.update(arrays)
            continue
        differ = [key for key, a in arrays.items() if not np.array_equal(a, other[key], equal_nan=True)]
        if differ:
            print(f"step {step}: {len(differ)} leaves differ")
            for key in differ:
                where = np.argwhere(arrays[key] != other[key])[:4]
                print(f"  {key} {arrays[key].shape}: " + "; ".join(
                    f"{list(i)} here {arrays[key][tuple(i)]} there {other[key][tuple(i)]}" for i in where))
            return
    if args.decisions:
        return
    if other is None:
        np.savez_compressed(args.save, **saved)
        print(f"{jax.devices()[0].platform}: {len(saved)} arrays, {args.steps} steps -> {args.save}")
    else:
        print(f"the same bits for {args.steps} steps")


if __name__ == "__main__":
    main()
