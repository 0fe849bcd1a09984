"""One seed of one experiment: build the stream and the learners, run the protocol, return numbers.

Every runner returns plain JSON-able data: scalars (accuracies as fractions, log-losses in nats),
matrices and curves, and the wall time and throughput of each learner.
"""

from __future__ import annotations

import inspect
import time
from functools import partial
from pathlib import Path
from typing import Any, Callable

import numpy as np

import nctl
from nctl import evaluate, streams
from nctl.memory import available_memory, peak_resident_bytes, rlimit_rooms
from nctl.baselines import (
    MLPLearner,
    NoChangeLearner,
    evaluate_task_matrix_with_boundaries,
    ewc_learner,
    online_ewc_learner,
    oracle_fresh_at_boundaries,
    oracle_per_task,
    run_river,
)
from nctl.baselines.river_models import make_river_regressor
from nctl.core import tree
from nctl.core.pool import EVENTS as POOL_EVENTS
from nctl.evaluate import LOG_LOSS_EPS
from nctl.experiments import configs
from nctl.experiments.checkpoint import FileCheckpoint
from nctl.experiments.configs import Experiment
from nctl.learners import SPLIT_GRID
from nctl.pool import default_pool, with_pool
from nctl.streams.base import TaskStream
from nctl.streams.regression import RegressionStream

StepProgress = Callable[[str, int, int], None]  # (what is training, steps trained, steps in all)
EARLIER_SECONDS = "earlier_s"  # a resumed task-matrix seed's time before the resume, added to its wall time

# ----------------------------------------------------------------------------- streams and learners


def make_stream(exp: Experiment, seed: int, data_dir, **extra):
    """The experiment's stream for ``seed`` (constructors that take no data folder or seed are fine)."""
    constructor = getattr(streams, exp.stream)
    accepted = inspect.signature(constructor).parameters
    kwargs = {**exp.stream_args, **extra}
    if "data_dir" in accepted:
        kwargs["data_dir"] = data_dir
    if "seed" in accepted:
        kwargs["seed"] = seed
    return constructor(**kwargs)


def truncate_segments(stream: TaskStream, steps_per_segment: int | None) -> TaskStream:
    """The first ``steps_per_segment`` steps of every segment (tiny runs); None keeps everything."""
    if steps_per_segment is None:
        return stream
    keep = np.concatenate([np.arange(a, min(b, a + steps_per_segment)) for _, a, b in stream.segments()])
    return TaskStream(stream.name, stream.tasks, stream.task_of_step[keep], stream.row_of_step[keep],
                      stream.n_features, stream.n_classes)


def truncate(stream: TaskStream, max_steps: int | None) -> TaskStream:
    if max_steps is None or max_steps >= len(stream):
        return stream
    return TaskStream(stream.name, stream.tasks, stream.task_of_step[:max_steps], stream.row_of_step[:max_steps],
                      stream.n_features, stream.n_classes)


LEARNERS = ("nctl", "nctl-grid", "gln", "oracle-1", "oracle-2", "mlp", "ewc", "online-ewc", "no-change")  # and "river:MODEL"


def learner_factory(name: str, exp: Experiment, stream: TaskStream, seed: int) -> Callable[[], Any]:
    """A function making a fresh learner ``name`` for ``stream`` (a factory, for the oracles)."""
    n_classes, n_features = stream.n_classes, stream.n_features
    network = dict(exp.network)
    if name in ("nctl", "nctl-grid"):  # nctl-grid: the split probability mixed over SPLIT_GRID (algorithm.md §3.6)
        depth = max(1, tree.depth_for(len(stream)))  # the tree covers the stream (§3.4)
        params = {"depth": depth, **with_pool(exp.nctl, default_pool(nctl.NCTL))}
        if name == "nctl-grid":
            params["split_prob"] = SPLIT_GRID
        return lambda: nctl.NCTL(**network, **params, n_classes=n_classes, seed=seed)
    if name in ("gln", "oracle-1", "oracle-2"):
        return lambda: nctl.GLN(**network, n_classes=n_classes, seed=seed)
    if name == "mlp":
        return lambda: MLPLearner(n_features, n_classes=n_classes, seed=seed, **exp.mlp)
    if name == "ewc":
        return lambda: ewc_learner(n_features, n_classes=n_classes, seed=seed)
    if name == "online-ewc":
        return lambda: online_ewc_learner(n_features, n_classes=n_classes, seed=seed)
    if name == "no-change":
        return lambda: NoChangeLearner(n_classes=n_classes)
    raise ValueError(f"unknown learner {name!r}")


