"""Uniform reservoir samples of a stream, and merging two of them (docs/algorithm.md §4.3).

A reservoir of capacity ``R`` holds ``n <= R`` items in positions ``0 .. n-1`` and has been offered
``seen`` items (``Reservoir``: the engine's samples of record ids). These functions only decide positions.

All randomness is a counter-based hash of ``(seed, tag, segment start, step)``, so two tree levels that
start together sample identically, every implementation can draw the same numbers, and no generator
state is carried. The hash is the SplitMix64 finaliser applied in a chain (64-bit integer arithmetic,
a handful of vectorised operations; JAX's threefry keys lower to rolled loops on a CPU, which cost
more than the whole step they serve).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from nctl.core import native
from nctl.core.platform import by_platform
from nctl.deferred import jax, jnp


class Reservoir(NamedTuple):
    """A sample of record ids: ``ids [..., R]`` int32 (-1 empty) and, per sample, ``n`` held and ``seen``
    offered (int32)."""

    ids: jax.Array
    n: jax.Array
    seen: jax.Array


SEGMENT_TAG = 0
MERGE_TAG = 1
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)


def _mix(x):
    """SplitMix64 finaliser: a bijective scramble of a uint64."""
    x = x + _GOLDEN
    x = (x ^ (x >> np.uint64(30))) * _MIX1
    x = (x ^ (x >> np.uint64(27))) * _MIX2
    return x ^ (x >> np.uint64(31))


def event_key(seed, tag: int, start, t):
    """A uint64 word for one random event ``(tag, segment start, step)`` of a learner with ``seed``."""
    h = _mix(jnp.asarray(seed).astype(jnp.uint64) ^ np.uint64(tag))
    h = _mix(h ^ jnp.asarray(start).astype(jnp.uint64))
    return _mix(h ^ jnp.asarray(t).astype(jnp.uint64))


def draws(key, count: int):
    """``count`` independent uint64 words from one event word."""
    return _mix(key + jnp.arange(1, count + 1, dtype=jnp.uint64) * _GOLDEN)


def uniform(word):
    """A float64 in (0, 1) from a uint64 word (its top 53 bits)."""
    return ((word >> np.uint64(11)).astype(jnp.float64) + 0.5) * 2.0**-53


def offer(n, seen, capacity: int, key):
    """Algorithm R: the ``m``-th offered item is kept with probability ``R / m``, in a uniform position.

    Returns ``(position or -1, n', seen')``; while the reservoir is not full, the item is appended.
    """
    seen = seen + 1
    j = (uniform(key) * seen).astype(jnp.int32)  # uniform in 0 .. seen - 1
    position = jnp.where(n < capacity, n, jnp.where(j < capacity, j, -1))
    return position.astype(jnp.int32), jnp.minimum(n + 1, capacity).astype(jnp.int32), seen


def merge(n_a, seen_a, n_b, seen_b, capacity: int, key):
    """Positions of a merged reservoir drawn from the concatenation ``a[:R] ++ b[:R]``.

    If everything fits it is all kept (``a`` first). Otherwise each stored item stands for
    ``seen / n`` stream items and ``R`` of them are drawn by weighted sampling without replacement
    (Efraimidis-Spirakis: keep the ``R`` largest ``log(u) / weight``). Returns
    ``(positions [R] int32, n, seen)``; positions beyond ``n`` are -1.
    """
    slots = jnp.arange(capacity)
    valid = jnp.concatenate([slots < n_a, slots < n_b])
    weight_a = seen_a / jnp.maximum(n_a, 1)
    weight_b = seen_b / jnp.maximum(n_b, 1)
    weight = jnp.concatenate([jnp.full(capacity, weight_a), jnp.full(capacity, weight_b)])
    u = uniform(draws(key, 2 * capacity))
    score = jnp.where(valid, jnp.log(u) / weight, -jnp.inf)
    keep_all = jnp.where(slots < n_a, slots, jnp.where(slots < n_a + n_b, capacity + slots - n_a, -1))
    sampled = largest_first(score, capacity)
    n = jnp.minimum(n_a + n_b, capacity).astype(jnp.int32)
    positions = jnp.where(n_a + n_b <= capacity, keep_all, sampled)
    positions = jnp.where(slots < n, positions, -1).astype(jnp.int32)
    return positions, n, seen_a + seen_b


def largest_first(score, k: int):
    """The indices of the ``k`` largest of ``score`` [m] (each negative or -inf), largest first, equal
    scores in index order: ``jax.lax.top_k``'s answer. On a CPU where the kernel of §6.11 is built, one
    partial sort in it; else ``largest_first_by_sorts``."""
    if not native.enabled():
        return largest_first_by_sorts(score, k)
    return by_platform(score, cpu=lambda s: native.largest_first(s.astype(jnp.float64), k),
                       default=lambda s: largest_first_by_sorts(s, k))


def largest_first_by_sorts(score, k: int):
    """``largest_first`` from two sorts of integers, which XLA:CPU runs several times faster than the
    sort of a float key and an index that ``top_k`` takes (§6.9). The bits of negative doubles, read as
    integers, rise as the doubles fall; an element's place among the sorted bits (its rank, shared by
    equal scores) times ``m`` plus its index is a distinct integer key in the order wanted."""
    m = score.shape[0]
    bits = jax.lax.bitcast_convert_type(score.astype(jnp.float64), jnp.int64)
    rank = jnp.searchsorted(jnp.sort(bits), bits, side="left", method="scan_unrolled")
    return (jnp.sort(rank.astype(jnp.int64) * m + jnp.arange(m))[:k] % m).astype(jnp.int32)
