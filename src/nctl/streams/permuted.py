"""Domain-incremental Permuted MNIST (docs/protocols.md §2)."""

from __future__ import annotations

import os

import numpy as np

from nctl.streams.images import N_PIXELS, ImageData, check_z_clip, load_image_data
from nctl.streams.base import Task, TaskStream

N_DIGITS = 10
DEFAULT_PERMUTED_TASKS = 10


def pixel_permutations(n_tasks: int, seed: int) -> np.ndarray:
    """Permutations [n_tasks, 784] int64: row 0 the identity, rows 1.. seeded random permutations."""
    if n_tasks < 1:
        raise ValueError(f"n_tasks must be at least 1, got {n_tasks}")
    rng = np.random.default_rng([seed, 0])  # [seed, 1] orders the examples: an independent stream
    rest = [rng.permutation(N_PIXELS) for _ in range(n_tasks - 1)]
    return np.stack([np.arange(N_PIXELS), *rest]).astype(np.int64)


def _permuted_task(data: ImageData, index: int, permutation: np.ndarray, z_clip: float | None) -> Task:
    """10-class task on every training image with pixels reordered: x_perm[:, j] = x[:, permutation[j]]."""

    def rows(idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        idx = np.asarray(idx)
        return data.standardise(data.train_x[idx], z_clip)[:, permutation], data.train_y[idx].astype(np.int64)

    def test_set() -> tuple[np.ndarray, np.ndarray]:
        return data.standardise(data.test_x, z_clip)[:, permutation], data.test_y.astype(np.int64)

    return Task(f"permutation {index}", len(data.train_x), rows, test_set)


def permuted_mnist(
    data_dir: str | os.PathLike | None = None,
    seed: int = 0,
    n_tasks: int = DEFAULT_PERMUTED_TASKS,
    examples_per_task: int | None = None,
    deskewed: bool = False,
    z_clip: float | None = None,
) -> TaskStream:
    """Permuted MNIST: task 0 unpermuted, tasks 1.. a seeded pixel permutation each; labels 0..9.

    Each task is one pass over the training split in a seeded order of its own. With
    ``examples_per_task`` the task uses only the first that many of its shuffled rows: a named
    reduced variant (stream name ``permuted-mnist-<n>-per-task``), never the full protocol.
    Permutations are applied inside ``train_rows``; no task's features are stored. ``deskewed`` and
    ``z_clip`` preprocess the images before the permutation, as in ``mnist_classes``.
    """
    check_z_clip(z_clip)
    data = load_image_data("mnist", data_dir, deskewed)
    n_train = len(data.train_x)
    per_task = n_train if examples_per_task is None else examples_per_task
    if not 1 <= per_task <= n_train:
        raise ValueError(f"examples_per_task must be in 1..{n_train}, got {examples_per_task}")
    permutations = pixel_permutations(n_tasks, seed)
    tasks = tuple(_permuted_task(data, k, permutation, z_clip) for k, permutation in enumerate(permutations))
    order_rng = np.random.default_rng([seed, 1])
    row_of_step = np.concatenate([order_rng.permutation(n_train)[:per_task] for _ in tasks]).astype(np.int64)
    task_of_step = np.repeat(np.arange(n_tasks, dtype=np.int32), per_task)
    name = "permuted-mnist"
    if n_tasks != DEFAULT_PERMUTED_TASKS:
        name += f"-{n_tasks}-tasks"
    if examples_per_task is not None:
        name += f"-{per_task}-per-task"
    if deskewed:
        name += "-deskewed"
    return TaskStream(name, tasks, task_of_step, row_of_step, N_PIXELS, n_classes=N_DIGITS)
