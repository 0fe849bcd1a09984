"""The Gaussian GLN regressor (``nctl.GLNRegressor``): a Gated Linear Network of Gaussian neurons
(``nctl.core.gaussian.GaussianRows``) trained online on real targets, which it standardises itself."""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import partial
from typing import NamedTuple

import numpy as np

from nctl import engines
from nctl.core import gln
from nctl.core.gaussian import GaussianRows
from nctl.deferred import jax, jnp
from nctl.learners.base import OnlineLearner
from nctl.learners.gln import GLN_CHUNK
from nctl.learners.inputs import check_features
from nctl.native.gaussian_gln import GaussianGLNCalls
from nctl.params import MAX_CONTEXT_BITS, MAX_SEED, check_fields, check_float, check_int, check_layer_sizes

MAX_TARGET = 1e100  # the largest target magnitude: squared deviations up to 4e200 sum over any stream
# without overflowing float64, so the target statistics, predictions and saves stay finite
ONE_NETWORK = np.array([0], np.int32)  # regression trains one network; its "positive class" is unused

REGRESSOR_RULES = {
    "layer_sizes": check_layer_sizes,
    "context_bits": partial(check_int, low=0, high=MAX_CONTEXT_BITS),
    "learning_rate": partial(check_float, low=0, low_open=True),
    "min_variance": partial(check_float, low=0, low_open=True),
    "max_variance": partial(check_float, low=0, low_open=True),
    "max_weight": partial(check_float, low=0, low_open=True),
    "max_mean": partial(check_float, low=0, low_open=True),
    "seed": partial(check_int, low=0, high=MAX_SEED),
}


class RegressorState(NamedTuple):
    layers: tuple  # the network's layers, a leading axis of one network (nctl.core.gln)
    targets: jax.Array  # float64 [3]: the targets seen, their mean and their sum of squared deviations


def check_targets(y) -> np.ndarray:
    """Real, finite targets within ``+-MAX_TARGET`` as float64; ValueError naming what is wrong."""
    array = np.asarray(y)
    if array.ndim == 0 and array.dtype.kind in "iuf" and abs(float(array)) <= MAX_TARGET:  # one target, the usual
        return array.astype(np.float64)  # (NaN fails the comparison and takes the checks below)
    if array.dtype.kind not in "iuf":
        raise ValueError(f"targets must be real numbers, got dtype {array.dtype}")
    array = array.astype(np.float64)
    if not np.isfinite(array).all():
        raise ValueError("targets contain NaN or infinity")
    if array.size and np.abs(array).max() > MAX_TARGET:
        raise ValueError(f"targets must lie within +-{MAX_TARGET:g}, got {array.flat[np.abs(array).argmax()]:g}: "
                         "their running variance would overflow float64; rescale them")
    return array


def standardised(stats, y):
    """The running standardisation of the targets ``y`` [n] after ``stats`` (count, mean, sum of squared
    deviations; Welford's update, in float64, one target at a time).

    Returns, per target, the mean and scale of the targets before it (to map the network's prediction of
    it back to the targets' units), the target standardised by the mean and scale that include it (what
    the network learns: within ``+-sqrt(t - 1)`` at the ``t``-th target), and the new stats. The scale is
    the standard deviation, or 1 while every target so far is equal.
    """
    count, mean, squares = (float(v) for v in stats)
    shifts, scales, scaled = np.empty(len(y)), np.empty(len(y)), np.empty(len(y), np.float32)
    for t, value in enumerate(y):
        shifts[t], scales[t] = mean, target_scale(count, squares)
        count += 1.0
        delta = value - mean
        mean += delta / count
        squares += delta * (value - mean)
        scaled[t] = (value - mean) / target_scale(count, squares)
    return shifts, scales, scaled, np.array([count, mean, squares])