def learner_params(name: str, exp: Experiment, stream: TaskStream, seed: int) -> dict:
    """The fully resolved hyper-parameters of a learner, for the results file."""
    if name.startswith("river:"):
        return {"model": name.split(":", 1)[1], "seed": seed}
    learner = learner_factory(name, exp, stream, seed)()
    params = getattr(learner, "params", None)
    return recorded(params()) if callable(params) else {}


def recorded(params: dict) -> dict:
    """A learner's parameters as a results file keeps them: tuples as lists, the pool's settings as the
    experiments' flat ``nctl`` keys (``pool_size``, ``eviction``, ...)."""
    out = {}
    for name, value in params.items():
        if isinstance(value, nctl.Pool):
            out.update(value.as_keywords())
        else:
            out[name] = list(value) if isinstance(value, tuple) else value
    return out


def prequential_run(name: str, exp: Experiment, stream: TaskStream, seed: int, progress=None):
    """Test-then-train ``name`` over ``stream`` -> (the run, the learner at its end; None for river
    models and the oracles, which are many learners). ``progress(trained, total)`` follows the steps
    of a learner's run (not of the river models' and oracles')."""
    if name.startswith("river:"):
        return run_river(name.split(":", 1)[1], stream, seed=seed), None
    factory = learner_factory(name, exp, stream, seed)
    if name == "oracle-1":
        return oracle_fresh_at_boundaries(factory, stream), None
    if name == "oracle-2":
        return oracle_per_task(factory, stream), None
    learner = factory()
    return evaluate.prequential(learner, stream, on_progress=progress), learner


def _timed(fn, *args, **kwargs):
    start = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - start


def _sampled(curve: np.ndarray, points: int) -> tuple[list, list]:
    """A long per-step curve stored at ``points`` evenly spaced steps: (steps, values)."""
    steps = np.unique(np.linspace(0, len(curve) - 1, min(points, len(curve))).astype(int))
    return steps.tolist(), np.asarray(curve)[steps].tolist()


def _binned(values: np.ndarray, points: int) -> tuple[list, list]:
    """Means of ``values`` over ``points`` equal bins of steps: (first step of each bin, mean)."""
    edges = np.linspace(0, len(values), min(points, len(values)) + 1).astype(int)
    return edges[:-1].tolist(), [float(values[a:b].mean()) for a, b in zip(edges[:-1], edges[1:])]


# ----------------------------------------------------------------------------- runners


def check_memory(name: str, learner, n_features: int, adapt: bool) -> None:
    """Refuse, before any training, a learner whose state (and with ``adapt`` what its adapt50 forks
    hold beside it) does not fit in free memory, rather than be killed hours into a run. Under a limit
    on address space (``ulimit -v``, ``ulimit -d``) a fork's pool copy counts in full (a copy in a
    temporary file is mapped), and so does what a learning step holds beside the state
    (``working_bytes``), which address space counts whether or not its pages are touched."""
    available = available_memory()
    if available is None or not hasattr(learner, "state_bytes"):
        return
    state = learner.state_bytes(n_features)
    forks = learner.fork_bytes(n_features) if adapt else 0
    working = 0
    if rlimit_rooms():
        forks = state if adapt else 0
        working = getattr(learner, "working_bytes", lambda n: 0)(n_features)
    if state + forks + working > available:
        held = f" and {forks / 1e9:.1f} GB for its adapt50 forks" if adapt else ""
        held += f" and {working / 1e9:.1f} GB while it learns" if working else ""
        raise MemoryError(
            f"{name} needs {state / 1e9:.1f} GB (the learner){held} but {available / 1e9:.1f} GB is free; "
            "lower network.context_bits or nctl.pool_size, drop the adapt50 variant, or use a machine with "
            "more memory")


