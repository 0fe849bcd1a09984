"""The GLN learner (``nctl.GLN``): a Gated Linear Network trained online, its rows run in compiled
chunks of ``GLN_CHUNK``."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from nctl.core import gln, mixing
from nctl.core.rows import GGMRows
from nctl.learners.base import OnlineLearner
from nctl.learners.presets import GLN_TABULAR
from nctl.params import GLN_RULES, check_fields

GLN_CHUNK = 256  # rows per compiled call; learn_one runs the same compiled loop with one row


@partial(jax.jit, static_argnums=(5,), donate_argnums=(0,))
def _gln_chunk(layers, Z, Y, n, positive, rows):
    return gln.run_chunk(layers, Z, Y, n, positive, rows)


_gln_predict = jax.jit(gln.predict_many, static_argnums=(2,))


@partial(jax.jit, static_argnums=(1, 2, 3, 4))
def _gln_init(gates, n_features, layer_sizes, context_bits, rows):
    """One compiled program per configuration (run op by op, a state's creation compiles dozens)."""
    return jax.vmap(lambda g: gln.init(g, n_features, layer_sizes, context_bits, rows))(gates)


def _positive_labels(n_classes: int) -> jnp.ndarray:
    return jnp.arange(n_classes, dtype=jnp.int32) if n_classes > 2 else jnp.array([1], jnp.int32)


def _padded_chunks(X, y, size):
    """Rows in pieces of at most ``size``, each padded to ``size`` rows for one compiled shape."""
    for a in range(0, X.shape[0], size):
        n = min(size, X.shape[0] - a)
        Z = np.zeros((size, X.shape[1]), np.float32)
        Y = np.zeros(size, np.int32)
        Z[:n], Y[:n] = X[a:a + n], y[a:a + n]
        yield n, Z, Y


@dataclass(eq=False)
class GLN(OnlineLearner):
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

    def _fresh_state(self, n_features: int):
        gates = gln.network_gates(jax.random.PRNGKey(self.seed), _positive_labels(self.n_classes).shape[0],
                                  n_features, self.layer_sizes, self.context_bits)
        return _gln_init(gates, n_features, self.layer_sizes, self.context_bits, self.rows)

    def _learn(self, X, y, stop):
        positive, rows = _positive_labels(self.n_classes), self.rows
        out = [np.zeros((0, len(positive)), np.float32)]
        for n, Z, Y in _padded_chunks(X, y, GLN_CHUNK):
            if stop.asked:
                break
            self.state_, p = _gln_chunk(self.state_, Z, Y, n, positive, rows)
            out.append(np.asarray(p[:n]))
        return np.concatenate(out)

    def _predict(self, X):
        return np.asarray(_gln_predict(self.state_, jnp.asarray(X), self.rows))

    def restore_template(self, n_features: int, shapes: dict):
        """The state a save of this learner with ``n_features`` inputs holds (``nctl.learners.load``
        reads only its shapes)."""
        return self._fresh_state(n_features)
