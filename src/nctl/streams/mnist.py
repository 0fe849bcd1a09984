"""Whole MNIST as one 10-class task: the GLN substrate check (docs/protocols.md §5)."""

from __future__ import annotations

import os

import numpy as np

from nctl.streams.images import N_PIXELS, check_z_clip, load_image_data
from nctl.streams.base import Task, TaskStream


def mnist_classes(
    data_dir: str | os.PathLike | None = None, seed: int = 0, deskewed: bool = False, z_clip: float | None = None
) -> TaskStream:
    """One pass over the 60,000 training images in a seeded random order; labels are the digits.

    ``deskewed=True`` deskews both splits first (``nctl.streams.deskew``), as the pygln and DeepMind
    GLN examples behind the substrate anchors do; ``z_clip`` clips standardised pixels (``check_z_clip``).
    """
    check_z_clip(z_clip)
    data = load_image_data("mnist", data_dir, deskewed)

    def rows(idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        idx = np.asarray(idx)
        return data.standardise(data.train_x[idx], z_clip), data.train_y[idx].astype(np.int64)

    def test_set() -> tuple[np.ndarray, np.ndarray]:
        return data.standardise(data.test_x, z_clip), data.test_y.astype(np.int64)

    task = Task("digits", len(data.train_y), rows, test_set)
    order = np.random.default_rng(seed).permutation(len(data.train_y)).astype(np.int64)
    name = "mnist-deskewed" if deskewed else "mnist"
    return TaskStream(name, (task,), np.zeros(len(order), np.int32), order, N_PIXELS, n_classes=10)
