"""Whether NCTL's adapt50 evaluation recalls a remembered task on a short Permuted MNIST, as JSON lines.

NCTL and its GLN learn the same deskewed Permuted MNIST stream (``--tasks`` tasks of ``--per-task``
examples; the Permuted MNIST network at C = 2^6, learning rate 0.003, bounded mode B = 4, spacing
eviction, ``L_min`` 256 unless ``--set`` says otherwise). After each task every task seen so far is
tested ``frozen`` and ``adapt50`` (1,000 test images). For each adapt50 snapshot the line gives, per
layer, the posterior that the neurons' current segment began within the 50 adaptation examples
(``nctl.inspect.boundaries``): a recall needs a new segment whose mixture picks the remembered state, so
0 means that the 50 examples were answered by the model of the latest task. It also gives, per task,
the evidence a class network's output neuron would gain over the 50 examples by predicting with the
GLN as it was at that task's end instead of the GLN now (nats, mean and largest over the ten networks):
what a recall could at best be paid with, against the prior cost of a new segment and of a stored
member (docs/algorithm.md §3.3, §4.1).

    python tools/retrieval.py [--tasks 5] [--per-task 12000] [--set context_bits=8 ...] [--data-dir DIR]
"""

import argparse
import json

import numpy as np

import nctl
from nctl.core import gln
from nctl.evaluate.scores import accuracy, log_loss_steps
from nctl.evaluate.task_matrix import ADAPT_STEPS, adapted
from nctl.inspect import boundaries
from nctl.pool import with_pool
from nctl.streams import permuted_mnist

NETWORK = {"layer_sizes": (10, 5, 1), "context_bits": 6, "learning_rate": 0.003, "n_classes": 10, "seed": 0}
POOL = {"pool_size": 15, "depth": 20, "min_segment": 256, "eviction": "spacing", "trained_members": 4}
TEST_IMAGES = 1000


def network_log_loss(model: nctl.GLN, X, y) -> np.ndarray:
    """Each class network's mean log loss [classes] on its one-vs-all targets: its raw outputs, not the
    normalised class probabilities the learner returns."""
    p = np.asarray(gln.predict_many(model.state_, X, model.rows))
    return np.array([np.mean(log_loss_steps(p[:, c], (y == c).astype(int))) for c in range(p.shape[1])])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=5)
    parser.add_argument("--per-task", type=int, default=12000)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=JSON", help="an NCTL setting")
    parser.add_argument("--data-dir", default=None)
    args = parser.parse_args()
    settings = {**NETWORK, **POOL}
    for item in args.set:
        key, _, value = item.partition("=")
        settings[key] = json.loads(value)
    stream = permuted_mnist(args.data_dir, seed=0, n_tasks=args.tasks, examples_per_task=args.per_task,
                            deskewed=True, z_clip=3.0)
    network = {key: settings[key] for key in NETWORK}
    model, substrate = nctl.NCTL(**with_pool(settings)), nctl.GLN(**network)
    tests = [tuple(a[:TEST_IMAGES] for a in task.test_set()) for task in stream.tasks]
    task_end = []  # the GLN as it was at each task's end
    for seg, (_, start, stop) in enumerate(stream.segments()):
        for X, y, _ in stream.chunks(size=4096, start=start, stop=stop):
            model.learn_many(X, y)
            substrate.learn_many(X, y)
        task_end.append(substrate.copy())
        line = {"after_task": seg, "step": stop}
        if not seg:
            line["settings"] = {key: settings[key] for key in sorted(settings)}
        for name, learner in (("nctl", model), ("gln", substrate)):
            line[name] = {"frozen": [], "adapt50": []}
            for j, (X, y) in enumerate(tests[:seg + 1]):
                line[name]["frozen"].append(round(100 * accuracy(learner.predict_proba_many(X), y), 2))
                with adapted(learner, stream.tasks[j], np.random.default_rng([0, seg, j])) as snapshot:
                    line[name]["adapt50"].append(round(100 * accuracy(snapshot.predict_proba_many(X), y), 2))
                    if name == "nctl":
                        recent = []
                        for layer in range(len(settings["layer_sizes"])):
                            begun, mass = boundaries.next_segment_posterior(snapshot, layer)
                            recent.append(float(f"{np.sum(mass[begun > stop]):.3g}"))
                        line.setdefault("new_segment_posterior", []).append(recent)
        gaps = [ADAPT_STEPS * (network_log_loss(substrate, *tests[j]) - network_log_loss(task_end[j], *tests[j]))
                for j in range(seg)]
        line["recall_evidence_nats"] = [{"mean": round(float(g.mean()), 3), "max": round(float(g.max()), 3)} for g in gaps]
        print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
