"""Where two platforms part: every state leaf of a learner after each step, as ``.npz``, or the first
step at which this platform departs from such a file.

The learner and stream are a case of ``tests/core/test_nctl_literal.py`` (run from the repository's
root). ``--save FILE`` writes ``{step}/pred`` and ``{step}/{leaf path}`` for the first ``--steps`` rows,
learned one row per call. ``--compare FILE`` learns the same rows here, starting from the saved gating
hyperplanes (platforms may round the normals' normalisation differently, and the literal reference takes
them from the learner anyway), and prints the first step whose prediction or state differs and the first
differences of each leaf. Made to find why the bounded-mode cases depart from the reference on a GPU
(docs/RESULTS.md, 2026-11-27).

    python benchmarks/trace_steps.py CASE --save gpu.npz          # on the GPU machine
    python benchmarks/trace_steps.py CASE --compare gpu.npz       # here, on the CPU
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


def leaves(learner, step: int, prediction) -> dict:
    arrays = {f"{step}/pred": np.asarray(prediction)}
    for path, leaf in jax.tree_util.tree_leaves_with_path(learner.state_):
        arrays[f"{step}/{jax.tree_util.keystr(path)}"] = np.asarray(leaf)
    return arrays


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("case")
    parser.add_argument("--steps", type=int, default=48)
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--save", type=Path)
    target.add_argument("--compare", type=Path)
    args = parser.parse_args()
    n_features, kwargs = settings(args.case)
    X, y = recurring_stream(args.steps, n_features, kwargs.get("n_classes", 2))
    learner = nctl.NCTL(**kwargs)
    other = np.load(args.compare) if args.compare else None
    if other is not None:
        learner._ensure_state(n_features)
        nets = learner.state_.nets._replace(normals=jnp.asarray(other["0/.nets.normals"]),
                                            offsets=jnp.asarray(other["0/.nets.offsets"]))
        learner.state_ = learner.state_._replace(nets=nets)
    saved = {}
    for step in range(args.steps):
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
    if other is None:
        np.savez_compressed(args.save, **saved)
        print(f"{jax.devices()[0].platform}: {len(saved)} arrays, {args.steps} steps -> {args.save}")
    else:
        print(f"the same bits for {args.steps} steps")


if __name__ == "__main__":
    main()
