"""Task boundaries as NCTL sees them: a layer's posterior over the start of its current segment.

After learning step ``t`` a neuron's PTW level posterior ``pi_j``
([algorithm §3.3](algorithm.md#33-level-posterior-and-prediction)) is the probability that step ``t`` lies
in the tree node of level ``j``. Levels that share a slot share a
start step, so ``mass_s = sum_{j: canon(j) = s} pi_j`` is the posterior that the segment holding ``t``
began at ``start_s``; a layer's posterior is the mean over its neurons (and over the class networks
of a one-vs-all learner). From it:

* MAP segment start: ``start_{argmax_s mass_s}``;
* change probability ``c_t(w) = sum_{s: start_s > t - w} mass_s``: the posterior that a segment
  boundary lies in the last ``w`` steps ``(t - w, t]``. It is 1 for ``t <= w`` (the stream's start);
* detections: the steps where ``c_t(w)`` rises to the threshold or above (it must first have been
  below), each with the boundary estimate ``start_s - 1`` of the most probable recent start
  (``start_s > t - w``); a rise within ``w`` steps of the previous detection is the same change.

The first layer is the default source: its neurons see ``z`` directly and open a new segment when
the task changes, while the output neuron's inputs are lower FMN outputs that have already switched,
so it rarely needs a boundary of its own (``nctl boundaries --layer`` compares them).

Steps ``t`` and starts are 1-based (as in the network); detections and boundaries are 0-based stream
indices (``TaskStream.boundaries``): the detection of step ``t`` is index ``t - 1``.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from nctl import deferred
from nctl.core import engine
from nctl.deferred import jax, jnp


def segment_posterior(state: engine.State, cfg: engine.EngineConfig):
    """``(start [S] int32, mass [layers, S] float64)``: every layer's posterior (module docstring) over the
    slots' start steps, averaged over its neurons and class networks; dead slots get 0. An observation
    for ``NCTL.learn_observed``: taken after a step is learned, before its boundary."""
    sched = state.schedule
    mass = jax.vmap(lambda net: engine.posterior.posterior(net, sched, cfg).mass)(state.nets)  # [classes, S, N]
    per_layer = [jnp.mean(mass[:, :, s.offset:s.offset + s.neurons], axis=(0, 2)) for s in cfg.layers]
    return sched.start, jnp.stack(per_layer)


def trace(learner, X, y):
    """``learner.learn_many(X, y)`` (same predictions, same learner afterwards) that also returns every
    layer's posterior over the start of its current segment after every step, as a ``SegmentTrace``."""
    first = learner.t_ + 1
    probs, (start, mass) = learner.learn_observed(X, y, segment_posterior)
    return probs, SegmentTrace(first + np.arange(len(probs)), start, mass)


