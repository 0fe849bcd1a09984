"""Half-space gating: each neuron owns fixed random hyperplanes that pick its weight row.

Bit ``h`` of neuron ``n`` is ``1[v_{n,h} . z > o_{n,h}]`` and the context is
``c_n(z) = sum_h bit_h 2^h`` (little-endian), so ``C = 2^s`` contexts (GLN paper; NCTL section 4).
Hyperplanes are sampled once and never learned.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from nctl.core import threefry
from nctl.deferred import jax, jnp

OFFSET_STD = 0.05  # hyperplane offsets ~ N(0, 0.05^2) (DeepMind GLN)
_SQRT2 = np.float32(np.sqrt(2))  # jax.random.normal is sqrt(2) erfinv(u)
_NORMAL_RANGE = (np.nextafter(np.float32(-1), np.float32(0)), np.float32(1))  # u of jax.random.normal
_LANES = 8  # float32 lanes of a 256-bit vector: XLA:CPU prefers 256-bit vectors ("prefer-vector-width")


class Gates(NamedTuple):
    normals: jax.Array  # [N, s, d] float32, unit-norm rows
    offsets: jax.Array  # [N, s] float32


def draw_gates(key, n_neurons: int, n_bits: int, n_features: int, offset_std: float = OFFSET_STD) -> Gates:
    """Normals ``v = g / |g|`` with ``g ~ N(0, I)`` and offsets ``o ~ N(0, offset_std^2)`` for ``n_neurons``
    neurons, from ``key`` (uint32[2]) by ``threefry``, in numpy (docs/algorithm.md §1.2): ``g = sqrt(2) e``
    with ``e = erfinv(u)`` (``threefry.normal``'s arithmetic), ``v = e (sqrt(2) / |g|)`` with ``1 / |g|``
    rounded once to float32, and ``o = e' float32(offset_std sqrt(2))``; ``|g|^2`` is summed in 8 lanes of
    fused ``acc + g_j^2``, lane ``j mod 8``, then halves added pairwise. (That is the arithmetic XLA:CPU
    compiles ``jax.random.normal`` and the norm to, which drew the hyperplanes before; the offsets are the
    same bits, the normals differ in a fraction of rows by an ulp or three: tests/core/test_threefry.py.)
    ``key`` uint32[2] -> normals [N, s, d], offsets [N, s] float32."""
    k_normal, k_offset = threefry.split(key)
    e = threefry.erfinv(threefry.uniform(k_normal, (n_neurons, n_bits, n_features), *_NORMAL_RANGE))
    g = e * _SQRT2
    with np.errstate(divide="ignore"):  # no features: no normals to scale
        inverse_norm = (1 / np.sqrt(_lane_sum_of_squares(g).astype(np.float64))).astype(np.float32)
    normals = e * (inverse_norm * _SQRT2)[..., None]
    offsets = threefry.erfinv(threefry.uniform(k_offset, (n_neurons, n_bits), *_NORMAL_RANGE))
    return Gates(normals, offsets * np.float32(offset_std * np.sqrt(2)))


def _lane_sum_of_squares(g):
    """``sum_j g_j^2`` over the last axis as XLA:CPU's vectorised reduction adds it: lane ``l`` of 8 holds
    ``g_l^2`` and then ``fma(g_j, g_j, lane)`` for ``j = l + 8, l + 16, ...``; the lanes are then halved
    pairwise, ``(l, l + 4)``, ``(l, l + 2)``, ``(0, 1)``. ``g`` [..., d] float32 -> [...] float32."""
    d = g.shape[-1]
    padded = np.concatenate([g, np.zeros(g.shape[:-1] + (-d % _LANES,), np.float32)], axis=-1)
    chunks = padded.reshape(g.shape[:-1] + (padded.shape[-1] // _LANES, _LANES))
    if chunks.shape[-2] == 0:  # no features (the sequence predictors' one context): an empty sum
        return np.zeros(g.shape[:-1], np.float32)
    lanes = chunks[..., 0, :] * chunks[..., 0, :]
    for c in range(1, chunks.shape[-2]):
        lanes = threefry._fma(chunks[..., c, :], chunks[..., c, :], lanes)
    while lanes.shape[-1] > 1:
        half = lanes.shape[-1] // 2
        lanes = lanes[..., :half] + lanes[..., half:]
    return lanes[..., 0]


def network_gates(key, n_nets: int, n_features: int, layer_sizes: tuple, context_bits: int) -> tuple[Gates, ...]:
    """The hyperplanes of every layer of ``n_nets`` class networks from ``key`` (uint32[2], e.g.
    ``threefry.key(seed)``): class network ``c`` draws layer ``i`` with
    ``fold_in(split(fold_in(key, 1), n_nets)[c], i)``; per layer ``Gates(normals [nets, N_i, s, d], offsets
    [nets, N_i, s])``. Numpy throughout: no program to compile, and no JAX needed."""
    class_keys = threefry.split(threefry.fold_in(np.asarray(key, np.uint32), 1), n_nets)
    layers = []
    for i, n in enumerate(layer_sizes):
        nets = [draw_gates(threefry.fold_in(k, i), n, context_bits, n_features) for k in class_keys]
        layers.append(Gates(np.stack([g.normals for g in nets]), np.stack([g.offsets for g in nets])))
    return tuple(layers)


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
