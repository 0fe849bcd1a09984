"""Domain-incremental Split MNIST / Split Fashion-MNIST (docs/protocols.md §1)."""

from __future__ import annotations

import os

import numpy as np

from nctl.streams.images import N_PIXELS, check_z_clip, load_image_data, pair_task
from nctl.streams.base import TaskStream

SPLIT_PAIRS = ((0, 1), (2, 3), (4, 5), (6, 7), (8, 9))


def _split_stream(
    dataset: str, data_dir: str | os.PathLike | None, seed: int, deskewed: bool, z_clip: float | None
) -> TaskStream:
    check_z_clip(z_clip)
    data = load_image_data(dataset, data_dir, deskewed)
    tasks = tuple(pair_task(data, low, high, z_clip) for low, high in SPLIT_PAIRS)
    rng = np.random.default_rng(seed)
    task_of_step = np.repeat(np.arange(len(tasks), dtype=np.int32), [task.n_train for task in tasks])
    row_of_step = np.concatenate([rng.permutation(task.n_train) for task in tasks]).astype(np.int64)
    return TaskStream(f"split-{dataset}", tasks, task_of_step, row_of_step, N_PIXELS)


def split_mnist(
    data_dir: str | os.PathLike | None = None, seed: int = 0, deskewed: bool = False, z_clip: float | None = None
) -> TaskStream:
    """Split MNIST: tasks 0/1, 2/3, 4/5, 6/7, 8/9 in order, smaller digit -> label 0.

    One pass over each task's full training split, shuffled within the task by ``seed``; per-task
    test sets are the test images of the two digits. Pixels standardised with training-split stats.
    ``deskewed`` and ``z_clip`` preprocess the images as in ``mnist_classes`` (a named variant of the
    protocol, never the paper's row).
    """
    return _split_stream("mnist", data_dir, seed, deskewed, z_clip)


def split_fashion_mnist(data_dir: str | os.PathLike | None = None, seed: int = 0) -> TaskStream:
    """Split Fashion-MNIST: the same protocol as ``split_mnist`` on Fashion-MNIST classes 0..9."""
    return _split_stream("fashion-mnist", data_dir, seed, deskewed=False, z_clip=None)
