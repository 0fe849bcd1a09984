"""Half-space gating: each neuron owns fixed random hyperplanes that pick its weight row.

Bit ``h`` of neuron ``n`` is ``1[v_{n,h} . z > o_{n,h}]`` and the context is
``c_n(z) = sum_h bit_h 2^h`` (little-endian), so ``C = 2^s`` contexts (GLN paper; NCTL section 4).
Hyperplanes are sampled once and never learned.
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp

OFFSET_STD = 0.05  # hyperplane offsets ~ N(0, 0.05^2) (DeepMind GLN)


class Gates(NamedTuple):
    normals: jax.Array  # [N, s, d] float32, unit-norm rows
    offsets: jax.Array  # [N, s] float32


def init_gates(key, n_neurons: int, n_bits: int, n_features: int, offset_std: float = OFFSET_STD) -> Gates:
    """Normalised Gaussian normals and Gaussian offsets for ``n_neurons`` neurons."""
    k_normal, k_offset = jax.random.split(key)
    normals = jax.random.normal(k_normal, (n_neurons, n_bits, n_features), jnp.float32)
    normals = normals / jnp.linalg.norm(normals, axis=-1, keepdims=True)
    offsets = offset_std * jax.random.normal(k_offset, (n_neurons, n_bits), jnp.float32)
    return Gates(normals, offsets)


def contexts(gates: Gates, z) -> jax.Array:
    """Context index of every neuron for side information ``z`` [d] -> [N] int32."""
    margin = jnp.einsum("nsd,d->ns", gates.normals, z.astype(jnp.float32), precision=jax.lax.Precision.HIGHEST)
    return _index(margin > gates.offsets)


def neuron_contexts(gates: Gates, z) -> jax.Array:
    """Context of neuron ``n`` for its own side information ``z[n]``: [N, d] -> [N] int32."""
    margin = jnp.einsum("nsd,nd->ns", gates.normals, z.astype(jnp.float32), precision=jax.lax.Precision.HIGHEST)
    return _index(margin > gates.offsets)


def _index(bits):
    """``sum_h bit_h 2^h`` over the last axis."""
    weights = jnp.left_shift(jnp.int32(1), jnp.arange(bits.shape[-1], dtype=jnp.int32))
    return jnp.sum(bits.astype(jnp.int32) * weights, axis=-1, dtype=jnp.int32)
