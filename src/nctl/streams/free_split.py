"""Free Split MNIST and its transfer constructions (NCTL section 5.1, docs/protocols.md §3).

45 tasks, one per digit pair a < b (a -> 0, b -> 1), indexed in ``FREE_SPLIT_PAIRS`` order. Every
segment lasts ``100 + X`` steps with ``X ~ Geometric(0.01)`` on {1, 2, ...} (mean 200), and each
step is an example drawn uniformly, with replacement, from the training images of the two digits.
"""

from __future__ import annotations

import itertools
import os
from typing import NamedTuple

import numpy as np

from nctl.streams.images import N_PIXELS, load_image_data, pair_task
from nctl.streams.base import Task, TaskStream

FREE_SPLIT_PAIRS = tuple(itertools.combinations(range(10), 2))  # 45 pairs (a, b), a < b
MIN_SEGMENT_STEPS = 100  # the fixed part of a segment's duration
SWITCH_PROBABILITY = 0.01  # parameter of the geometric part: mean 1 / 0.01 = 100 extra steps
DEFAULT_FREE_SPLIT_STEPS = 10_000  # about 50 segments


class BackwardTransferStream(NamedTuple):
    """Task ``target`` (A), then distractor tasks, then A again from step ``return_start``."""

    stream: TaskStream
    target: int
    return_start: int


class ForwardTransferStream(NamedTuple):
    """Source tasks, then the held-out task ``target`` (not among them) from step ``target_start``."""

    stream: TaskStream
    target: int
    target_start: int


def segment_durations(rng: np.random.Generator, n_segments: int) -> np.ndarray:
    """Durations [n_segments] int64, each ``100 + X`` with ``X ~ Geometric(0.01)`` on {1, 2, ...}."""
    return MIN_SEGMENT_STEPS + rng.geometric(SWITCH_PROBABILITY, size=n_segments).astype(np.int64)


def free_split_schedule(rng: np.random.Generator, n_steps: int) -> tuple[np.ndarray, np.ndarray]:
    """Segment tasks [k] and durations [k] covering exactly ``n_steps`` steps.

    Each task is drawn uniformly from the 45 (consecutive repeats allowed); the last segment is
    cut short so that the durations sum to ``n_steps``.

    >>> tasks, durations = free_split_schedule(np.random.default_rng(0), 1000)
    >>> int(durations.sum()), bool((durations[:-1] > 100).all()), bool(tasks.max() < 45)
    (1000, True, True)
    """
    if n_steps < 1:
        raise ValueError(f"n_steps must be at least 1, got {n_steps}")
    tasks, durations = [], []
    total = 0
    while total < n_steps:
        tasks.append(int(rng.integers(len(FREE_SPLIT_PAIRS))))
        durations.append(int(segment_durations(rng, 1)[0]))
        total += durations[-1]
    durations[-1] -= total - n_steps
    return np.array(tasks, np.int32), np.array(durations, np.int64)


def _free_split_tasks(data_dir: str | os.PathLike | None) -> tuple[Task, ...]:
    data = load_image_data("mnist", data_dir)
    return tuple(pair_task(data, low, high) for low, high in FREE_SPLIT_PAIRS)


def _stream_from_schedule(
    name: str,
    tasks: tuple[Task, ...],
    segment_tasks: np.ndarray,  # [k] int
    durations: np.ndarray,  # [k] int
    rng: np.random.Generator,
) -> TaskStream:
    """Steps of each segment: rows drawn uniformly with replacement from the segment task's training rows."""
    rows = [rng.integers(tasks[task].n_train, size=length) for task, length in zip(segment_tasks, durations)]
    task_of_step = np.repeat(segment_tasks.astype(np.int32), durations)
    return TaskStream(name, tasks, task_of_step, np.concatenate(rows).astype(np.int64), N_PIXELS)


def free_split_mnist(
    data_dir: str | os.PathLike | None = None, seed: int = 0, n_steps: int = DEFAULT_FREE_SPLIT_STEPS
) -> TaskStream:
    """A Free Split MNIST stream of ``n_steps`` steps over the 45 digit-pair tasks (module docstring)."""
    tasks = _free_split_tasks(data_dir)
    rng = np.random.default_rng(seed)
    segment_tasks, durations = free_split_schedule(rng, n_steps)
    return _stream_from_schedule("free-split-mnist", tasks, segment_tasks, durations, rng)


def free_split_backward(
    data_dir: str | os.PathLike | None = None, seed: int = 0, n_distractors: int = 5
) -> BackwardTransferStream:
    """Backward transfer (NCTL Figure 2): task A, ``n_distractors`` distractor tasks, then A again.

    A and the distractors are distinct tasks drawn uniformly without replacement, so the stream
    has exactly ``n_distractors + 2`` segments (one merged A segment when ``n_distractors = 0``, the
    no-distractor reference). Every segment, the return included, has the Free Split duration law.
    """
    if not 0 <= n_distractors < len(FREE_SPLIT_PAIRS):
        raise ValueError(f"n_distractors must be in 0..{len(FREE_SPLIT_PAIRS) - 1}, got {n_distractors}")
    tasks = _free_split_tasks(data_dir)
    rng = np.random.default_rng(seed)
    chosen = rng.choice(len(FREE_SPLIT_PAIRS), size=n_distractors + 1, replace=False)
    segment_tasks = np.append(chosen, chosen[0]).astype(np.int32)
    durations = segment_durations(rng, len(segment_tasks))
    name = f"free-split-backward-{n_distractors}"
    stream = _stream_from_schedule(name, tasks, segment_tasks, durations, rng)
    return BackwardTransferStream(stream, int(chosen[0]), int(durations[:-1].sum()))


def free_split_forward(
    data_dir: str | os.PathLike | None = None, seed: int = 0, n_sources: int = 4
) -> ForwardTransferStream:
    """Forward transfer (NCTL Figure 3): ``n_sources`` source tasks, then a held-out target task.

    The target and the sources are distinct tasks drawn uniformly without replacement (the
    sources in the order drawn); every segment has the Free Split duration law.
    """
    if not 0 <= n_sources < len(FREE_SPLIT_PAIRS):
        raise ValueError(f"n_sources must be in 0..{len(FREE_SPLIT_PAIRS) - 1}, got {n_sources}")
    tasks = _free_split_tasks(data_dir)
    rng = np.random.default_rng(seed)
    chosen = rng.choice(len(FREE_SPLIT_PAIRS), size=n_sources + 1, replace=False)
    target, sources = chosen[0], chosen[1:]
    segment_tasks = np.append(sources, target).astype(np.int32)
    durations = segment_durations(rng, len(segment_tasks))
    stream = _stream_from_schedule(f"free-split-forward-{n_sources}", tasks, segment_tasks, durations, rng)
    return ForwardTransferStream(stream, int(target), int(durations[:-1].sum()))
