"""The GLN and Gaussian GLN learners' calls on the JAX engine (``XlaCalls``), imported where a learner runs
on JAX: compiled calls of ``COMPILED_ROWS`` rows."""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from nctl.core import gln

COMPILED_ROWS = 256  # rows of every compiled learning call (fewer are padded to it): one program per learner

@partial(jax.jit, static_argnums=(5,), donate_argnums=(0,))
def _gln_chunk(layers, Z, Y, n, positive, rows):
    return gln.run_chunk(layers, Z, Y, n, positive, rows)


_gln_predict = jax.jit(gln.predict_many, static_argnums=(2,))


class XlaCalls:
    """The native calls' learn and predict (``GLNCalls``, ``GaussianGLNCalls``) on JAX, for the GLN and the
    Gaussian GLN (a row model of either): compiled chunks of ``COMPILED_ROWS`` rows (rows and targets padded to
    that shape), each handing the state's buffers to the call and holding the new state in ``layers``."""

    def __init__(self, layers, rows, positive):
        self.layers, self._rows, self._positive = layers, rows, jnp.asarray(positive)

    def learn(self, Z, Y):
        out = []
        for a in range(0, len(Z), COMPILED_ROWS):
            n = min(COMPILED_ROWS, len(Z) - a)
            Zc, Yc = np.zeros((COMPILED_ROWS, Z.shape[1]), np.float32), np.zeros(COMPILED_ROWS, Y.dtype)
            Zc[:n], Yc[:n] = Z[a:a + n], Y[a:a + n]
            self.layers, p = _gln_chunk(self.layers, Zc, Yc, n, self._positive, self._rows)
            out.append(np.asarray(p[:n]))
        return np.concatenate(out)

    def predict(self, Z):
        return np.asarray(_gln_predict(self.layers, jnp.asarray(Z), self._rows))
