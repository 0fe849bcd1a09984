"""The inspection commands of ``nctl``:

    nctl saliency transition     [--tasks 1v3 5v9 1v8] [--steps-per-task N] [--every N] ...
    nctl saliency pseudo-tasks   [--tasks 4v5 3v9 0v5] [--steps-per-task N] [--samples N] ...
    nctl boundaries              [--sequences N] [--steps N] [--window W] [--tolerance T] ...
    nctl pool-history            [--examples-per-task N] ...

Each writes a PNG into ``--out`` and prints a JSON summary. Data: ``--data-dir``, else $NCTL_DATA,
else the user cache. Defaults run in a few minutes on two CPU cores; the size flags scale them up.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import numpy as np

from nctl import atomic
from nctl.arguments import at_least
from nctl.core.pool import EVICTION_POLICIES
from nctl.deferred import jax
from nctl.inspect import boundaries, pools, saliency
from nctl.learners import NCTL
from nctl.pool import Pool
from nctl.streams import FREE_SPLIT_PAIRS, TaskStream, free_split_mnist, mnist_classes, split_mnist


def _network_arguments(parser: argparse.ArgumentParser, layer_sizes: tuple, learning_rate: float = 1e-3,
                       eviction: str = "fifo") -> None:
    parser.add_argument("--layer-sizes", type=int, nargs="+", default=list(layer_sizes), metavar="N")
    parser.add_argument("--context-bits", type=int, default=4)
    parser.add_argument("--learning-rate", type=float, default=learning_rate)
    parser.add_argument("--pool-size", type=int, default=15)
    parser.add_argument("--min-segment", type=int, default=32)
    parser.add_argument("--eviction", choices=EVICTION_POLICIES, default=eviction, help="which entry a full pool gives up")
    parser.add_argument("--depth", type=int, default=None, help="tree depth (default: ceil(log2 stream length))")
    parser.add_argument("--seed", type=int, default=0, help="seed of the network and of the data sampling")
    parser.add_argument("--data-dir", default=None, help="data folder (default: $NCTL_DATA, else the user cache)")
    parser.add_argument("--out", default="figures", help="folder for the PNG file (default: ./figures)")


def _learner(args, n_steps: int) -> NCTL:
    depth = args.depth if args.depth is not None else max(1, math.ceil(math.log2(n_steps)))
    pool = Pool(size=args.pool_size, min_segment=args.min_segment, eviction=args.eviction)
    return NCTL(layer_sizes=tuple(args.layer_sizes), context_bits=args.context_bits, learning_rate=args.learning_rate,
                pool=pool, depth=depth, seed=args.seed)


def _pair(name: str) -> tuple[int, int]:
    """'1v3' -> (1, 3), the Free Split task of digits 1 (label 0) and 3 (label 1)."""
    low, sep, high = name.partition("v")
    if not sep or not (low.isdigit() and high.isdigit()) or (int(low), int(high)) not in FREE_SPLIT_PAIRS:
        raise SystemExit(f"a task is two digits a < b written 'avb' (e.g. 1v3), got {name!r}")
    return int(low), int(high)


def _pair_tasks(args, names) -> list:
    tasks = free_split_mnist(args.data_dir, n_steps=1).tasks
    return [tasks[FREE_SPLIT_PAIRS.index(_pair(name))] for name in names]


def _subsample(X, y, n: int, rng):
    keep = np.sort(rng.choice(len(X), size=min(n, len(X)), replace=False))
    return X[keep], y[keep]


def _finish(summary: dict, path: Path) -> int:
    summary["figure"] = str(path)
    print(json.dumps(summary, indent=1))
    return 0


def _correlation(a, b) -> float:
    return float(np.corrcoef(a, b)[0, 1])


# ----------------------------------------------------------------------------- saliency transition


def cmd_transition(args) -> int:
    """Train on the tasks in turn and draw the MAP saliency map every ``--every`` steps (mean over test
    images of the current task). Titles: the step, the correlation ``r`` with the first task's final
    map, and the share of neurons whose MAP member was recalled from a pool entry born in the first
    task. The last row is a control: a fresh learner trained on the last task alone."""
    atomic.check_writable(args.out)  # before any training
    from nctl.inspect import figures

    rng = np.random.default_rng(args.seed)
    tasks = _pair_tasks(args, args.tasks)
    data = [task.sample_train(args.steps_per_task, rng) for task in tasks]
    tests = [_subsample(*task.test_set(), args.examples, rng)[0] for task in tasks]
    cols = math.ceil(args.steps_per_task / args.every)
    rows = [(name, i, i) for i, name in enumerate(args.tasks)] + [(f"{args.tasks[-1]} alone", len(tasks) - 1, None)]
    maps = np.full((len(rows), cols, 784), np.nan)
    steps, recalled = np.zeros((len(rows), cols), int), np.zeros((len(rows), cols))
    accuracy = []
    for row, (_, task, phase) in enumerate(rows):
        if phase in (0, None):
            learner = _learner(args, args.steps_per_task * len(tasks))
        X, y = data[task]
        hits = 0
        for col, a in enumerate(range(0, len(X), args.every)):
            p = learner.learn_many(X[a:a + args.every], y[a:a + args.every])
            hits += int(np.sum((p > 0.5) == y[a:a + args.every]))
            maps[row, col] = saliency.saliency(learner, tests[task]).mean(axis=0)
            steps[row, col] = learner.t_
            born = np.concatenate(saliency.map_born(learner))
            recalled[row, col] = np.mean((born >= 2) & (born - 2 < args.steps_per_task)) if phase is not None else 0
        accuracy.append(hits / len(X))
    first = maps[0, -1]
    correlation = [[_correlation(m, first) for m in row] for row in maps]
    titles = [[f"t={t} r={r:.2f}" + (f" rec {share:.0%}" if phase is not None else "") for t, r, share in zip(*values)]
              for values, (_, _, phase) in zip(zip(steps, correlation, recalled), rows)]
    path = figures.saliency_grid(maps, titles, [name for name, _, _ in rows],
                                 Path(args.out) / "saliency-transition.png",
                                 f"MAP saliency while learning {', '.join(args.tasks)}. r: correlation with the final "
                                 f"{args.tasks[0]} map; rec: neurons whose MAP member was recalled from {args.tasks[0]}")
    return _finish({"rows": [name for name, _, _ in rows], "steps": steps.tolist(),
                    "correlation_with_first_task": correlation, "recalled_from_first_task": recalled.tolist(),
                    "online_accuracy": accuracy}, path)


# ----------------------------------------------------------------------------- pseudo-tasks


def _pair_accuracies(layers, X, digits, rows) -> dict:
    """Accuracy of a GLN on every digit pair a < b (a -> 0, b -> 1) over the images ``X`` of ``digits``."""
    p = saliency.gln_predictions(layers, X, rows)
    accuracy = {}
    for a, b in FREE_SPLIT_PAIRS:
        pair = np.isin(digits, (a, b))
        accuracy[(a, b)] = float(np.mean((p[pair] > 0.5) == (digits[pair] == b)))
    return accuracy


def cmd_pseudo_tasks(args) -> int:
    """Train on the tasks in turn (top row: the MAP map after each), then draw pseudo-task networks
    (one random pool entry per neuron) and show each one's map on the digit pair it solves best."""
    atomic.check_writable(args.out)  # before any training
    from nctl.inspect import figures

    rng = np.random.default_rng(args.seed)
    tasks = _pair_tasks(args, args.tasks)
    learner = _learner(args, args.steps_per_task * len(tasks))
    digits_X, digits = _subsample(*mnist_classes(args.data_dir).tasks[0].test_set(), args.eval_examples, rng)
    cols = max(len(tasks), args.columns)
    rows = 1 + math.ceil(args.samples / cols)
    maps = np.full((rows, cols, 784), np.nan)
    titles = [[""] * cols for _ in range(rows)]
    for i, task in enumerate(tasks):
        learner.learn_many(*task.sample_train(args.steps_per_task, rng))
        maps[0, i] = saliency.saliency(learner, _subsample(*task.test_set(), args.examples, rng)[0]).mean(axis=0)
        titles[0][i] = f"MAP after {args.tasks[i]}"
    seen = {_pair(name) for name in args.tasks}
    samples = []
    for s in range(args.samples):
        layers = saliency.pool_sample_network(learner, jax.random.fold_in(jax.random.PRNGKey(args.seed), s))
        accuracy = _pair_accuracies(layers, digits_X, digits, learner.cfg_.rows)
        best = max(accuracy, key=accuracy.get)
        best_unseen = max((pair for pair in accuracy if pair not in seen), key=accuracy.get)
        on_best = np.isin(digits, best)
        maps[1 + s // cols, s % cols] = np.asarray(saliency.saliency_maps(layers, digits_X[on_best])).mean(axis=0)
        titles[1 + s // cols][s % cols] = f"{best[0]}v{best[1]}{' (seen)' if best in seen else ''}: {accuracy[best]:.0%}"
        samples.append({"best": f"{best[0]}v{best[1]}", "accuracy": accuracy[best], "seen": best in seen,
                        "best_unseen": f"{best_unseen[0]}v{best_unseen[1]}", "unseen_accuracy": accuracy[best_unseen]})
    row_labels = ["trained"] + ["pseudo-tasks"] * (rows - 1)
    path = figures.saliency_grid(maps, titles, row_labels, Path(args.out) / "saliency-pseudo-tasks.png",
                                 f"{'-'.join(map(str, args.layer_sizes))} NCTL after {', '.join(args.tasks)}: "
                                 "random pool entry per neuron (title: best digit pair, its accuracy)")
    return _finish({"tasks": args.tasks, "samples": samples}, path)


# ----------------------------------------------------------------------------- boundaries


def cmd_boundaries(args) -> int:
    """Free Split MNIST sequences: detect task changes from a layer's segment posterior; scores for
    every layer as the source, the figure for ``--layer`` (1-based; the last is the output neuron)."""
    atomic.check_writable(args.out)  # before any training
    from nctl.inspect import figures

    n_layers = len(args.layer_sizes)
    if not 1 <= args.layer <= n_layers:
        raise SystemExit(f"--layer must be in 1..{n_layers}, got {args.layer}")
    scores = {layer: [] for layer in range(1, n_layers + 1)}
    losses, curves, truths, found = [], [], [], []
    for sequence in range(args.sequences):
        stream = free_split_mnist(args.data_dir, seed=args.seed + sequence, n_steps=args.steps)
        X, y, _ = next(stream.chunks(size=len(stream)))
        probs, trace = boundaries.trace(_learner(args, len(stream)), X, y)
        losses.append(float(-np.mean(np.log(np.where(y == 1, probs, 1 - probs)))))
        for layer, layer_scores in scores.items():
            detections = boundaries.detect(trace, args.window, args.threshold, layer - 1)
            layer_scores.append(boundaries.score(detections, stream.boundaries, len(stream), args.tolerance))
            if layer == args.layer and sequence < args.plot_sequences:
                curves.append(trace.change_probability(args.window, layer - 1))
                truths.append(stream.boundaries[1:])
                found.append(detections.index)
    source = "output neuron" if args.layer == n_layers else f"layer {args.layer}, mean over its neurons"
    path = figures.change_probability(curves, truths, found, args.window, args.threshold,
                                      Path(args.out) / "boundaries.png",
                                      f"Free Split MNIST: change probability from the segment posterior ({source})")
    keys = ("precision", "recall", "f1", "detections", "boundaries")
    return _finish({
        "settings": {k: getattr(args, k) for k in ("sequences", "steps", "window", "threshold", "tolerance", "layer")},
        "pooled": boundaries.summarise(scores[args.layer]),
        "pooled_by_layer": {layer: {k: v for k, v in boundaries.summarise(s).items() if k in keys}
                            for layer, s in scores.items()},
        "per_sequence": [{**{k: s[k] for k in keys}, "log_loss": loss} for s, loss in zip(scores[args.layer], losses)],
    }, path)


# ----------------------------------------------------------------------------- pool history


def cmd_pool_history(args) -> int:
    """Split MNIST (the first ``--examples-per-task`` steps of each task): pool composition by origin
    task over time (output neuron; layer 1 averaged over its neurons), and the pool events per task."""
    atomic.check_writable(args.out)  # before any training
    from nctl.inspect import figures

    full = split_mnist(args.data_dir, seed=args.seed)
    keep = np.concatenate([np.flatnonzero(full.task_of_step == task)[:args.examples_per_task]
                           for task in range(len(full.tasks))])
    stream = TaskStream(full.name, full.tasks, full.task_of_step[keep], full.row_of_step[keep], full.n_features)
    X, y, task_of_step = next(stream.chunks(size=len(stream)))
    learner = _learner(args, len(stream))
    history = pools.record(learner, X, y)
    n_tasks = len(stream.tasks)
    last = len(args.layer_sizes) - 1
    names = {"output neuron": last, "layer 1": 0} if last else {"output neuron": 0}
    shares = {name: pools.task_shares(history, layer, task_of_step, n_tasks) for name, layer in names.items()}
    events = {name: pools.events_per_task(history, layer, task_of_step, n_tasks) for name, layer in names.items()}
    task_names = [task.name for task in stream.tasks]
    path = figures.pool_history(history.steps, shares, events, task_names, stream.boundaries[1:],
                                Path(args.out) / "pool-history.png")
    return _finish({
        "tasks": task_names,
        "events_per_neuron": {name: {task: dict(zip(pools.POOL_EVENTS, map(float, row)))
                                     for task, row in zip(task_names, table)} for name, table in events.items()},
        "final_shares": {name: dict(zip(task_names, map(float, share[-1]))) for name, share in shares.items()},
    }, path)


# ----------------------------------------------------------------------------- registration


def add_parsers(subparsers: argparse._SubParsersAction) -> None:
    """Register ``saliency`` (``transition``, ``pseudo-tasks``), ``boundaries`` and ``pool-history``."""

    positive = at_least(1)  # the counts: a zero or negative one fails deep inside, or is taken silently
    parser = subparsers.add_parser("saliency", help="saliency maps of NCTL's MAP and pseudo-task networks")
    kinds = parser.add_subparsers(dest="saliency_command", required=True, metavar="{transition,pseudo-tasks}")

    transition = kinds.add_parser("transition", help="maps while training on a sequence of digit-pair tasks")
    transition.add_argument("--tasks", nargs="+", default=["1v3", "5v9", "1v8"])
    transition.add_argument("--steps-per-task", type=positive, default=600)
    transition.add_argument("--every", type=positive, default=75, help="steps between maps")
    transition.add_argument("--examples", type=positive, default=100, help="test images averaged per map")
    _network_arguments(transition, (20, 10, 1), eviction="spacing")  # FIFO has evicted task 1 by task 3
    transition.set_defaults(func=cmd_transition)

    pseudo = kinds.add_parser("pseudo-tasks", help="maps of random per-neuron pool ensembles after a few tasks")
    pseudo.add_argument("--tasks", nargs="+", default=["4v5", "3v9", "0v5"])
    pseudo.add_argument("--steps-per-task", type=positive, default=200, help="about a Free Split segment")
    pseudo.add_argument("--samples", type=positive, default=12, help="pseudo-task networks drawn")
    pseudo.add_argument("--columns", type=positive, default=4)
    pseudo.add_argument("--examples", type=positive, default=100, help="test images averaged per map")
    pseudo.add_argument("--eval-examples", type=positive, default=2000, help="test images scoring every digit pair")
    _network_arguments(pseudo, (5, 1))
    pseudo.set_defaults(func=cmd_pseudo_tasks)

    detect = subparsers.add_parser("boundaries", help="task changes detected from the segment posterior (Free Split)")
    detect.add_argument("--sequences", type=positive, default=5)
    detect.add_argument("--steps", type=positive, default=3000, help="steps per sequence")
    detect.add_argument("--window", type=positive, default=100, help="w of the change probability c_t(w)")
    detect.add_argument("--threshold", type=float, default=0.5)
    detect.add_argument("--tolerance", type=int, default=100, help="a hit lies at most this many steps after a boundary")
    detect.add_argument("--layer", type=int, default=1, help="layer whose posterior detects (1: first; last: output)")
    detect.add_argument("--plot-sequences", type=positive, default=3)
    _network_arguments(detect, (8, 4, 1), learning_rate=0.01)
    detect.set_defaults(func=cmd_boundaries)

    history = subparsers.add_parser("pool-history", help="where pool entries came from over a Split MNIST run")
    history.add_argument("--examples-per-task", type=positive, default=600)
    _network_arguments(history, (20, 10, 1))
    history.set_defaults(func=cmd_pool_history)