def target_scale(count: float, squares: float) -> float:
    """The standard deviation of the targets seen (their ``count`` and sum of squared deviations), or 1 while
    every target so far is equal."""
    return math.sqrt(squares / count) if squares > 0 else 1.0


class Regressor:
    """What the regressors (``GLNRegressor``, ``NCTLRegressor``) share, mixed in before ``OnlineLearner``: real
    targets, predicted means and the predictive distribution, from a ``_distribution(X)`` hook (means and
    variances [n] in the targets' units)."""

    n_classes = 1  # one network (for the plumbing that counts networks); not a parameter
    _target_kind = "target"

    def predict_one(self, x) -> float:
        """The predicted mean of the target of ``x``, with every row given so far learned; the learner
        does not change."""
        return float(self._predict_row(x))

    def predict_many(self, X) -> np.ndarray:
        """The predicted means [n] of the targets of the rows of ``X`` [n, d]; the learner does not change."""
        return self._predict_rows(X)

    def predict_distribution_many(self, X) -> tuple[np.ndarray, np.ndarray]:
        """The predictive Gaussians of the rows of ``X`` [n, d]: means [n] and variances [n] in the targets'
        units; the learner does not change."""
        X = self._checked_rows(X)
        if not len(X):
            return np.zeros(0), np.zeros(0)
        return self._distribution(X)

    def predict_distribution_one(self, x) -> tuple[float, float]:
        """The predictive Gaussian of the target of ``x``: its mean and variance in the targets' units, with
        every row given so far learned (the rows ``learn_one`` kept back in the same call where the learner
        can: the river path); the learner does not change otherwise."""
        x = check_features(x, self.n_features_)
        if x.ndim != 1:
            raise ValueError(f"x must be a 1-D feature vector, got shape {x.shape}")
        if self._waiting:
            mean, variance = self._waiting.learned_by(
                lambda X, y, stop: self._learn_then_distribution(X, y, x, stop), type(self).__name__)
        else:
            means, variances = self.predict_distribution_many(x[None])
            mean, variance = means[0], variances[0]
        return float(mean), float(variance)

    def _learn_then_distribution(self, X, y, x, stop):
        """Learn the rows ``X, y`` (all unless ``stop`` ends it early), then the predictive (mean, variance)
        of ``x``; returns ``(rows learned, (mean, variance))``."""
        done = len(self._learn(X, y, stop))
        means, variances = self._distribution(x[None])
        return done, (means[0], variances[0])

    def _checked_targets(self, y) -> np.ndarray:
        return check_targets(y)

    def _outputs(self, means: np.ndarray) -> np.ndarray:
        return np.asarray(means, np.float64)[:, 0]


