"""The NCTL regressor (``nctl.NCTLRegressor``): NCTL whose neurons are Gaussian GLN neurons, each wrapped
in a Forget-Me-Not process, run by the engine of ``nctl.core.engine``."""

from __future__ import annotations

import math
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from nctl import engines
from nctl.core import gln, tree
from nctl.core.gaussian import GaussianRows
from nctl.learners.base import OnlineLearner
from nctl.learners.engine_learner import EngineLearner
from nctl.learners.regressor import REGRESSOR_RULES, Regressor, standardised, target_scale
from nctl.params import TREE_RULES, check_fields
from nctl.pool import Pool, check_pool, pool_keywords


@pool_keywords
@dataclass(eq=False)
class NCTLRegressor(Regressor, EngineLearner, OnlineLearner):
    """NCTL for regression ([algorithm §8.6](algorithm.md#86-nctl-over-gaussian-neurons)): a Gaussian GLN
    whose every neuron is a Forget-Me-Not process over its Gaussian neuron, mixing remembered solutions
    over segmentations of time, so that a concept that recurs is recalled from the pool. Members are
    scored by their Gaussian log likelihood; a neuron's output is its members' mixture, moment matched
    to one Gaussian.

    Targets are given raw and standardised inside, as ``GLNRegressor`` does (running mean and standard
    deviation, kept with the state, saved and loaded exactly); ``min_variance``, ``max_variance`` and
    ``max_mean`` are in standardised units.

    Args:
        layer_sizes: neurons per layer, ending with the single output neuron.
        context_bits: hyperplanes per neuron (``s``); each neuron has ``2^s`` contexts, a weight row each.
        learning_rate: the step size of every neuron's online gradient step on its log loss.
        min_variance: the smallest variance a neuron predicts.
        max_variance: the largest variance a neuron predicts.
        max_weight: weights are kept in ``[-max_weight, max_weight]``.
        max_mean: every neuron's predicted mean is clipped to ``[-max_mean, max_mean]``.
        pool: every neuron's pool of remembered states (``nctl.Pool``); here ``"spacing"`` eviction keeps
            states spread over the whole past.
        depth: tree depth for a stream of ``2^depth`` steps; ``None`` grows with the stream.
        split_prob: the prior probability of a segment boundary at each tree node, or a sequence of them.
        seed: draws the gating hyperplanes.
    """

    layer_sizes: tuple = (16, 8, 1)
    context_bits: int = 2  # the defaults: measured on four streams (docs/algorithm.md §8.4)
    learning_rate: float = 0.02
    min_variance: float = 0.1
    max_variance: float = 10.0
    max_weight: float = 100.0
    max_mean: float = 10.0
    pool: Pool = Pool(eviction="spacing")
    depth: int | None = None
    split_prob: float | tuple = 0.5
    seed: int = 0

    def __post_init__(self) -> None:
        check_fields(self, {**REGRESSOR_RULES, **TREE_RULES, "pool": check_pool})
        if self.min_variance >= self.max_variance:
            raise ValueError(f"min_variance ({self.min_variance}) must be below max_variance ({self.max_variance})")
        self.layer_sizes = gln.check_layer_sizes(self.layer_sizes)
        tree.split_grid(self.split_prob)
        super().__post_init__()
        self.targets_ = np.zeros(3)  # the targets seen: their count, mean and sum of squared deviations

    @property
    def rows(self) -> GaussianRows:
        """The row model of every neuron: Gaussian rows with this learner's settings (§8)."""
        return GaussianRows(float(self.learning_rate), float(self.min_variance), float(self.max_variance),
                            float(self.max_weight), float(self.max_mean))

    # -- learning and predicting, in the targets' units

    def _run(self, X, y, observe, stop):
        """Learn ``y`` standardised; returns the pre-update predicted means [done, 1] of the rows learned, in
        the targets' units (the target statistics count those rows only)."""
        shifts, scales, scaled, stats = standardised(self.targets_, y)
        q, observations = super()._run(X, scaled, observe, stop)
        self.targets_ = stats if len(q) == len(y) else standardised(self.targets_, y[:len(q)])[3]
        return (shifts[:len(q)] + scales[:len(q)] * q[:, 0, 0])[:, None], observations

    def _learn_then_distribution(self, X, y, x, stop):
        """Learn ``X, y`` and predict ``x``; on the JAX engine in one compiled call (``engine.learn_then_predict``)."""
        if self.engine_ == engines.NATIVE:
            return super()._learn_then_distribution(X, y, x, stop)
        _, _, scaled, _ = standardised(self.targets_, y)
        done, q = super()._learn_then_predict(X, scaled, x, stop)
        self.targets_ = standardised(self.targets_, y[:done])[3]
        means, variances = self._in_target_units(q[None])
        return done, (means[0], variances[0])

    def _learn_then_predict(self, X, y, x, stop):
        done, (mean, _) = self._learn_then_distribution(X, y, x, stop)
        return done, np.array([mean])

    def _predict(self, X):
        return self._distribution(X)[0][:, None]

    def _distribution(self, X):
        return self._in_target_units(super()._predict(X))

    def _in_target_units(self, q):
        """Means and variances [n] of the network's outputs ``q`` [n, 1, 2] (standardised mean, precision), in
        the targets' units."""
        q = np.asarray(q, np.float64)[:, 0]
        count, mean, squares = self.targets_
        scale = target_scale(count, squares)
        return mean + scale * q[:, 0], scale**2 / q[:, 1]

    @contextmanager
    def fork(self, X, y):
        """``NCTL.fork``; the target statistics the rows change are put back too."""
        targets = self.targets_.copy()
        try:
            with super().fork(X, y) as adapted:
                yield adapted
        finally:
            self.targets_ = targets

    # -- copies and saves

    def _copy_extra(self, twin) -> None:
        super()._copy_extra(twin)
        twin.targets_ = self.targets_.copy()

    def _shape_meta(self) -> dict:
        return {**super()._shape_meta(), "targets": [float(v) for v in self.targets_]}

    def restore_template(self, n_features: int, shapes: dict, xp=np):
        """``NCTL.restore_template``; also takes back the target statistics the save holds."""
        targets = shapes.get("targets")
        if not (isinstance(targets, list) and len(targets) == 3 and all(type(v) is float and math.isfinite(v)
                                                                         for v in targets)
                and targets[0] >= 0 and targets[2] >= 0):
            raise ValueError(f"field shapes.targets must be [count, mean, sum of squared deviations], finite, "
                             f"count and sum >= 0; got {targets!r}")
        self.targets_ = np.array(targets)
        return super().restore_template(n_features, shapes, xp)
