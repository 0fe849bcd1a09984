"""nctl.core.threefry against jax.random, and the hyperplanes drawn with it (gating.draw_gates, in numpy)
against the same draw in JAX, as nctl made it before (``jax_gates``, ``jax_network_gates``). 64-bit mode is
on, as importing nctl sets it."""

from fractions import Fraction

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import nctl  # noqa: F401  (turns JAX's 64-bit mode on, which changes how PRNGKey reads a seed)
from nctl.core import gating, gln, threefry

SEEDS = [0, 1, 42, -1, 2**31, 2**32 - 1, 2**32, 2**40 + 5, -2**40, 2**63 - 1, -2**63]
SHAPES = [(1,), (2,), (7,), (8,), (9,), (3, 5), (2, 3, 4), (1000,)]


def _same_bits(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and a.dtype == b.dtype and bool((a.view(np.uint32) == b.view(np.uint32)).all())


@pytest.mark.parametrize("seed", SEEDS)
def test_keys_fold_in_split_and_bits_equal_jax(seed):
    k, kj = threefry.key(seed), jax.random.PRNGKey(seed)
    assert _same_bits(k, kj)
    for data in [0, 1, 7, 2**31, 2**32 - 1]:
        assert _same_bits(threefry.fold_in(k, data), jax.random.fold_in(kj, data))
    for n in [1, 2, 3, 10]:
        assert _same_bits(threefry.split(k, n), jax.random.split(kj, n))
    for shape in SHAPES:
        assert _same_bits(threefry.random_bits(k, shape), jax.random.bits(kj, shape, jnp.uint32))
    for data in [0, 3]:  # a 64-bit draw: a fresh NCTL state's reservoir seed
        folded = jax.random.fold_in(kj, data)
        assert threefry.uint64_bits(threefry.fold_in(k, data)) == np.uint64(jax.random.bits(folded, dtype=jnp.uint64))


def test_out_of_range_seed_and_data_are_refused_like_jax():
    with pytest.raises(OverflowError):
        threefry.key(2**63)
    with pytest.raises(OverflowError):
        threefry.fold_in(threefry.key(0), 2**32)


@pytest.mark.parametrize("seed", SEEDS[:6])
def test_uniform_and_normal_equal_jax_bit_for_bit(seed):
    low = np.nextafter(np.float32(-1), np.float32(0))
    for i, shape in enumerate(SHAPES + [(3, 70001)]):  # the last one spans several of normal's chunks
        k = threefry.fold_in(threefry.key(seed), i)
        kj = jax.random.fold_in(jax.random.PRNGKey(seed), i)
        assert _same_bits(threefry.uniform(k, shape, low, np.float32(1)),
                          jax.random.uniform(kj, shape, jnp.float32, low, 1.0))
        assert _same_bits(threefry.normal(k, shape), jax.random.normal(kj, shape, jnp.float32))


def test_erfinv_equals_xla_on_every_seventh_possible_uniform():
    """normal() sees 2^23 possible uniforms (23 random bits); all of them matched when measured, a seventh
    of them (1.2M) are checked here."""
    low = np.nextafter(np.float32(-1), np.float32(0))
    mantissas = np.arange(0, 2**23, 7, dtype=np.uint32)
    f = (mantissas | np.float32(1).view(np.uint32)).view(np.float32) - np.float32(1)
    u = np.maximum(low, f * np.float32(2) + low)
    assert _same_bits(threefry.erfinv(u), jax.jit(jax.lax.erf_inv)(u))


def _exact_fma(a, b, c) -> np.float32:
    """``a b + c`` rounded once to float32 (ties to even), from exact rationals."""
    exact = Fraction(float(a)) * Fraction(float(b)) + Fraction(float(c))
    below = np.float32(float(exact))
    candidates = [below, np.nextafter(below, np.float32(-np.inf)), np.nextafter(below, np.float32(np.inf))]
    errors = [abs(Fraction(float(x)) - exact) for x in candidates]
    best = min(errors)
    ties = [x for x, e in zip(candidates, errors) if e == best]
    return min(ties, key=lambda x: int(x.view(np.uint32)) & 1)


def test_fma_rounds_once_even_where_the_float64_sum_is_a_float32_tie():
    one_ulp = np.float32(2**-23)
    # a b = 2^-24 - 2^-70, so a b + c lies just below the midpoint 1 + 3 2^-24: the float64 sum rounds onto
    # the midpoint and a plain float32 cast would then round up to the even neighbour
    a = np.array([2**-24 * (1 + 2**-23)], np.float32)
    b = np.array([1 - 2**-23], np.float32)
    c = np.float32(1) + one_ulp
    assert threefry._fma(a, b, c)[0] == _exact_fma(a[0], b[0], c) == c
    rng = np.random.default_rng(0)
    x, y, z = (rng.standard_normal(2000).astype(np.float32) * np.float32(10) ** rng.integers(-3, 4, 2000)
               for _ in range(3))
    fused = threefry._fma(x, y, z)
    assert all(fused[i] == _exact_fma(x[i], y[i], z[i]) for i in range(2000))


# measured with 3 seeds over d = 2..784, N = 3..16, s = 1..10: offsets equal, normals differ in ~17% of
# rows by at most 3 ulp. XLA:CPU's 1/|g| is the CPU's rsqrtss estimate refined by two Newton steps (its last
# bit depends on the vendor's estimate table) and for some d (2, 3, 17, 64, 100, 784) its sum of squares is
# added in another order than draw_gates' 8 lanes; draw_gates rounds 1/|g| once.
MAX_NORMAL_ULPS = 3


def jax_gates(key, n_neurons, n_bits, n_features):
    """The hyperplanes drawn by jax.random: normalised Gaussian normals, offsets N(0, 0.05^2)."""
    k_normal, k_offset = jax.random.split(key)
    normals = jax.random.normal(k_normal, (n_neurons, n_bits, n_features), jnp.float32)
    normals = normals / jnp.linalg.norm(normals, axis=-1, keepdims=True)
    return gating.Gates(normals, gating.OFFSET_STD * jax.random.normal(k_offset, (n_neurons, n_bits), jnp.float32))


def jax_network_gates(seed, n_nets, n_features, layer_sizes, context_bits):
    """``gln.network_gates`` with jax.random, compiled as one program."""
    def draw(key):
        class_keys = jax.random.split(jax.random.fold_in(key, 1), n_nets)
        return tuple(jax.vmap(lambda k: jax_gates(jax.random.fold_in(k, i), n, context_bits, n_features))(class_keys)
                     for i, n in enumerate(layer_sizes))

    return jax.jit(draw)(jax.random.PRNGKey(seed))


def _ulps(a, b):
    """Distance in float32 steps between same-signed values."""
    return np.abs(np.asarray(a).view(np.int32).astype(np.int64) - np.asarray(b).view(np.int32).astype(np.int64))


@pytest.mark.parametrize("n_features, layer_sizes, context_bits", [(2, (3, 1), 1), (8, (16, 8, 1), 4),
                                                                   (13, (5, 1), 10), (100, (4, 1), 3)])
def test_network_gates_offsets_equal_and_normals_within_measured_ulps(n_features, layer_sizes, context_bits):
    for seed in [0, 5]:
        ref = jax_network_gates(seed, 2, n_features, layer_sizes, context_bits)
        mine = gln.network_gates(seed, 2, n_features, layer_sizes, context_bits)
        for r, m in zip(ref, mine):
            assert _same_bits(m.offsets, r.offsets)
            assert m.normals.shape == r.normals.shape and m.normals.dtype == np.float32
            assert (np.sign(m.normals) == np.sign(np.asarray(r.normals))).all()
            assert _ulps(m.normals, r.normals).max() <= MAX_NORMAL_ULPS


def test_drawn_gates_equal_compiled_jax_gates_for_one_key():
    """Compiled as one program: run op by op, JAX rounds ``offset_std sqrt(2) e`` twice."""
    k = threefry.fold_in(threefry.key(3), 2)
    ref = jax.jit(jax_gates, static_argnums=(1, 2, 3))(jnp.asarray(k), 6, 3, 16)
    mine = gating.draw_gates(k, 6, 3, 16)
    assert _same_bits(mine.offsets, ref.offsets)
    assert _ulps(mine.normals, ref.normals).max() <= MAX_NORMAL_ULPS
