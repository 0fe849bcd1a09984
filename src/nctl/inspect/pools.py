"""Pool history: where every neuron's stored states came from, and what its pool updates did.

Each pool entry carries ``pool_born``, the step ``t`` before which its lineage was first added (ADD);
a REFINE keeps it, an ADD into the entry (after an eviction) resets it. The segment that produced it
ended at step ``t - 1``, so its *origin task* is the task of that step (stream index ``t - 2``).
``pool_events`` counts each neuron's REFINE / SKIP / ADD decisions and evictions (ADDs into a full
pool; ``nctl.core.network.POOL_EVENTS``).

``record`` learns a stream one chunk (``P`` steps) at a time and snapshots both after each chunk.
A chunk's pool updates all happen at its start and concern segments that ended at the step before,
so the events a chunk adds are credited to the task of that step. Task ids are for reporting
only: the learner never sees them.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from nctl.core.network import POOL_EVENTS


class PoolHistory(NamedTuple):
    """Snapshots of one class network's pools; row 0 is taken before the first recorded chunk."""

    steps: np.ndarray  # [r] steps learned at each snapshot
    born: tuple  # per layer [r, k, N] int32
    valid: tuple  # per layer [r, k, N] bool
    events: tuple  # per layer [r, N, len(POOL_EVENTS)] int32, cumulative


def _snapshot(learner, klass: int):
    layers = learner.state_.nets.layers
    return ([np.asarray(layer.pool_born[klass]) for layer in layers],
            [np.asarray(layer.pool_valid[klass]) for layer in layers],
            [np.asarray(layer.pool_events[klass]) for layer in layers])


def record(learner, X, y, klass: int = 0) -> PoolHistory:
    """Learn the rows of ``X``, ``y`` (``learn_many``) one chunk at a time, snapshotting the pools of
    class network ``klass`` before and after every chunk. The learner must stand at a chunk start."""
    learner._checked_batch(X[:1], y[:1])  # checks a row and creates the state (learns nothing), so that P is known
    P = learner.cfg_.chunk
    if learner.t_ % P:
        raise ValueError(f"record needs a learner at a multiple of its chunk length {P}; it is at step {learner.t_}")
    steps, snaps = [learner.t_], [_snapshot(learner, klass)]
    for a in range(0, len(X), P):
        learner.learn_many(X[a:a + P], y[a:a + P])
        steps.append(learner.t_)
        snaps.append(_snapshot(learner, klass))
    born, valid, events = (tuple(np.stack(layer) for layer in zip(*part)) for part in zip(*snaps))
    return PoolHistory(np.asarray(steps), born, valid, events)


def origin_tasks(history: PoolHistory, layer: int, task_of_step) -> np.ndarray:
    """[r, k, N] origin task of every entry (``-1``: empty, or born before the recorded stream)."""
    index = history.born[layer] - 2 - history.steps[0]
    known = history.valid[layer] & (index >= 0)
    return np.where(known, np.asarray(task_of_step)[np.maximum(index, 0)], -1)


def task_shares(history: PoolHistory, layer: int, task_of_step, n_tasks: int) -> np.ndarray:
    """[r, n_tasks]: share of each neuron's pool capacity holding entries of each origin task, averaged
    over the layer's neurons (the rows sum to the mean pool occupancy)."""
    origin = origin_tasks(history, layer, task_of_step)
    counts = np.stack([np.sum(origin == task, axis=1) for task in range(n_tasks)], axis=-1)  # [r, N, tasks]
    return counts.mean(axis=1) / origin.shape[1]


def events_per_task(history: PoolHistory, layer: int, task_of_step, n_tasks: int) -> np.ndarray:
    """[n_tasks, len(POOL_EVENTS)] pool events per neuron of the layer (mean over its neurons), credited
    to the task of the last step of the closing segment (module docstring)."""
    added = np.diff(history.events[layer], axis=0).mean(axis=1)  # [r - 1, events]
    last = history.steps[:-1] - history.steps[0] - 1  # stream index of the step before each chunk
    table = np.zeros((n_tasks, len(POOL_EVENTS)))
    credited = last >= 0
    np.add.at(table, np.asarray(task_of_step)[last[credited]], added[credited])
    return table
