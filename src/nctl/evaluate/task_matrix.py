"""The task-matrix protocol: train through a stream, test every task at chosen points.

After each task segment (and, with ``eval_every``, every ``eval_every`` training examples) every
task's test set is scored in one or both named variants:

- ``frozen``: predict the test set with the learner as it is.
- ``adapt50``: on ``learner.fork`` (or a copy), learn 50 random training examples of the evaluated task (in
  random order), then predict its test set frozen; the fork is dropped (paper section 5.2).

Neither variant changes the learner being trained. Accuracy uses :func:`nctl.evaluate.accuracy`
(argmax for multiclass, ``p > 0.5`` for binary).

A run given a :class:`Checkpoint` saves the learner and the evaluations so far at every segment
end and, when the checkpoint holds a save, resumes from it: every evaluation is a deterministic
function of the seed and the learner's state, so a resumed run gives the uninterrupted run's result.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from nctl.evaluate.prequential import DEFAULT_CHUNK_SIZE, Learner
from nctl.evaluate.scores import accuracy
from nctl.streams.base import Task, TaskStream

FROZEN = "frozen"
ADAPT50 = "adapt50"
VARIANTS = (FROZEN, ADAPT50)
ADAPT_STEPS = 50  # examples the adapt50 snapshot learns before it is tested (paper section 5.2)

# Seed-sequence tags keeping the test-subset and the adaptation draws independent.
_TEST_SUBSET_STREAM = 0
_ADAPT_STREAM = 1

SegmentHook = Callable[[Learner, TaskStream, tuple[int, int, int]], None]
ProgressHook = Callable[[int, int], None]  # (steps trained so far, steps in the stream)


class Checkpoint(Protocol):
    """Where a task-matrix run keeps its progress (``nctl.experiments.checkpoint`` keeps it in files)."""

    def load(self) -> tuple[Learner, int, dict[str, np.ndarray]] | None:
        """The saved learner, the number of evaluations done and the curve rows so far; None if empty."""

    def save(self, learner: Learner, evaluations: int, curve: dict[str, np.ndarray]) -> None:
        """Keep the learner after ``evaluations`` evaluations, with ``curve`` (its first rows filled)."""


@dataclass(frozen=True, eq=False)
class TaskMatrixResult:
    """Accuracies of every task's test set at every evaluation point, per variant.

    ``matrix[v][i, j]`` is the accuracy on task ``j`` after training segment ``i`` (for Split and
    Permuted MNIST segment ``i`` is task ``i``, so ``matrix[v]`` is the square matrix R).
    ``curve[v]`` holds every evaluation, at the training steps in ``steps``: step 0 (before any
    training, the baseline ``b`` of FWT), each multiple of ``eval_every`` and each segment end.
    """

    variants: tuple[str, ...]
    matrix: dict[str, np.ndarray] = field(repr=False)  # variant -> [n_segments, n_tasks]
    curve: dict[str, np.ndarray] = field(repr=False)  # variant -> [n_evaluations, n_tasks]
    steps: np.ndarray = field(repr=False)  # [n_evaluations] training examples seen
    segment_tasks: np.ndarray = field(repr=False)  # [n_segments] task trained in each segment
    n_test: np.ndarray = field(repr=False)  # [n_tasks] test examples scored per task
    eval_every: int | None
    max_test: int | None
    seed: int

    def initial(self, variant: str) -> np.ndarray:
        """``[n_tasks]`` accuracies before any training: the baseline vector ``b`` of FWT."""
        return self.curve[variant][0]


def _test_sets(
    tasks: tuple[Task, ...], max_test: int | None, seed: int
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Each task's test set, or a fixed random subset of ``max_test`` of its examples."""
    test_sets = []
    for index, task in enumerate(tasks):
        X, y = task.test_set()
        if max_test is not None and y.shape[0] > max_test:
            rng = np.random.default_rng([seed, _TEST_SUBSET_STREAM, index])
            keep = np.sort(rng.choice(y.shape[0], size=max_test, replace=False))
            X, y = X[keep], y[keep]
        test_sets.append((X, y))
    return test_sets


@contextmanager
def adapted(learner: Learner, task: Task, rng: np.random.Generator):
    """``learner`` as if it had also learned ``ADAPT_STEPS`` random training examples of ``task`` (drawn
    with ``Task.sample_train``, learned in a random order), for the ``with`` block: the learner's own
    ``fork`` where it has one (NCTL forks without copying its arenas), else a copy that learns them."""
    X, y = task.sample_train(ADAPT_STEPS, rng)
    order = rng.permutation(y.shape[0])
    fork = getattr(learner, "fork", None)
    if fork is None:
        snapshot = learner.copy()
        snapshot.learn_many(X[order], y[order])
        yield snapshot
    else:
        with fork(X[order], y[order]) as snapshot:
            yield snapshot


