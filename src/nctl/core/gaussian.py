"""Gaussian rows: the neuron of a Gaussian GLN, a gated weighted product of Gaussians (docs/algorithm.md §8).

A neuron's inputs are Gaussians ``N(mu_k, 1/lambda_k)`` (mean, precision); with the weight row ``w`` its
context picks, it predicts the Gaussian proportional to ``prod_k N(mu_k, 1/lambda_k)^{w_k}``:

    ``lambda = sum_k w_k lambda_k``,    ``mu = sum_k w_k lambda_k mu_k / lambda``

(Budden et al., *Gaussian Gated Linear Networks*, NeurIPS 2020), and learns by online gradient descent on
its own loss ``-log N(x; mu, 1/lambda)``, which is convex in ``w``.

Representation: a Gaussian is a trailing axis of 2, ``(mean, precision)``. A prediction ``q`` is [..., 2], a
layer's inputs ``u`` are [..., K, 2] and a row is the weight vector [..., K] float32; leading axes broadcast
as they do for ``GGMRows`` (rows [N, K] against one input vector [K, 2] gives [N, 2]). A network's output is
the output neuron's ``(mean, precision)`` in the units of the targets it learned.

Constraints (§8): a stored row lies in the box ``[-w_max, w_max]^K``; to predict, it is projected (in
Euclidean distance) onto the slab ``1/var_max <= w . lambda_in <= 1/var_min`` of the current inputs'
precisions, so the output precision is positive and the variance at least ``var_min`` whatever the inputs;
the output mean is clipped to ``[-m_max, m_max]``, as a GGM clips its probability.
"""

from typing import NamedTuple

import numpy as np

from nctl.deferred import jax, jnp

FEATURE_BOUND = 5.0  # a feature's mean is clipped to +-5: standardised features lie beyond it about once in 10^6
INPUT_VARIANCE = 1.0  # every base input is N(z_j, 1): a standardised feature's own spread
BIAS_MEANS = (-1.0, 0.0, 1.0)  # every layer also gets N(-1, 1), N(0, 1), N(1, 1)
BIAS_VARIANCE = 1.0


