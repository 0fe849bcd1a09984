"""Row models: what one stored row of a model predicts and how it learns (docs/algorithm.md §6).

The engine keeps every model state as rows, one per context, and never looks inside them; a row
model says how a row predicts ``P(x = 1)`` from the layer's input logits ``u`` and how it learns ``x``.
Everything the engine needs from a neuron's model goes through it: ``RowModel``, the protocol. A new
row model is one class that has its members (a ``NamedTuple`` of its settings, hashable: the engine's
configuration holds it), and a learner whose ``rows`` it is.

* ``GGMRows``: a gated geometric mixer row ``w`` [K] float32 (§1.3): ``q = clip(sigma(w . u))``,
  ``w <- clip(w - lr (q - x) u)``.
* ``KTRows``: Krichevsky-Trofimov counts ``(n_0, n_1)`` float64, which ignore the inputs:
  ``q = (n_1 + 1/2) / (n_0 + n_1 + 1)``; the sequence predictors of ``nctl.sequence`` use it.
* ``nctl.core.gaussian.GaussianRows``: a Gaussian GLN neuron's weights; it predicts ``(mean, precision)``
  (§8).
"""

from typing import Any, ClassVar, NamedTuple, Protocol, runtime_checkable

import numpy as np

from nctl.core import mixing
from nctl.deferred import jax, jnp


@runtime_checkable
class RowModel(Protocol):
    """What the engine reads of a neuron's model; arrays are JAX's in the JAX engine's programs."""

    dtype: ClassVar[type]  # a row's entries
    kernel: ClassVar[bool]  # whether the CPU kernel (``nctl.core.native``) can train rows of this kind
    prediction_shape: ClassVar[tuple]  # the trailing axes of a prediction: () for a probability
    neutral: ClassVar[Any]  # what a prediction that is not computed holds
    label_dtype: ClassVar[type]  # how a record keeps the label ``y``
    values_per_input: ClassVar[int]  # values a record keeps per hidden input

    def width(self, fan_in: int) -> int:
        """A row's length for a layer of ``fan_in`` inputs (bias included)."""

    def init_value(self, fan_in: int) -> float:
        """Every entry of a fresh row."""

    def base_inputs(self, z):
        """The first layer's inputs from the features ``z``."""

    def layer_inputs(self, p):
        """A layer's inputs from the predictions ``p`` of the layer below."""

    def input_values(self, u):
        """What a record keeps of a hidden layer's inputs ``u`` (the bias dropped)."""

    def record_inputs(self, values):
        """A hidden layer's inputs rebuilt from a record's ``values``."""

    def record_base_inputs(self, values):
        """The first layer's inputs rebuilt from a record's clipped features."""

    def feature_bound(self) -> float:
        """How far ``base_inputs`` clips the features (a record keeps them clipped)."""

    def predict(self, rows, u):
        """A row's prediction [..., *prediction_shape] from the inputs ``u``."""

    def update(self, rows, u, q, x):
        """The rows after learning the target ``x``, given their prediction ``q``."""

    def mix(self, alpha, mass, q, live):
        """A neuron's output from its members' predictions ``q``, mixed by the posteriors (§4.2)."""

    def target(self, y, positive):
        """What a network with positive class ``positive`` learns from the label ``y``."""

    def likelihood(self, q, x):
        """``q(x)``, float64: how members are mixed."""

    def log_likelihood(self, q, x):
        """``log q(x)``, float64: how members are scored."""


def mix_probabilities(rows, alpha, mass, q, live):
    """``p = sum_s mass_s nu_s``, ``nu_s = sum_m alpha_sm q_sm`` over the ``live`` [S, 1] slots; ``alpha``
    and ``q`` [S, M, N], ``mass`` [S, N] (§4.2): a mixture of probabilities is a probability."""
    nu = jnp.where(live, jnp.sum(alpha * q, axis=1), 0.0)
    return jnp.sum(mass * nu, axis=0)


def values_without_bias(rows, u):
    """A hidden layer's inputs ``u`` [K] without the bias (last): what a record keeps of them."""
    return u[:-1]