@dataclass(eq=False)
class GLNRegressor(Regressor, OnlineLearner):
    """A Gaussian Gated Linear Network ([algorithm §8](algorithm.md#8-gaussian-rows-continual-regression)):
    every neuron a gated product of Gaussians, trained online on its own log likelihood of the target; the
    output neuron's Gaussian is the predictive distribution.

    Targets are given raw. The learner standardises them with their running mean and standard deviation
    (all targets so far): the network learns each target standardised by the statistics that include it, and
    a prediction is mapped back with the statistics of the targets learned before it. Running statistics
    keep the learner online (the first prediction needs no warm-up) and follow a stream whose range
    changes; they are part of the state, so save and load continue exactly. ``min_variance``,
    ``max_variance`` and ``max_mean`` are in standardised units.

    Args:
        layer_sizes: neurons per layer, ending with the single output neuron.
        context_bits: hyperplanes per neuron (``s``); each neuron has ``2^s`` contexts, a weight row each.
        learning_rate: the step size of every neuron's online gradient step on its log loss.
        min_variance: the smallest variance a neuron predicts.
        max_variance: the largest variance a neuron predicts.
        max_weight: weights are kept in ``[-max_weight, max_weight]``.
        max_mean: every neuron's predicted mean is clipped to ``[-max_mean, max_mean]``.
        seed: draws the gating hyperplanes.
    """

    layer_sizes: tuple = (16, 8, 1)
    context_bits: int = 2  # measured on four streams (docs/algorithm.md §8.4)
    learning_rate: float = 0.01  # the row model's defaults (GaussianRows), written out for the signature
    min_variance: float = 0.1
    max_variance: float = 10.0
    max_weight: float = 100.0
    max_mean: float = 10.0
    seed: int = 0

    def __post_init__(self) -> None:
        check_fields(self, REGRESSOR_RULES)
        if self.min_variance >= self.max_variance:
            raise ValueError(f"min_variance ({self.min_variance}) must be below max_variance ({self.max_variance})")
        super().__post_init__()

    @property
    def rows(self) -> GaussianRows:
        """The row model of every neuron: Gaussian rows with this learner's settings."""
        return GaussianRows(float(self.learning_rate), float(self.min_variance), float(self.max_variance),
                            float(self.max_weight), float(self.max_mean))

    def _fresh_state(self, n_features: int, xp=np) -> RegressorState:
        """A fresh state as numpy arrays, which either engine adopts (``xp``: ``nctl.core.shape_only``, for its
        shapes alone): the hyperplanes of ``self.seed``, every row at ``1/K`` and no target seen."""
        rows = self.rows
        gates = gln.network_gates(self.seed, 1, n_features, self.layer_sizes, self.context_bits)
        fan_ins = gln.fan_ins(n_features, self.layer_sizes)
        layers = tuple(gln.Layer(g, xp.full((1, n, 2**self.context_bits, rows.width(k)), rows.init_value(k),
                                            np.float32)) for g, n, k in zip(gates, self.layer_sizes, fan_ins))
        return RegressorState(layers, xp.zeros(3, np.float64))

    def _calls(self):
        """Learn and predict on this learner's layers by its engine."""
        return self.calls_for(self.state_.layers, self._calls_of)

    def _calls_of(self, layers):
        """The calls of this learner's engine on ``layers``."""
        if self.engine_ == engines.NATIVE:
            return GaussianGLNCalls(layers, self.rows)
        from nctl.learners.xla_calls import XlaCalls  # JAX's: imported where a learner runs on it

        return XlaCalls(layers, self.rows, ONE_NETWORK)

    def _learn(self, X, y, stop):
        """Learns the rows in order (all unless ``stop`` ends it early); returns each learned row's
        pre-update predicted mean [done, 1], in the targets' units. The target statistics go with the
        network, chunk by chunk."""
        calls, means = self._calls(), [np.zeros(0)]
        as_array = np.asarray if self.engine_ == engines.NATIVE else jnp.asarray
        for a in range(0, len(X), GLN_CHUNK):
            if stop.asked:
                break
            n = min(GLN_CHUNK, len(X) - a)
            shifts, scales, scaled, stats = standardised(np.asarray(self.state_.targets), y[a:a + n])
            q = calls.learn(X[a:a + n], scaled)
            self.state_ = RegressorState(calls.layers, as_array(stats))
            means.append(shifts + scales * np.asarray(q[:, 0, 0], np.float64))
        return np.concatenate(means)[:, None]

    def _predict(self, X):
        return self._distribution(X)[0][:, None]

    def _distribution(self, X):
        """Means and variances [n] of the rows ``X`` [n, d], mapped back with the current statistics."""
        q = np.asarray(self._calls().predict(X), np.float64)[:, 0]
        count, mean, squares = np.asarray(self.state_.targets)
        scale = target_scale(count, squares)
        return mean + scale * q[:, 0], scale**2 / q[:, 1]

    def restore_template(self, n_features: int, shapes: dict, xp=np):
        """The state a save of this learner with ``n_features`` inputs holds, made by ``xp`` (``nctl.learners.load`` reads
        only its shapes)."""
        return self._fresh_state(n_features, xp)