class GaussianRows(NamedTuple):
    """Rows of gated products of Gaussians; the settings are those of every neuron of a network.

    Args:
        learning_rate: ``eta`` of the online gradient step on ``-log N(x; mu, 1/lambda)``.
        min_variance: ``var_min``, the smallest variance a neuron predicts (targets' units).
        max_variance: ``var_max``, the largest: the output precision stays at least ``1/var_max > 0``.
        max_weight: ``w_max``; stored weights are kept in ``[-w_max, w_max]``.
        max_mean: ``m_max``; every predicted mean is clipped to ``[-m_max, m_max]``.

    The defaults are for standardised targets (§8 says why each).
    """

    learning_rate: float = 0.01
    min_variance: float = 0.1
    max_variance: float = 10.0
    max_weight: float = 100.0
    max_mean: float = 10.0

    dtype = np.float32
    kernel = False  # the C++ kernel trains GGM rows only
    prediction_shape = (2,)  # (mean, precision)
    neutral = (0.0, 1.0)  # what a prediction that is not computed holds: N(0, 1)
    label_dtype = np.float32  # a record keeps the real target
    values_per_input = 2  # a record keeps each hidden input's mean and precision

    def width(self, fan_in: int) -> int:
        """Row length for ``fan_in`` inputs counted as ``GGMRows`` counts them (one bias): the bias is
        ``len(BIAS_MEANS)`` Gaussians here."""
        return fan_in - 1 + len(BIAS_MEANS)

    def init_value(self, fan_in: int) -> float:
        """``1/K``: a fresh neuron predicts the product of its inputs' ``1/K`` powers, whose precision is
        their mean precision (1 on the base inputs) and whose mean is their precision-weighted mean."""
        return 1.0 / self.width(fan_in)

    def base_inputs(self, z):
        """The first layer's inputs: ``N(clip(z_j, +-FEATURE_BOUND), INPUT_VARIANCE)`` per feature, then the
        bias Gaussians; z [..., d] -> [..., d + len(BIAS_MEANS), 2]."""
        means = jnp.clip(z, -FEATURE_BOUND, FEATURE_BOUND).astype(jnp.float32)
        return _with_bias(jnp.stack([means, jnp.full_like(means, 1.0 / INPUT_VARIANCE)], axis=-1))

    def layer_inputs(self, p):
        """A layer's inputs from the layer below's predictions ``p`` [N, 2], then the bias Gaussians."""
        return _with_bias(p.astype(jnp.float32))

    def input_values(self, u):
        """What a record keeps of a hidden layer's inputs ``u`` [K, 2]: the inputs' (mean, precision) pairs
        without the bias Gaussians, flat [2 (K - len(BIAS_MEANS))]."""
        return u[:-len(BIAS_MEANS)].reshape(-1)

    def record_inputs(self, values):
        """A hidden layer's inputs [..., K, 2] from what a record kept of them (``input_values``)."""
        return _with_bias(values.reshape(values.shape[:-1] + (-1, 2)))

    def record_base_inputs(self, values):
        """The first layer's inputs [..., K, 2] from a record's clipped features [..., d]."""
        return self.base_inputs(values)

    def mix(self, alpha, mass, q, live):
        """A neuron's output: the mixture of its members' Gaussians ``q`` [S, M, N, 2] with weights
        ``mass_s alpha_sm`` over the ``live`` [S, 1] slots (§4.2), moment matched: the mixture's mean
        ``mu = sum w mu_sm`` and variance ``sum w (1/lambda_sm + (mu_sm - mu)^2)`` (§8.6)."""
        w = jnp.where(live[..., None], alpha, 0.0) * mass[:, None, :]
        mean = jnp.sum(w * q[..., 0], axis=(0, 1))
        variance = jnp.sum(w * (1.0 / q[..., 1] + (q[..., 0] - mean) ** 2), axis=(0, 1))
        return jnp.stack([mean, 1.0 / variance], axis=-1)

    def feature_bound(self) -> float:
        """The clip of a feature's mean in ``base_inputs``."""
        return FEATURE_BOUND

    def effective_weights(self, rows, u):
        """The weights a row predicts with: ``w = clip(rows, +-w_max)`` moved along ``lambda_in`` (the
        inputs' precisions) onto the slab ``1/var_max <= w . lambda_in <= 1/var_min``:
        ``w + (clip(s) - s) lambda_in / |lambda_in|^2`` with ``s = w . lambda_in``. Returns the weights
        [..., K] and the output precision ``clip(s)`` [...] (exactly in the slab)."""
        lam = u[..., 1]
        w = jnp.clip(rows, -self.max_weight, self.max_weight)
        s = _dot(w, lam)
        precision = jnp.clip(s, jnp.float32(1.0 / self.max_variance), jnp.float32(1.0 / self.min_variance))
        shift = (precision - s) / _dot(lam, lam)
        return w + shift[..., None] * lam, precision

    def predict(self, rows, u):
        """``(mu, lambda)`` [..., 2] of the weighted product of the inputs ``u`` [..., K, 2] with the
        effective weights ``w``: ``lambda = w . lambda_in``, ``mu = clip(w . (lambda_in mu_in) / lambda,
        +-m_max)``."""
        w, precision = self.effective_weights(rows, u)
        mean = jnp.clip(_dot(w, u[..., 1] * u[..., 0]) / precision, -self.max_mean, self.max_mean)
        return jnp.stack([mean, precision], axis=-1)

    def update(self, rows, u, q, x):
        """One projected gradient step on ``-log N(x; mu, 1/lambda)`` at the effective weights ``w``:
        ``dloss/dw_k = lambda_k ((x - mu_k)^2 - (mu - mu_k)^2 - 1/lambda) / 2``, then
        ``clip(w - eta grad, +-w_max)``; ``q`` [..., 2] is the prediction ``predict(rows, u)``, its mean
        clipped (so a neuron whose mean is clipped still learns, as a GGM does with its clipped ``q``)."""
        w, _ = self.effective_weights(rows, u)
        mu_in, lam_in = u[..., 0], u[..., 1]
        mu, lam = q[..., 0:1], q[..., 1:2]
        x = jnp.asarray(x, jnp.float32)[..., None]
        grad = 0.5 * lam_in * ((x - mu_in) ** 2 - (mu - mu_in) ** 2 - 1.0 / lam)
        return jnp.clip(w - jnp.float32(self.learning_rate) * grad, -self.max_weight, self.max_weight)

    def target(self, y, positive):
        """The real target ``y`` (float32) for every network of ``positive`` (regression has no classes): ``y``
        broadcast against ``positive``, as ``y == positive`` is for labels."""
        y = jnp.asarray(y, jnp.float32)
        return jnp.broadcast_to(y, jnp.broadcast_shapes(y.shape, jnp.shape(positive)))

    def likelihood(self, q, x):
        """``N(x; mu, 1/lambda)``, the density, in float64."""
        return jnp.exp(self.log_likelihood(q, x))

    def log_likelihood(self, q, x):
        """``log N(x; mu, 1/lambda) = (log(lambda / 2 pi) - lambda (x - mu)^2) / 2`` in float64."""
        q = jnp.asarray(q).astype(jnp.float64)
        mu, lam = q[..., 0], q[..., 1]
        return 0.5 * (jnp.log(lam / (2.0 * jnp.pi)) - lam * (jnp.asarray(x, jnp.float64) - mu) ** 2)


def _dot(a, b):
    return jnp.einsum("...k,...k->...", a, b, precision=jax.lax.Precision.HIGHEST)


def _with_bias(gaussians):
    """``gaussians`` [..., K, 2] followed by the bias Gaussians ``(BIAS_MEANS, 1/BIAS_VARIANCE)``."""
    bias = jnp.array([[m, 1.0 / BIAS_VARIANCE] for m in BIAS_MEANS], jnp.float32)
    return jnp.concatenate([gaussians, jnp.broadcast_to(bias, gaussians.shape[:-2] + bias.shape)], axis=-2)
