"""Pool history: where every neuron's stored states came from, and what its pool updates did.

Each stored state carries its *birth*, the step ``t`` of the boundary at which its lineage was first
added (ADD); a REFINE keeps it ([algorithm §4.5](algorithm.md#45-updatemodelpool-for-one-closing-segment)).
The segment that produced it ended at step ``t - 1``, so its *origin task* is the task of that step
(stream index ``t - 2``). The per-neuron event counters count REFINE / SKIP / ADD decisions and the
states pruning removed (``nctl.core.pool.EVENTS``).

``record`` learns a stream one chunk (``P = L_min`` steps) at a time and snapshots both after each chunk.
A chunk's pool updates all happen at the boundary after its last step and concern segments that ended
at that step, so the events a chunk adds are credited to the task of its last step. Task ids are for
reporting only: the learner never sees them.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from nctl.core import engine
from nctl.core.pool import EVENTS as POOL_EVENTS


class PoolHistory(NamedTuple):
    """Snapshots of one class network's pools; row 0 is taken before the first recorded chunk."""

    steps: np.ndarray  # [r] steps learned at each snapshot
    capacity: int  # k: states a pool holds between steps
    born: tuple  # per layer [r, E, N] int32 (E = k + X pool cells, docs/algorithm.md §6.3)
    valid: tuple  # per layer [r, E, N] bool
    events: tuple  # per layer [r, N, len(POOL_EVENTS)] int32, cumulative


def _snapshot(learner, klass: int):
    learner.flush()
    net, layers = learner.state_.nets, learner.cfg_.layers
    part = lambda a, axis: [np.take(np.asarray(a[klass]), range(s.offset, s.offset + s.neurons), axis=axis)
                            for s in layers]
    return part(net.pool.born, 1), part(net.pool.in_pool, 1), part(net.pool.events, 0)


def record(learner, X, y, klass: int = 0) -> PoolHistory:
    """Learn the rows of ``X``, ``y`` (``learn_many``) one chunk at a time, snapshotting the pools of
    class network ``klass`` before and after every chunk. The learner must stand at a chunk start."""
    learner.allocate(np.asarray(X).shape[1])  # the state, so that its chunk length P is known (learns nothing)
    P = learner.cfg_.chunk
    if learner.t_ % P:
        raise ValueError(f"record needs a learner at a multiple of its chunk length {P}; it is at step {learner.t_}")
    steps, snaps = [learner.t_], [_snapshot(learner, klass)]
    for a in range(0, len(X), P):
        learner.learn_many(X[a:a + P], y[a:a + P])
        steps.append(learner.t_)
        snaps.append(_snapshot(learner, klass))
    # pool cells an engine grown later has are empty (zero) in earlier snapshots
    stack = lambda layer: np.concatenate(engine.pad_to_grown([a[None] for a in layer]))
    born, valid, events = (tuple(stack(layer) for layer in zip(*part)) for part in zip(*snaps))
    return PoolHistory(np.asarray(steps), learner.pool.size, born, valid, events)


def origin_tasks(history: PoolHistory, layer: int, task_of_step) -> np.ndarray:
    """[r, E, N] origin task of every stored state (``-1``: not in the pool, or born before the recorded
    stream)."""
    index = history.born[layer] - 2 - history.steps[0]
    known = history.valid[layer] & (index >= 0)
    return np.where(known, np.asarray(task_of_step)[np.maximum(index, 0)], -1)


def task_shares(history: PoolHistory, layer: int, task_of_step, n_tasks: int) -> np.ndarray:
    """[r, n_tasks]: share of each neuron's pool capacity holding entries of each origin task, averaged
    over the layer's neurons (the rows sum to the mean pool occupancy)."""
    origin = origin_tasks(history, layer, task_of_step)
    counts = np.stack([np.sum(origin == task, axis=1) for task in range(n_tasks)], axis=-1)  # [r, N, tasks]
    return counts.mean(axis=1) / history.capacity


def events_per_task(history: PoolHistory, layer: int, task_of_step, n_tasks: int) -> np.ndarray:
    """[n_tasks, len(POOL_EVENTS)] pool events per neuron of the layer (mean over its neurons), credited
    to the task of the last step of the closing segment (module docstring)."""
    added = np.diff(history.events[layer], axis=0).mean(axis=1)  # [r - 1, events]
    last = history.steps[1:] - history.steps[0] - 1  # stream index of each chunk's last step
    table = np.zeros((n_tasks, len(POOL_EVENTS)))
    credited = last >= 0
    np.add.at(table, np.asarray(task_of_step)[last[credited]], added[credited])
    return table
