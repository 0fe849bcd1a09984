"""The GLN learner (``nctl.GLN``): a Gated Linear Network trained online, by the native engine
(``nctl.native.gln``) or by JAX (``nctl.learners.xla_calls``)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nctl import engines
from nctl.core import gln, mixing
from nctl.core.rows import GGMRows
from nctl.learners.base import OnlineLearner
from nctl.learners.classifier import Classifier
from nctl.learners.presets import GLN_TABULAR
from nctl.native.gln import GLNCalls
from nctl.params import GLN_RULES, check_fields

GLN_CHUNK = 256  # rows per call of the engine between two looks at a Ctrl-C


def _positive_labels(n_classes: int) -> np.ndarray:
    """The label each class network learns as 1: its class, or 1 for the one network of 0/1 labels."""
    return np.arange(n_classes, dtype=np.int32) if n_classes > 2 else np.array([1], np.int32)


@dataclass(eq=False)
class GLN(Classifier, OnlineLearner):
    """A Gated Linear Network ([algorithm §2](algorithm.md#2-the-gated-linear-network)): GGM neurons with
    half-space gating, each trained online on its own log loss.

    Args:
        layer_sizes: neurons per layer, ending with the single output neuron.
        context_bits: hyperplanes per neuron (``s``); each neuron has ``2^s`` contexts, a weight row each.
        learning_rate: the step size of every neuron's online gradient step on its log loss.
        n_classes: 2 for 0/1 labels; ``K > 2`` trains one network per class (one-vs-all).
        weight_init: initial weights: ``"zeros"`` (every neuron predicts 1/2) or ``"uniform"`` (1/fan-in).
        prob_eps: probabilities are clipped to ``[eps, 1 - eps]``.
        max_weight: weights are kept in ``[-max_weight, max_weight]``.
        seed: draws the gating hyperplanes (the same as NCTL's with the same seed and layers).

    On a CPU it runs on the native engine, else on JAX (``nctl.engines``); ``engine_`` says which, once the
    learner has a state.
    """

    layer_sizes: tuple = (50, 25, 1)
    context_bits: int = 4
    learning_rate: float = 1e-3
    n_classes: int = 2
    weight_init: str = "zeros"
    prob_eps: float = mixing.PROB_EPS
    max_weight: float = mixing.MAX_WEIGHT
    seed: int = 0

    @classmethod
    def tabular(cls, **overrides) -> "GLN":
        """The defaults of the river and scikit-learn adapters (``GLN_TABULAR``), measured on tabular
        streams (docs/guide-river.md, "Defaults")."""
        return cls(**{**GLN_TABULAR, **overrides})

    def __post_init__(self) -> None:
        check_fields(self, GLN_RULES)
        self.layer_sizes = gln.check_layer_sizes(self.layer_sizes)
        super().__post_init__()

    @property
    def rows(self) -> GGMRows:
        """The row model of every neuron: a GGM with this learner's settings."""
        return GGMRows(float(self.learning_rate), float(self.prob_eps), float(self.max_weight), self.weight_init)

    def _fresh_state(self, n_features: int, xp=np):
        """Fresh layers (``nctl.core.gln.Layer``, a leading class axis) as numpy arrays, which either engine
        adopts (``xp``: ``nctl.core.shape_only``, for their shapes alone): the hyperplanes of ``self.seed`` and
        every row at the row model's initial value."""
        nets, rows = _positive_labels(self.n_classes).shape[0], self.rows
        gates = gln.network_gates(self.seed, nets, n_features, self.layer_sizes, self.context_bits)
        fan_ins = gln.fan_ins(n_features, self.layer_sizes)
        return tuple(gln.Layer(g, xp.full((nets, n, 2**self.context_bits, rows.width(k)), rows.init_value(k),
                                          np.float32)) for g, n, k in zip(gates, self.layer_sizes, fan_ins))

    def _calls(self):
        """Learn and predict on this learner's state by its engine."""
        return self.calls_for(self.state_, self._calls_of)

    def _calls_of(self, layers):
        """The calls of this learner's engine on ``layers``."""
        if self.engine_ == engines.NATIVE:
            make = GLNCalls
        else:
            from nctl.learners.xla_calls import XlaCalls  # JAX's: imported where a learner runs on it
            make = XlaCalls
        return make(layers, self.rows, _positive_labels(self.n_classes))

    def _learn(self, X, y, stop):
        calls = self._calls()
        if len(X) == 1:  # nothing to stop between
            out = calls.learn(X, y)
            self.state_ = calls.layers
            return out
        out = [np.zeros((0, self.state_[0].weights.shape[0]), np.float32)]
        for a in range(0, len(X), GLN_CHUNK):
            if stop.asked:
                break
            out.append(calls.learn(X[a:a + GLN_CHUNK], y[a:a + GLN_CHUNK]))
            self.state_ = calls.layers
        return np.concatenate(out)

    def _predict(self, X):
        return self._calls().predict(X)

    def restore_template(self, n_features: int, shapes: dict, xp=np):
        """The state a save of this learner with ``n_features`` inputs holds, made by ``xp`` (``nctl.learners.load``
        reads only its shapes)."""
        return self._fresh_state(n_features, xp)
