"""Prequential (test-then-train) evaluation of an online learner over a task stream."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Protocol

import numpy as np

from nctl.evaluate.scores import DEFAULT_WINDOW, PrequentialScores, score_predictions
from nctl.streams.base import TaskStream

DEFAULT_CHUNK_SIZE = (
    4096  # examples handed to ``learn_many`` at once (same as ``TaskStream.chunks``)
)


class Learner(Protocol):
    """The online learner contract every evaluated model follows."""

    def learn_one(self, x: np.ndarray, y: int) -> None: ...

    def predict_proba_one(self, x: np.ndarray) -> float | np.ndarray: ...

    def learn_many(self, X: np.ndarray, y: np.ndarray) -> np.ndarray: ...

    def predict_proba_many(self, X: np.ndarray) -> np.ndarray: ...

    def copy(self) -> Learner: ...


@dataclass(frozen=True, eq=False)
class PrequentialRun:
    """What a learner predicted at each step of a stream, before it saw that step's label."""

    probabilities: np.ndarray  # [T] P(y=1) for binary, [T, K] for K > 2 classes
    labels: np.ndarray  # [T] int64
    tasks: (
        np.ndarray
    )  # [T] int32, the task of each step (for diagnostics, never shown to the learner)

    def scores(self, window: int = DEFAULT_WINDOW) -> PrequentialScores:
        """Accuracy, log-loss and kappa-temporal of this run (see :func:`score_predictions`)."""
        return score_predictions(self.probabilities, self.labels, window)


def check_predictions(predictions: np.ndarray, n: int, n_classes: int) -> np.ndarray:
    """Return ``predictions`` as float64 after checking the shape ``[n]`` (binary) or ``[n, K]``."""
    predictions = np.asarray(predictions, np.float64)
    expected = (n,) if n_classes == 2 else (n, n_classes)
    if predictions.shape != expected:
        raise ValueError(
            f"learner returned predictions of shape {predictions.shape}, expected {expected}"
        )
    return predictions


def collect_run(
    pieces: list[tuple[np.ndarray, np.ndarray, np.ndarray]], n_classes: int
) -> PrequentialRun:
    """Concatenate ``(probabilities, labels, tasks)`` pieces, in stream order, into one run."""
    if not pieces:
        raise ValueError("the stream has no steps to evaluate")
    probabilities, labels, tasks = (np.concatenate(part) for part in zip(*pieces))
    return PrequentialRun(
        check_predictions(probabilities, labels.shape[0], n_classes), labels, tasks
    )


def prequential(
    learner: Learner,
    stream: TaskStream,
    *,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    on_progress: Callable[[int, int], None] | None = None,
) -> PrequentialRun:
    """Test-then-train: for t = 0..T-1, record ``p_t = f_t(x_t)`` and then learn ``(x_t, y_t)``.

    The stream is fed in chunks to ``learner.learn_many``, which returns the pre-update predictions.
    The learner is modified in place. ``on_progress(steps done, steps in the stream)`` is called
    before the first chunk and after each.
    """
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be positive, got {chunk_size}")
    pieces, done = [], 0
    report = on_progress if on_progress is not None else (lambda done, total: None)
    report(0, len(stream))
    for X, y, tasks in stream.chunks(chunk_size):
        predictions = check_predictions(learner.learn_many(X, y), y.shape[0], stream.n_classes)
        pieces.append((predictions, y, tasks))
        done += y.shape[0]
        report(done, len(stream))
    return collect_run(pieces, stream.n_classes)