class GGMRows(NamedTuple):
    learning_rate: float = 1e-3
    prob_eps: float = mixing.PROB_EPS
    max_weight: float = mixing.MAX_WEIGHT
    weight_init: str = "zeros"

    dtype = np.float32
    kernel = True
    # predictions are probabilities (scalars); what a row model that predicts them shares
    prediction_shape = ()
    neutral = 0.5
    label_dtype = np.int32
    values_per_input = 1
    mix = mix_probabilities
    input_values = values_without_bias

    def width(self, fan_in: int) -> int:
        """Row length for a layer with ``fan_in`` inputs (bias included)."""
        return fan_in

    def base_inputs(self, z):
        """The first layer's input logits: the features clipped, then the bias (§1.3)."""
        return mixing.feature_logits(z, self.prob_eps)

    def layer_inputs(self, p):
        """A layer's input logits from the layer below's predictions ``p``, then the bias."""
        return mixing.input_logits(p, self.prob_eps)

    def feature_bound(self) -> float:
        """``logit(1 - eps)``: the features' clip, as ``base_inputs`` clips them."""
        return mixing.logit_bound(self.prob_eps)

    def record_inputs(self, values):
        """Input logits from a record's clipped logits ``values`` [..., K - 1]: the bias appended."""
        return jnp.concatenate([values, jnp.full(values.shape[:-1] + (1,), mixing.BIAS_LOGIT, jnp.float32)], axis=-1)

    def record_base_inputs(self, values):
        """The first layer's input logits from a record's clipped features [..., d]: as ``record_inputs``."""
        return self.record_inputs(values)

    def init_value(self, fan_in: int) -> float:
        """Every entry of a fresh row: 0 (predicts 1/2) or ``1/K`` (``weight_init="uniform"``)."""
        if self.weight_init == "zeros":
            return 0.0
        if self.weight_init == "uniform":
            return 1.0 / fan_in
        raise ValueError(f"weight_init must be 'zeros' or 'uniform', got {self.weight_init!r}")

    def predict(self, rows, u):
        """``clip(sigma(rows . u), eps, 1 - eps)``; rows [..., K], u [..., K] (broadcast) -> [...] float32."""
        a = jnp.einsum("...k,...k->...", rows, u, precision=jax.lax.Precision.HIGHEST)
        return jnp.clip(1.0 / (1.0 + jnp.exp(-a)), self.prob_eps, 1.0 - self.prob_eps)

    def update(self, rows, u, q, x):
        """``clip(rows - lr (q - x) u, -w_max, w_max)`` with the clipped ``q`` [...] (§1.3)."""
        step = jnp.float32(self.learning_rate) * (q - jnp.asarray(x, jnp.float32))
        return jnp.clip(rows - step[..., None] * u, -self.max_weight, self.max_weight)

    def target(self, y, positive):
        return bernoulli_target(y, positive)

    def likelihood(self, q, x):
        return bernoulli_likelihood(q, x)

    def log_likelihood(self, q, x):
        return bernoulli_log_likelihood(q, x)


class KTRows(NamedTuple):
    dtype = np.float64
    kernel = False
    # predictions are probabilities (scalars); what a row model that predicts them shares
    prediction_shape = ()
    neutral = 0.5
    label_dtype = np.int32
    values_per_input = 1
    mix = mix_probabilities
    input_values = values_without_bias

    def width(self, fan_in: int) -> int:
        return 2

    def base_inputs(self, z):
        """Counts read no inputs: one constant."""
        return jnp.ones(1, jnp.float32)

    def layer_inputs(self, p):
        return jnp.ones(1, jnp.float32)

    def feature_bound(self) -> float:
        return float("inf")

    def record_inputs(self, values):
        return jnp.ones(values.shape[:-1] + (1,), jnp.float32)

    def record_base_inputs(self, values):
        return self.record_inputs(values)

    def init_value(self, fan_in: int) -> float:
        return 0.0

    def predict(self, rows, u):
        """``(n_1 + 1/2) / (n_0 + n_1 + 1)``; rows [..., 2] -> [...] float64."""
        return (rows[..., 1] + 0.5) / (rows[..., 0] + rows[..., 1] + 1.0)

    def update(self, rows, u, q, x):
        x = jnp.asarray(x, rows.dtype)
        return rows + jnp.stack([1.0 - x, x])

    def target(self, y, positive):
        return bernoulli_target(y, positive)

    def likelihood(self, q, x):
        return bernoulli_likelihood(q, x)

    def log_likelihood(self, q, x):
        return bernoulli_log_likelihood(q, x)


def bernoulli_target(y, positive):
    """``x = 1`` where the label is the network's positive class: one-vs-all targets (float32)."""
    return (y == positive).astype(jnp.float32)


def bernoulli_likelihood(q, x):
    """``q(x)`` in float64 of a prediction ``q`` that ``x = 1``: ``q`` or ``1 - q``."""
    return mixing.prob(q, x)


def bernoulli_log_likelihood(q, x):
    """``log q(x)`` in float64."""
    return mixing.log_prob(q, x)