def next_segment_posterior(learner, layer: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``(start [s], mass [s])``: the posterior over the first step (1-based) of the segment that will hold
    the next step, one entry per live slot, oldest first; mean over the neurons of ``layer`` (0: the first
    layer, -1: the output neuron). The learner's state is prepared for that step
    ([algorithm §6.1](algorithm.md#61-state-by-lifetime))."""
    learner.flush()
    if learner.state_ is None:
        raise ValueError("the learner has not seen any example yet")
    start, mass = _posterior(learner.state_, learner.cfg_)
    live = int(learner.state_.schedule.size)
    return np.asarray(start)[:live], np.asarray(mass)[layer, :live]


_posterior = deferred.jit(static_argnums=(1,))(segment_posterior)


class SegmentTrace(NamedTuple):
    """Every layer's segment posterior after each learned step (module docstring); ``layer`` arguments
    index the network's layers (0: the first, -1: the output neuron)."""

    steps: np.ndarray  # [n] int: step t (1-based) after which each row was taken
    start: np.ndarray  # [n, S] int: start step of each slot's segment
    mass: np.ndarray  # [n, layers, S] float: posterior of each slot (0 for dead slots)

    @staticmethod
    def concatenate(traces) -> "SegmentTrace":
        """The traces of successive calls as one; slots a later call has (a tree grown deeper) are
        dead (start 0, mass 0) in the earlier ones."""
        joined = (np.concatenate(engine.pad_to_grown(parts)) for parts in zip(*traces))
        return SegmentTrace(*joined)

    def map_start(self, layer: int = 0) -> np.ndarray:
        """[n] most probable start step of the current segment."""
        return np.take_along_axis(self.start, np.argmax(self.mass[:, layer], axis=1)[:, None], axis=1)[:, 0]

    def _recent(self, window: int) -> np.ndarray:
        return self.start > (self.steps - window)[:, None]

    def change_probability(self, window: int = 100, layer: int = 0) -> np.ndarray:
        """[n] ``c_t(w)``: posterior that a segment boundary lies in the last ``window`` steps."""
        return np.sum(np.where(self._recent(window), self.mass[:, layer], 0.0), axis=1)

    def recent_start(self, window: int = 100, layer: int = 0) -> np.ndarray:
        """[n] most probable start step among those in the last ``window`` steps."""
        best = np.argmax(np.where(self._recent(window), self.mass[:, layer], -1.0), axis=1)
        return np.take_along_axis(self.start, best[:, None], axis=1)[:, 0]


class Detections(NamedTuple):
    index: np.ndarray  # [m] stream index of the step at which the change probability rose to the threshold
    estimate: np.ndarray  # [m] stream index of the estimated boundary (first step of the new segment)


def detect(trace: SegmentTrace, window: int = 100, threshold: float = 0.5, layer: int = 0) -> Detections:
    """Rising crossings of ``c_t(window) >= threshold`` and their boundary estimates (module docstring)."""
    above = trace.change_probability(window, layer) >= threshold
    kept = []
    for i in np.flatnonzero(above & ~np.concatenate([[True], above[:-1]])):
        if not kept or trace.steps[i] - trace.steps[kept[-1]] > window:
            kept.append(i)
    kept = np.asarray(kept, np.int64)
    return Detections(trace.steps[kept] - 1, trace.recent_start(window, layer)[kept] - 1)


def score(detections: Detections, boundaries, n_steps: int, tolerance: int = 100) -> dict:
    """Precision, recall and F1 of detections against the true boundaries (stream indices > 0).

    A detection at index ``d`` is a hit when the latest true boundary ``b <= d`` has ``d - b <= tolerance``
    and no earlier detection took it (each boundary is matched at most once). ``chance_precision`` is
    the precision of a detection placed uniformly at random: the share of steps within ``tolerance``
    after a boundary. ``delay`` and ``estimate_error`` are means over hits of ``d - b`` and ``|estimate - b|``.
    """
    boundaries = np.asarray([b for b in boundaries if 0 < b < n_steps], np.int64)
    matched, delays, errors = set(), [], []
    for d, estimate in zip(detections.index, detections.estimate):
        latest = np.searchsorted(boundaries, d, side="right") - 1
        if latest >= 0 and d - boundaries[latest] <= tolerance and latest not in matched:
            matched.add(latest)
            delays.append(d - boundaries[latest])
            errors.append(abs(estimate - boundaries[latest]))
    near = np.zeros(n_steps, bool)
    for b in boundaries:
        near[b: b + tolerance + 1] = True
    return summarise([{"hits": len(matched), "detections": len(detections.index), "boundaries": len(boundaries),
                       "steps": n_steps, "near_steps": int(near.sum()), "delay_sum": float(np.sum(delays)),
                       "error_sum": float(np.sum(errors))}])


def summarise(scores: list[dict]) -> dict:
    """Pool the counts of several ``score`` results (micro average) and derive the rates."""
    total = {key: sum(s[key] for s in scores)
             for key in ("hits", "detections", "boundaries", "steps", "near_steps", "delay_sum", "error_sum")}
    hits = total["hits"]
    precision = hits / total["detections"] if total["detections"] else 0.0
    recall = hits / total["boundaries"] if total["boundaries"] else 0.0
    return {
        **total,
        "precision": precision,
        "recall": recall,
        "f1": 2 * precision * recall / (precision + recall) if hits else 0.0,
        "chance_precision": total["near_steps"] / total["steps"] if total["steps"] else 0.0,
        "delay": total["delay_sum"] / hits if hits else None,
        "estimate_error": total["error_sum"] / hits if hits else None,
    }