def run_task_matrix(exp: Experiment, seed: int, data_dir, checkpoints: Path | None = None,
                    progress: StepProgress | None = None) -> dict:
    """Train through the task stream; fill the accuracy matrix R per variant (docs/protocols.md §1, §2).

    With ``checkpoints`` (a folder), each learner that can be saved (GLN, NCTL) is saved at every task
    end in its own subfolder and an interrupted run resumes there (its wall time then counts every
    process's share). ``progress(label, trained, total)`` follows each learner's training steps.
    """
    stream = truncate_segments(make_stream(exp, seed, data_dir), exp.steps_per_task)
    out = {"steps": len(stream), "tasks": [t.name for t in stream.tasks], "learners": {}}
    earlier_seconds = 0.0  # training time of the processes that ran before a resume
    for name in exp.learners:  # every learner checked before the first trains: refused up front
        check_memory(name, learner_factory(name, exp, stream, seed)(), stream.n_features,
                     adapt=evaluate.ADAPT50 in exp.variants)
    for name in exp.learners:
        learner = learner_factory(name, exp, stream, seed)()
        if hasattr(learner, "reserve"):  # a growing state sized once for the stream and the adapt50 forks' rows
            # beyond its end: never copied to grow, and a fork at the last step is a journal, not a copy
            adapt_rows = evaluate.ADAPT_STEPS if evaluate.ADAPT50 in exp.variants else 0
            learner.reserve(len(stream) + adapt_rows)
        protocol = dict(eval_every=exp.eval_every, max_test=exp.max_test, seed=seed)
        if name in ("ewc", "online-ewc"):  # told the boundaries; nothing to adapt
            result, seconds = _timed(evaluate_task_matrix_with_boundaries, learner, stream, variants=("frozen",),
                                     **protocol)
        else:
            resumable = checkpoints is not None and hasattr(learner, "save")
            checkpoint = FileCheckpoint(checkpoints / name) if resumable else None
            report = None if progress is None else partial(progress, f"seed {seed} {name}")
            result, seconds = _timed(evaluate.evaluate_task_matrix, learner, stream, variants=exp.variants,
                                     checkpoint=checkpoint, on_progress=report, **protocol)
            if checkpoint is not None:  # a resumed run went on with the learner it restored
                seconds, learner = checkpoint.seconds, checkpoint.learner
                earlier_seconds += checkpoint.earlier_seconds
        variants = {}
        for variant in result.variants:
            R = result.matrix[variant]
            variants[variant] = {
                "acc": evaluate.average_accuracy(R),
                "bwt": evaluate.backward_transfer(R),
                "fwt": evaluate.forward_transfer(R, result.initial(variant)),
                "forgetting": evaluate.forgetting(R),
                "aia": evaluate.average_incremental_accuracy(R),
                "matrix": R.tolist(),
                "curve": result.curve[variant].tolist(),
            }
        out["learners"][name] = {"variants": variants, "curve_steps": result.steps.tolist(), "seconds": seconds,
                                 "params": learner_params(name, exp, stream, seed)}
        out["learners"][name].update(learner_facts(learner))
    if earlier_seconds:
        out[EARLIER_SECONDS] = earlier_seconds
    return out


def learner_facts(learner) -> dict:
    """What a results file keeps of an nctl learner that has learned: the engine that ran it
    (``nctl.engines``: ``native`` or ``jax``) and, for NCTL, its pool events; nothing for other models."""
    if getattr(learner, "engine_", None) is None:
        return {}
    facts = {"engine": learner.engine_}
    if getattr(learner, "pool_events", None) is not None:
        facts["pool_events"] = pool_event_means(learner)
    return facts


