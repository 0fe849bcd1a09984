"""FMN model-pool rules for one neuron (docs/algorithm.md §4.5-§4.8).

When a segment of length >= L_min closes, its best member (the winner) refines the pool entry it was
copied from, is skipped because the pool already explains the segment, or is added; after every
closing segment of a step, the pool is cut back to its capacity. These functions decide; the engine
(``nctl.core.boundary``) scores the states and moves the data.
"""

from typing import NamedTuple

import numpy as np

from nctl.deferred import jax, jnp

REFINE, SKIP, ADD = 0, 1, 2
EVENTS = ("refine", "skip", "add", "evict")  # columns of the per-neuron event counters
EVICTION_POLICIES = ("fifo", "spacing")
# relative tie tolerance by the precision of the members' predictions (§4.8): log-likelihood differences below
# this share of the magnitude are ties; sums of logs of float32 predictions differ by more than 1e-9 between platforms
TIE_TOLERANCE = {"float32": 1e-6, "float64": 1e-9}


class PoolConfig(NamedTuple):
    """The pool's settings as the engine reads them; ``nctl.Pool`` checks them and makes this."""

    capacity: int = 15  # k stored states per neuron (k + 1 mixture members with the fresh model)
    min_segment: int = 32  # L_min, a power of two: shorter closing segments never touch the pool
    reservoir_size: int = 100  # R examples per segment / lineage reservoir
    refine_threshold: float = 0.0  # alpha: replace the parent when the winner beats it by more
    skip_threshold: float = 0.0  # beta: skip when the pool's evidence beats the winner's by more
    joint_evidence: bool = False  # skip evidence: per-example mixture (the authors') or joint
    eviction: str = "fifo"  # capacity rule: "fifo" (the authors') or "spacing"
    trained_members: int | None = None  # bounded mode (§5.3): members trained per node; None = all

    @property
    def min_segment_log2(self) -> int:
        return int(np.log2(self.min_segment))

    @property
    def members(self) -> int:
        """``M = k + 1``: the stored copies and the fresh model (last)."""
        return self.capacity + 1

    @property
    def lanes(self) -> int:
        """Rows trained per (slot, neuron, context): every member, or ``trained_members``."""
        return self.members if self.trained_members is None else self.trained_members

    @property
    def bounded(self) -> bool:
        return self.trained_members is not None


def member_log_prior(count, capacity: int):
    """Mixture prior of a node over ``count`` stored copies [N] (first ``count`` members) and the fresh
    model (last): fresh 1/2, each stored ``1/(2 count)``; fresh 1 with an empty pool. -> [k + 1, N]."""
    members = jnp.arange(capacity + 1)[:, None]
    stored = jnp.where(members < count, -jnp.log(2.0 * jnp.maximum(count, 1)), -jnp.inf)
    fresh = jnp.where(count > 0, jnp.log(0.5), 0.0)
    return jnp.where(members == capacity, fresh, stored).astype(jnp.float64)


def tie_tolerance(dtype) -> float:
    """The relative tie tolerance ``ε`` of §4.8 for members whose predictions are ``dtype``."""
    return TIE_TOLERANCE[np.dtype(dtype).name]


def beats(a, b, margin, tolerance: float):
    """``a - b > margin + τ``, ``τ = tolerance · max(1, |a|, |b|)``: differences within rounding of the
    magnitudes are ties (§4.8)."""
    return a - b > margin + tolerance * jnp.maximum(1.0, jnp.maximum(jnp.abs(a), jnp.abs(b)))


def select_winner(loglik, valid, tolerance: float):
    """The member with the largest segment log likelihood; ties (§4.8) go to the lowest index.
    loglik, valid: [M, ...] -> [...] int32."""
    best = jnp.max(jnp.where(valid, loglik, -jnp.inf), axis=0)
    tied = valid & ~beats(best, loglik, 0.0, tolerance)
    return jnp.argmax(tied, axis=0).astype(jnp.int32)


COUNTED_ORDER_MAX = 64  # axes this short are ordered by counting; longer ones (large pools) are sorted