def _adapted_accuracy(learner: Learner, task: Task, rng: np.random.Generator, X: np.ndarray, y: np.ndarray) -> float:
    """The accuracy on ``X, y`` of ``learner`` ``adapted`` to ``task``; a fork that is a copy is dropped on
    return, before the next one is made (a name bound by ``with`` would keep it alive beside the next)."""
    with adapted(learner, task, rng) as model:
        return accuracy(model.predict_proba_many(X), y)


def _evaluate_all(
    learner: Learner,
    tasks: tuple[Task, ...],
    test_sets: list[tuple[np.ndarray, np.ndarray]],
    variant: str,
    seed: int,
    evaluation: int,
) -> np.ndarray:
    accuracies = np.empty(len(tasks))
    for index, (task, (X, y)) in enumerate(zip(tasks, test_sets)):
        if variant == ADAPT50:
            rng = np.random.default_rng([seed, _ADAPT_STREAM, evaluation, index])
            accuracies[index] = _adapted_accuracy(learner, task, rng, X, y)
        else:
            accuracies[index] = accuracy(learner.predict_proba_many(X), y)
    return accuracies


def evaluation_steps(stream: TaskStream, eval_every: int | None) -> np.ndarray:
    """Sorted distinct evaluation steps: 0, every segment end, the multiples of ``eval_every``."""
    points = {0, *(stop for _, _, stop in stream.segments())}
    if eval_every is not None:
        if eval_every < 1:
            raise ValueError(f"eval_every must be a positive number of examples, got {eval_every}")
        points.update(range(0, len(stream) + 1, eval_every))
    return np.array(sorted(points), dtype=np.int64)


def evaluate_task_matrix(
    learner: Learner,
    stream: TaskStream,
    *,
    variants: tuple[str, ...] = VARIANTS,
    eval_every: int | None = None,
    max_test: int | None = None,
    seed: int = 0,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    on_segment_end: SegmentHook | None = None,
    checkpoint: Checkpoint | None = None,
    on_progress: ProgressHook | None = None,
) -> TaskMatrixResult:
    """Train ``learner`` through ``stream`` (``learn_many`` in stream order) and fill R per variant.

    ``R[i, j]`` = accuracy on task j's test set after training segment i. ``max_test`` caps each
    task's test set at a fixed seeded random subset (reported in the result). ``on_segment_end`` is
    called as ``hook(learner, stream, (task, start, stop))`` after a segment's last training example
    and before the evaluation there; it is how boundary-aware baselines (EWC) are told boundaries.
    With a ``checkpoint`` holding a save, ``learner`` is replaced by the saved one and the run goes
    on from there; the learner is saved again at every segment end. ``on_progress(trained,
    len(stream))`` is called at the start (``trained`` > 0 on a resume) and after every training chunk.
    """
    unknown = set(variants) - set(VARIANTS)
    if unknown or not variants:
        raise ValueError(f"variants must be a non-empty subset of {VARIANTS}, got {variants}")
    if max_test is not None and max_test < 1:
        raise ValueError(f"max_test must be a positive number of examples, got {max_test}")
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be positive, got {chunk_size}")
    if len(stream) == 0:
        raise ValueError("the stream has no training steps")
    untrainable = [task.name for task in stream.tasks if task.n_train == 0]
    if ADAPT50 in variants and untrainable:
        raise ValueError(f"adapt50 learns {ADAPT_STEPS} training examples of each task, but {untrainable} have none")
    segments = stream.segments()
    segment_at_stop = {segment[2]: segment for segment in segments}
    test_sets = _test_sets(stream.tasks, max_test, seed)
    steps = evaluation_steps(stream, eval_every)

    curve = {variant: np.empty((steps.shape[0], len(stream.tasks))) for variant in variants}
    done = 0
    saved = checkpoint.load() if checkpoint is not None else None
    if saved is not None:
        learner, done, saved_curve = saved
        for variant in variants:
            curve[variant][:done] = saved_curve[variant][:done]
    trained = int(steps[done - 1]) if done else 0
    report = on_progress if on_progress is not None else (lambda trained, total: None)
    report(trained, len(stream))
    for evaluation, stop in enumerate(steps.tolist()[done:], start=done):
        for X, y, _ in stream.chunks(chunk_size, trained, stop):
            learner.learn_many(X, y)
            trained += y.shape[0]
            report(trained, len(stream))
        if on_segment_end is not None and stop in segment_at_stop:
            on_segment_end(learner, stream, segment_at_stop[stop])
        for variant in variants:
            curve[variant][evaluation] = _evaluate_all(
                learner, stream.tasks, test_sets, variant, seed, evaluation
            )
        if checkpoint is not None and stop in segment_at_stop:
            checkpoint.save(learner, evaluation + 1, curve)

    segment_rows = np.searchsorted(steps, [stop for _, _, stop in segments])
    return TaskMatrixResult(
        variants=tuple(variants),
        matrix={variant: curve[variant][segment_rows] for variant in variants},
        curve=curve,
        steps=steps,
        segment_tasks=np.array([task for task, _, _ in segments], dtype=np.int64),
        n_test=np.array([y.shape[0] for _, y in test_sets], dtype=np.int64),
        eval_every=eval_every,
        max_test=max_test,
        seed=seed,
    )
