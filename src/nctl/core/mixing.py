"""The GGM's inputs and constants: probabilities as clipped logits, and Bernoulli likelihoods.

A geometric mixture predicts ``GEO_w(x=1; p) = sigma(w . logit(p))`` (NCTL section 4); its rows'
prediction and learning step are ``nctl.core.rows.GGMRows``, and this module gives what they read and
what their predictions are scored by.
"""

import numpy as np

from nctl.deferred import jnp

PROB_EPS = 0.01  # probabilities are clipped to [eps, 1 - eps] (DeepMind GLN's GLN_EPS)
MAX_WEIGHT = 200.0  # weights are projected onto the cube [-w_max, w_max]^K (DeepMind GLN)
BIAS_LOGIT = 1.0  # every layer gets the constant input sigma(1), whose logit is 1 (DeepMind GLN)


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


def prob(q, x):
    """``q(x)`` in float64 of a clipped prediction ``q`` that ``x = 1``: ``q`` or ``1 - q`` (exact in
    float64 for a float32 ``q``)."""
    q = jnp.asarray(q).astype(jnp.float64)
    return jnp.where(x > 0, q, 1.0 - q)


def log_prob(q, x):
    """``log q(x)`` in float64: one logarithm, of ``q`` or of ``1 - q``."""
    return jnp.log(prob(q, x))
