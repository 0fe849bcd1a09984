"""Electricity (Elec2) as a single-task stream in temporal order (docs/protocols.md §4)."""

from __future__ import annotations

import os

import numpy as np

from nctl.data import ELEC2_COLUMNS, load_elec2
from nctl.streams.base import Task, TaskStream
from nctl.streams.standardisation import running_standardise

PAPER_FEATURES = ("day", "period", "nswdemand", "vicdemand", "transfer")  # NCTL section 5.3
FEATURE_SETS = {5: PAPER_FEATURES, 8: ELEC2_COLUMNS}


def electricity(data_dir: str | os.PathLike | None = None, n_features: int = 5) -> TaskStream:
    """Elec2, 45,312 steps in file (temporal) order, one task, no test set.

    ``n_features=5``: the paper's day, period, nswdemand, vicdemand, transfer (stream ``elec2-5``);
    ``n_features=8``: all eight columns (``elec2-8``). Features are standardised online with
    ``running_standardise``: step t uses the running mean/std of steps 0..t (x_t included, no later
    step), so no future data leaks into any feature. Labels: UP = 1, DOWN = 0.
    """
    if n_features not in FEATURE_SETS:
        raise ValueError(f"n_features must be one of {sorted(FEATURE_SETS)}, got {n_features}")
    elec2 = load_elec2(data_dir)
    columns = [elec2.columns.index(name) for name in FEATURE_SETS[n_features]]
    features = running_standardise(elec2.features[:, columns])  # [n, n_features] float32
    labels = elec2.labels.astype(np.int64)

    def rows(idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        idx = np.asarray(idx)
        return features[idx], labels[idx]

    def test_set() -> tuple[np.ndarray, np.ndarray]:
        return np.empty((0, n_features), np.float32), np.empty(0, np.int64)

    n = len(labels)
    task = Task("elec2", n, rows, test_set)
    return TaskStream(
        f"elec2-{n_features}", (task,), np.zeros(n, np.int32), np.arange(n, dtype=np.int64), n_features
    )