def pool_event_means(learner) -> dict:
    """Per layer (``layer1`` first): the pool events (docs/algorithm.md §4.5, §4.7) of one neuron over
    the whole stream, averaged over the layer's neurons and the class networks."""
    per_net = learner.pool_events()
    return {f"layer{i + 1}": dict(zip(POOL_EVENTS, np.mean([net[i] for net in per_net], axis=(0, 1)).tolist()))
            for i in range(len(per_net[0]))}


def _log_losses(run: evaluate.PrequentialRun) -> np.ndarray:
    return evaluate.log_loss_steps(run.probabilities, run.labels)


def run_prequential(exp: Experiment, seed: int, data_dir, progress: StepProgress | None = None) -> dict:
    """Test-then-train over the stream: accuracy, log-loss, kappa-temporal and their curves;
    ``progress(label, trained, total)`` follows each learner's steps."""
    stream = truncate(make_stream(exp, seed, data_dir), exp.max_steps)
    first_seen = {}
    for task, start, _ in stream.segments():
        first_seen.setdefault(task, start)
    seen_before = np.array([first_seen[task] < start for task, start, stop in stream.segments()
                            for _ in range(stop - start)]) if len(stream) else np.zeros(0, bool)
    out = {"steps": len(stream), "log_loss_eps": LOG_LOSS_EPS, "learners": {}}
    for name in exp.learners:
        report = None if progress is None else partial(progress, f"seed {seed} {name}")
        (run, learner), seconds = _timed(prequential_run, name, exp, stream, seed, report)
        scores = run.scores(window=min(evaluate.DEFAULT_WINDOW, max(1, len(stream) // 10)))
        losses = _log_losses(run)
        steps, windowed = _sampled(scores.accuracy_windowed, exp.curve_points)
        out["learners"][name] = {
            "accuracy": scores.accuracy,
            "log_loss": scores.log_loss,
            "kappa_temporal": scores.kappa_temporal,
            "recurring_log_loss": float(losses[seen_before].mean()) if seen_before.any() else None,
            "recurring_accuracy": float(evaluate.correct_steps(run.probabilities, run.labels)[seen_before].mean())
            if seen_before.any() else None,
            "curve_steps": steps,
            "windowed_accuracy": windowed,
            "cumulative_accuracy": _sampled(scores.accuracy_cumulative, exp.curve_points)[1],
            "windowed_kappa_temporal": _sampled(scores.kappa_temporal_windowed, exp.curve_points)[1],
            "window": scores.window,
            "seconds": seconds,
            "examples_per_s": len(stream) / seconds,
            "params": learner_params(name, exp, stream, seed),
            **learner_facts(learner),
        }
    return out


def _transfer_curves(exp: Experiment, seed: int, data_dir, build) -> dict:
    """Per condition: the log-loss curve of the target task's first ``window`` steps (and of task A's
    first steps for the backward construction)."""
    out = {"window": exp.window, "conditions": {}}
    for condition in exp.conditions:
        construction = build(condition)
        stream = construction.stream
        start = getattr(construction, "return_start", None)
        start = getattr(construction, "target_start", start)
        entry = {"steps": len(stream), "target": construction.target, "learners": {}}
        for name in exp.learners:
            (run, learner), seconds = _timed(prequential_run, name, exp, stream, seed)
            losses = _log_losses(run)
            entry["learners"][name] = {
                "target_log_loss": losses[start: start + exp.window].tolist(),
                "first_log_loss": losses[: exp.window].tolist(),
                "seconds": seconds,
                **learner_facts(learner),
            }
        out["conditions"][str(condition)] = entry
    return out


def run_backward(exp: Experiment, seed: int, data_dir) -> dict:
    """Task A, N distractor tasks, A again: how fast is A's solution recovered? (docs/protocols.md §3)"""
    return _transfer_curves(exp, seed, data_dir,
                            lambda n: make_stream(exp, seed, data_dir, n_distractors=n))


def run_forward(exp: Experiment, seed: int, data_dir) -> dict:
    """N source tasks, then a held-out target: does learning it get faster with N? (docs/protocols.md §3)"""
    return _transfer_curves(exp, seed, data_dir, lambda n: make_stream(exp, seed, data_dir, n_sources=n))


def run_oracles(exp: Experiment, seed: int, data_dir) -> dict:
    """NCTL against GLN oracles that are told the boundaries (1) or boundaries and identities (2)."""
    stream = make_stream(exp, seed, data_dir)
    out = {"steps": len(stream), "segments": len(stream.segments()), "learners": {}}
    for name in exp.learners:
        (run, learner), seconds = _timed(prequential_run, name, exp, stream, seed)
        losses = _log_losses(run)
        steps, binned = _binned(losses, exp.curve_points)
        out["learners"][name] = {"log_loss": float(losses.mean()), "accuracy": float(
            evaluate.correct_steps(run.probabilities, run.labels).mean()), "curve_steps": steps,
            "binned_log_loss": binned, "seconds": seconds, **learner_facts(learner)}
    return out


def run_substrate(exp: Experiment, seed: int, data_dir) -> dict:
    """A learner alone on a multiclass stream, one pass, then its test accuracy."""
    stream = truncate(make_stream(exp, seed, data_dir), exp.max_steps)
    out = {"steps": len(stream), "learners": {}}
    for name in exp.learners:
        learner = learner_factory(name, exp, stream, seed)()
        _, seconds = _timed(lambda: [learner.learn_many(X, y) for X, y, _ in stream.chunks()])
        X, y = stream.tasks[0].test_set()
        out["learners"][name] = {"test_accuracy": evaluate.accuracy(learner.predict_proba_many(X), y),
                                 "seconds": seconds, "examples_per_s": len(stream) / seconds,
                                 "params": learner_params(name, exp, stream, seed), **learner_facts(learner)}
    return out


# ----------------------------------------------------------------------------- regression

REGRESSION_PROGRESS_EVERY = 250  # rows between two updates of a regression run's step bar


def regression_model(name: str, exp: Experiment, seed: int) -> tuple[Any, bool]:
    """(a fresh river model ``name`` behind river's ``StandardScaler``, whether it gives a predictive
    distribution): nctl's learners through their river adapters, with the experiment's settings over
    their defaults; river's regressors with theirs."""
    from river import preprocessing

    import nctl.river

    if name.startswith("river:"):
        return preprocessing.StandardScaler() | make_river_regressor(name.split(":", 1)[1], seed), False
    if name == "nctl":
        regressor = nctl.river.NCTLRegressor(**exp.network, **with_pool(exp.nctl, default_pool(nctl.NCTLRegressor)),
                                             seed=seed)
        return preprocessing.StandardScaler() | regressor, True
    if name == "gln":
        return preprocessing.StandardScaler() | nctl.river.GLNRegressor(**exp.network, seed=seed), True
    raise ValueError(f"unknown regression learner {name!r}")


def progressive_regression(model, stream: RegressionStream, with_dist: bool,
                           progress: Callable | None = None) -> tuple[np.ndarray, np.ndarray | None]:
    """Progressive validation, as river's ``progressive_val_score``: each row predicted, then learned.
    Returns the predicted means [T] and, ``with_dist``, the predictive standard deviations [T] (of
    ``predict_one(x, with_dist=True)``); ``progress(rows, total)`` follows the rows."""
    means = np.empty(len(stream))
    sigmas = np.empty(len(stream)) if with_dist else None
    for t, (x, y) in enumerate(stream):
        if with_dist:
            dist = model.predict_one(x, with_dist=True)
            means[t], sigmas[t] = dist.mu, dist.sigma
        else:
            means[t] = model.predict_one(x)
        model.learn_one(x, y)
        if progress is not None and ((t + 1) % REGRESSION_PROGRESS_EVERY == 0 or t + 1 == len(stream)):
            progress(t + 1, len(stream))
    return means, sigmas


def gaussian_log_likelihood(y: np.ndarray, means: np.ndarray, sigmas: np.ndarray) -> np.ndarray:
    """log N(y; mean, sigma^2) of each row, in nats, in the target's units."""
    z = (y - means) / sigmas
    return -0.5 * z * z - np.log(sigmas) - 0.5 * np.log(2.0 * np.pi)


def run_regression(exp: Experiment, seed: int, data_dir, progress: StepProgress | None = None) -> dict:
    """Progressive validation of every learner on the experiment's regression stream: MAE, RMSE, the mean
    log-likelihood of the targets under the predictive Gaussian from the second row on (None for a model
    without one), the MAE
    on rows of a concept seen before and per segment of one concept, the binned MAE over the stream, and
    the wall time and rows per second of each learner (scaling, prediction and learning)."""
    stream = make_stream(exp, seed, data_dir).head(exp.max_steps)
    revisits, segments = stream.revisits(), stream.segments()
    out = {"steps": len(stream), "concept_segments": [list(segment) for segment in segments], "learners": {}}
    for name in exp.learners:
        model, with_dist = regression_model(name, exp, seed)
        report = None if progress is None else partial(progress, f"seed {seed} {name}")
        (means, sigmas), seconds = _timed(progressive_regression, model, stream, with_dist, report)
        errors = np.abs(stream.targets - means)
        steps, binned = _binned(errors, exp.curve_points)
        entry = {
            "mae": float(errors.mean()),
            "rmse": float(np.sqrt(np.mean(errors**2))),
            # from the second row: the first is predicted before any target is known, by an arbitrary prior
            "log_likelihood": None if sigmas is None else float(
                gaussian_log_likelihood(stream.targets, means, sigmas)[1:].mean()),
            "recurring_mae": float(errors[revisits].mean()) if revisits.any() else None,
            "segment_mae": [float(errors[start:stop].mean()) for _, start, stop in segments],
            "curve_steps": steps,
            "binned_mae": binned,
            "seconds": seconds,
            "examples_per_s": len(stream) / seconds,
            "params": {"model": name.split(":", 1)[1], "seed": seed} if name.startswith("river:")
            else recorded(model[-1].learner.params()),
        }
        nctl_learner = None if name.startswith("river:") else model[-1].learner
        out["learners"][name] = {**entry, **({} if nctl_learner is None else learner_facts(nctl_learner))}
    return out


RUNNERS = {
    configs.TASK_MATRIX: run_task_matrix,
    configs.PREQUENTIAL: run_prequential,
    configs.BACKWARD: run_backward,
    configs.FORWARD: run_forward,
    configs.ORACLES: run_oracles,
    configs.SUBSTRATE: run_substrate,
    configs.REGRESSION: run_regression,
}


def run_seed(exp: Experiment, seed: int, data_dir=None, checkpoints: Path | None = None,
             progress: StepProgress | None = None) -> dict:
    """Run one seed of ``exp``; the result carries its seed, wall time (a resumed seed's counts the
    training time of the processes before too) and the process's peak resident memory (the seed's own
    when the seed has its process, as with ``--workers`` > 1; else an upper bound; of a resumed seed,
    the last process's). ``checkpoints`` (a folder making seeds resumable) and ``progress`` (a step
    counter) apply to task-matrix experiments (``run_task_matrix``), ``progress`` also to prequential and
    regression ones."""
    extra = ({"checkpoints": checkpoints, "progress": progress} if exp.kind == configs.TASK_MATRIX
             else {"progress": progress} if exp.kind in (configs.PREQUENTIAL, configs.REGRESSION) else {})
    result, seconds = _timed(RUNNERS[exp.kind], exp, seed, data_dir, **extra)
    seconds += result.pop(EARLIER_SECONDS, 0.0)
    return {"seed": seed, "wall_s": seconds, "peak_rss_bytes": peak_resident_bytes(), **result}