def stable_order(keys):
    """The indices that sort ``keys`` [n, ...] ascending along the first axis, equal keys in index order
    (a stable argsort). Up to ``COUNTED_ORDER_MAX`` keys by counting: element ``i`` goes to position
    ``#{j: k_j < k_i} + #{j < i: k_j = k_i}``, n^2 comparisons and no sort, for the pool's short axes,
    where XLA:CPU's sort of a key and an index costs several times more (§6.9)."""
    n = keys.shape[0]
    if n > COUNTED_ORDER_MAX:
        return jnp.argsort(keys, axis=0, stable=True).astype(jnp.int32)
    index = jnp.arange(n, dtype=jnp.int32).reshape((n,) + (1,) * (keys.ndim - 1))
    mine, other = keys[:, None], keys[None, :]  # [i, j, ...]
    ahead = (other < mine) | ((other == mine) & (index[None, :] < index[:, None]))
    position = jnp.sum(ahead, axis=1, dtype=jnp.int32)  # [i, ...]
    return jnp.sum(jnp.where(position[None, :] == index[:, None], index[None, :], 0), axis=1, dtype=jnp.int32)


def evidence_start(records: int):
    """Accumulator of the skip test's pool evidence ``E0`` (§4.5 step 3) over a reservoir of ``records``:
    per-record probability sums, the log sum exp of per-member totals, and the member count."""
    return jnp.zeros(records, jnp.float64), jnp.float64(-jnp.inf), jnp.float64(0.0)


def evidence_add(acc, probs, members, used, joint: bool):
    """Add pool members with frozen probabilities ``probs`` [R, m] of the records' labels; ``members`` [m]
    says which count and ``used`` [R] which records."""
    sums, lse, count = acc
    if joint:
        totals = jnp.sum(jnp.where(used[:, None], jnp.log(probs), 0.0), axis=0)
        lse = jnp.logaddexp(lse, jax.nn.logsumexp(jnp.where(members, totals, -jnp.inf)))
    else:
        sums = sums + jnp.sum(jnp.where(members[None, :], probs, 0.0), axis=1)
    return sums, lse, count + jnp.sum(members)


def evidence(acc, used, joint: bool):
    """``E0``: per example ``sum_r log (sum_e P_e(x_r) / |M|)``; joint ``log (sum_e prod_r P_e(x_r) / |M|)``."""
    sums, lse, count = acc
    if joint:
        return lse - jnp.log(count)
    return jnp.sum(jnp.where(used, jnp.log(sums) - jnp.log(count), 0.0))


def prune(alive, age, order, now, cfg: PoolConfig):
    """States removed to bring the pool back to ``capacity`` once a step's closes are done (§4.7).

    alive, age, order: [E] (pool membership, step of the last add or replace, pool order key);
    now: the boundary's step (states stored at it have ``age == now``). -> removed [E] bool.
    """
    k = cfg.capacity
    if cfg.eviction == "fifo":
        youngest_first = jnp.sort(jnp.where(alive, age, -1))[::-1]
        cut = youngest_first[k]
        return alive & (age <= cut) & (jnp.sum(alive) > k)

    def remove_one(_, removed):
        live = alive & ~removed
        old = live & (age < now)
        # sort the live states by (age, order); the oldest stays, the rest of the old ones are candidates
        big = jnp.iinfo(jnp.int32).max
        rank = stable_order(jnp.where(live, age, big).astype(jnp.int64) * (2**32) + order)
        ages = jnp.where(live, age, now)[rank]
        after = jnp.append(ages[1:], now)
        before = jnp.concatenate([ages[:1], ages[:-1]])
        candidate = old[rank] & (jnp.arange(rank.shape[0]) > 0)
        gap = jnp.where(candidate, after - before, big)
        spacing_victim = rank[jnp.argmin(gap)]
        fallback = jnp.argmin(jnp.where(live & (age == now), order, big))  # states of this step, in pool order
        victim = jnp.where(jnp.any(candidate), spacing_victim, fallback)
        return removed.at[victim].set(removed[victim] | (jnp.sum(live) > k))

    # one state per round, as many rounds as the pool is over capacity (a round past that removes none)
    return jax.lax.fori_loop(0, jnp.maximum(jnp.sum(alive, dtype=jnp.int32) - k, 0), remove_one, jnp.zeros_like(alive))
