"""Shared plumbing of the image benchmarks: a loaded data set with its training-split statistics,
and tasks that standardise rows on demand (uint8 images stay in memory, float32 is made per call).
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Callable, NamedTuple

import numpy as np

from nctl.data import load_fashion_mnist, load_mnist, resolve_data_dir
from nctl.data.integrity import file_fingerprint
from nctl.data.registry import get_dataset
from nctl.streams.base import Task
from nctl.streams.deskew import deskew
from nctl.streams.standardisation import feature_statistics, standardise

IMAGE_LOADERS: dict[str, Callable[..., tuple[np.ndarray, np.ndarray]]] = {
    "mnist": load_mnist,
    "fashion-mnist": load_fashion_mnist,
}
N_PIXELS = 28 * 28
CACHED_DATASETS = 3  # MNIST, deskewed MNIST and Fashion-MNIST: about 165 MB of uint8 images in all


class ImageData(NamedTuple):
    """Flattened images [n, 784] uint8 of both splits and the per-pixel training-split statistics."""

    train_x: np.ndarray  # [n_train, 784] uint8
    train_y: np.ndarray  # [n_train] uint8
    test_x: np.ndarray  # [n_test, 784] uint8
    test_y: np.ndarray  # [n_test] uint8
    mean: np.ndarray  # [784] float64
    std: np.ndarray  # [784] float64

    def standardise(self, images: np.ndarray, z_clip: float | None = None) -> np.ndarray:
        """images [n, 784] uint8 -> z = (x - mean) / std [n, 784] float32 with the training-split
        statistics, clipped to [-z_clip, z_clip] when ``z_clip`` is given."""
        z = standardise(images, self.mean, self.std)
        return z if z_clip is None else np.clip(z, -z_clip, z_clip)


def check_z_clip(z_clip: float | None) -> None:
    """``z_clip`` caps standardised pixels, so a rarely inked pixel (tiny std, huge z) cannot dominate
    the gating: None or a positive number."""
    if z_clip is not None and not z_clip > 0:
        raise ValueError(f"z_clip must be None or positive, got {z_clip}")


def load_image_data(dataset: str, data_dir: str | os.PathLike | None, deskewed: bool = False) -> ImageData:
    """The data set's arrays and statistics, reused while its files keep their path, size and mtime.

    ``deskewed``: every image of both splits goes through ``deskew`` before the statistics.
    """
    folder = resolve_data_dir(data_dir)
    fingerprint = tuple(file_fingerprint(folder / entry.path) for entry in get_dataset(dataset).files)
    return _load_image_data(dataset, folder, fingerprint, deskewed)


@functools.lru_cache(maxsize=CACHED_DATASETS)
def _load_image_data(dataset: str, folder: Path, fingerprint: tuple, deskewed: bool) -> ImageData:
    load = IMAGE_LOADERS[dataset]
    train_images, train_y = load("train", folder)
    test_images, test_y = load("test", folder)
    if deskewed:
        train_images, test_images = deskew(train_images), deskew(test_images)
    train_x = train_images.reshape(len(train_images), -1)
    mean, std = feature_statistics(train_x)
    return ImageData(train_x, train_y, test_images.reshape(len(test_images), -1), test_y, mean, std)


def pair_task(data: ImageData, low: int, high: int, z_clip: float | None = None) -> Task:
    """Binary task on the images of classes ``low`` < ``high``: label 0 for ``low``, 1 for ``high``.

    Training rows are the task's training images in data-set order; the test set is every test
    image of the two classes. Pixels are standardised (clipped to +-``z_clip`` when given).
    """
    train_rows = np.flatnonzero((data.train_y == low) | (data.train_y == high))
    test_rows = np.flatnonzero((data.test_y == low) | (data.test_y == high))

    def rows(idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        chosen = train_rows[np.asarray(idx)]
        return data.standardise(data.train_x[chosen], z_clip), (data.train_y[chosen] == high).astype(np.int64)

    def test_set() -> tuple[np.ndarray, np.ndarray]:
        return data.standardise(data.test_x[test_rows], z_clip), (data.test_y[test_rows] == high).astype(np.int64)

    return Task(f"{low} vs {high}", len(train_rows), rows, test_set)
