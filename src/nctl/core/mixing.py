"""Geometric mixing and the Gated Geometric Mixer (GGM) for a single weight row.

NCTL section 4, GLN paper: ``GEO_w(x=1; p) = sigma(w . logit(p))``, trained online by projected
gradient descent on the log loss, whose gradient is ``(GEO_w(1; p) - x) * logit(p)``.
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

PROB_EPS = 0.01  # probabilities are clipped to [eps, 1 - eps] (DeepMind GLN's GLN_EPS)
MAX_WEIGHT = 200.0  # weights are projected onto the cube [-w_max, w_max]^K (DeepMind GLN)
BIAS_LOGIT = 1.0  # every layer gets the constant input sigma(1), whose logit is 1 (DeepMind GLN)


class GGMConfig(NamedTuple):
    """Hyper-parameters shared by every GGM of a network (static under jit)."""

    learning_rate: float = 1e-3
    prob_eps: float = PROB_EPS
    max_weight: float = MAX_WEIGHT


def logit_bound(prob_eps: float) -> float:
    """``logit(1 - eps)``: the largest input logit after clipping (4.595 for eps = 0.01)."""
    return float(np.log1p(-prob_eps) - np.log(prob_eps))


def input_logits(probs, prob_eps: float = PROB_EPS):
    """``logit(clip(p, eps, 1 - eps))`` of a probability vector, with the bias logit appended.

    probs: [K-1] -> [K] float32.
    """
    p = jnp.clip(probs, prob_eps, 1.0 - prob_eps)
    u = jnp.log(p) - jnp.log1p(-p)
    return jnp.append(u.astype(jnp.float32), jnp.float32(BIAS_LOGIT))


def feature_logits(z, prob_eps: float = PROB_EPS):
    """Layer-0 inputs ``p_0 = sigma(z)`` as logits: ``logit(clip(sigma(z))) = clip(z, +-logit(1-eps))``.

    Computed in the closed form (no round trip through sigma) and with the bias logit appended.
    z: [d] -> [d + 1] float32.
    """
    bound = logit_bound(prob_eps)
    return jnp.append(jnp.clip(z, -bound, bound).astype(jnp.float32), jnp.float32(BIAS_LOGIT))


def predict(weights, logits, prob_eps: float = PROB_EPS):
    """``q = clip(sigma(w . u), eps, 1 - eps)``; weights, logits: [K] -> scalar float32."""
    a = jnp.dot(weights, logits, precision=jax.lax.Precision.HIGHEST)
    return jnp.clip(1.0 / (1.0 + jnp.exp(-a)), prob_eps, 1.0 - prob_eps)


def prob(q, x):
    """``q(x)`` in float64 of a clipped prediction ``q`` that ``x = 1``: ``q`` or ``1 - q`` (exact in
    float64 for a float32 ``q``)."""
    q = jnp.asarray(q).astype(jnp.float64)
    return jnp.where(x > 0, q, 1.0 - q)


def log_prob(q, x):
    """``log q(x)`` in float64: one logarithm, of ``q`` or of ``1 - q``."""
    return jnp.log(prob(q, x))


def update(weights, logits, q, x, cfg: GGMConfig):
    """One projected gradient step: ``w <- clip(w - lr (q - x) u, -w_max, w_max)``.

    ``q`` is the clipped prediction, so a saturated but wrong neuron still learns (docs/algorithm.md
    §1.3). weights, logits: [K] float32.
    """
    step = jnp.float32(cfg.learning_rate) * (q - x.astype(jnp.float32))
    return jnp.clip(weights - step * logits, -cfg.max_weight, cfg.max_weight)
