"""Row models: what one stored row of a model predicts and how it learns (docs/algorithm.md §6).

The engine keeps every model state as rows, one per context, and never looks inside them; a row
model says how a row predicts ``P(x = 1)`` from the layer's input logits ``u`` and how it learns ``x``.

* ``GGMRows``: a gated geometric mixer row ``w`` [K] float32 (§1.3): ``q = clip(sigma(w . u))``,
  ``w <- clip(w - lr (q - x) u)``.
* ``KTRows``: Krichevsky-Trofimov counts ``(n_0, n_1)`` float64, which ignore the inputs:
  ``q = (n_1 + 1/2) / (n_0 + n_1 + 1)``; the sequence predictors of ``nctl.sequence`` use it.
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp

from nctl.core import mixing


class GGMRows(NamedTuple):
    learning_rate: float = 1e-3
    prob_eps: float = mixing.PROB_EPS
    max_weight: float = mixing.MAX_WEIGHT
    weight_init: str = "zeros"

    dtype = jnp.float32

    def width(self, fan_in: int) -> int:
        """Row length for a layer with ``fan_in`` inputs (bias included)."""
        return fan_in

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


class KTRows(NamedTuple):
    dtype = jnp.float64

    def width(self, fan_in: int) -> int:
        return 2

    def init_value(self, fan_in: int) -> float:
        return 0.0

    def predict(self, rows, u):
        """``(n_1 + 1/2) / (n_0 + n_1 + 1)``; rows [..., 2] -> [...] float64."""
        return (rows[..., 1] + 0.5) / (rows[..., 0] + rows[..., 1] + 1.0)

    def update(self, rows, u, q, x):
        x = jnp.asarray(x, rows.dtype)
        return rows + jnp.stack([1.0 - x, x])

