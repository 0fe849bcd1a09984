"""FMN model-pool decisions for one neuron (ALGORITHMS.md 4.3, 4.4), shared by every implementation.

When a segment of length >= L_min closes, the member with the highest in-segment log-likelihood
(the winner) either refines the pool entry it was copied from, is skipped because the pool already
explains the segment (Bayesian hypothesis test), or is added (evicting an entry if the pool is full).
"""

from typing import NamedTuple

import jax.numpy as jnp
import numpy as np
from jax.nn import logsumexp

REFINE, SKIP, ADD = 0, 1, 2
EVICTION_POLICIES = ("fifo", "spacing")


class PoolConfig(NamedTuple):
    capacity: int = 15  # k stored states per neuron (k + 1 mixture members with the fresh model)
    min_segment: int = 32  # L_min: shorter closing segments never touch the pool
    reservoir_size: int = 100  # R examples per segment / lineage reservoir
    refine_threshold: float = 0.0  # alpha: refine when the winner beats its parent by more
    skip_threshold: float = 0.0  # beta: skip when H0 beats H1 by more
    joint_evidence: bool = True  # H0 evidence: joint marginal likelihood (True) or per-example mixture
    eviction: str = "fifo"  # which entry a full pool gives up: "fifo" or "spacing"

    def validate(self) -> "PoolConfig":
        if self.capacity < 0 or self.min_segment < 1 or self.reservoir_size < 1:
            raise ValueError(f"invalid pool configuration {self}")
        if self.eviction not in EVICTION_POLICIES:
            raise ValueError(f"unknown eviction policy {self.eviction!r}; choose from {EVICTION_POLICIES}")
        return self

    @property
    def min_segment_log2(self) -> int:
        """Closing level ``j`` is eligible iff ``D - j >= ceil(log2 L_min)``."""
        return int(np.ceil(np.log2(self.min_segment)))


def member_log_prior(pool_valid):
    """Mixture prior of a new segment: fresh 1/2, each of the |M| stored states 1/(2|M|).

    With an empty pool the fresh model gets weight 1. pool_valid: [k] -> [k + 1] (fresh last).
    """
    size = jnp.sum(pool_valid)
    stored = jnp.where(pool_valid, -jnp.log(2.0 * jnp.maximum(size, 1)), -jnp.inf)
    fresh = jnp.where(size > 0, jnp.log(0.5), 0.0)
    return jnp.append(stored, fresh).astype(jnp.float64)


def select_winner(loglik, logprior):
    """Index of the member with the highest segment log-likelihood (members with prior 0 excluded).

    Ties go to the lowest index, i.e. stored states before the fresh model. [M] -> int32.
    """
    return jnp.argmax(jnp.where(logprior > -jnp.inf, loglik, -jnp.inf)).astype(jnp.int32)


def h0_evidence(logp_pool, n_examples, pool_valid, joint: bool):
    """Log evidence that the pool explains a reservoir of examples.

    joint: ``log (1/|M|) sum_e prod_s P_e(x_s)``; per-example: ``sum_s log (1/|M|) sum_e P_e(x_s)``.
    logp_pool: [k, R] frozen log-probabilities; only the first ``n_examples`` columns count.
    """
    used = jnp.arange(logp_pool.shape[1]) < n_examples
    logp = jnp.where(used[None, :], logp_pool, 0.0)
    logp = jnp.where(pool_valid[:, None], logp, -jnp.inf)
    log_size = jnp.log(jnp.maximum(jnp.sum(pool_valid), 1))
    if joint:
        return logsumexp(jnp.sum(logp, axis=1)) - log_size
    per_example = logsumexp(logp, axis=0) - log_size
    return jnp.sum(jnp.where(used, per_example, 0.0))


def decide(winner_stored, parent_current, refine_gain, e0, e1, pool_nonempty, cfg: PoolConfig):
    """REFINE if a stored winner beats its unchanged parent on the parent's lineage reservoir by more
    than alpha; else SKIP if the pool's evidence beats the winner's by more than beta; else ADD."""
    refine = winner_stored & parent_current & (refine_gain > cfg.refine_threshold)
    skip = pool_nonempty & (e0 - e1 > cfg.skip_threshold)
    return jnp.where(refine, REFINE, jnp.where(skip, SKIP, ADD)).astype(jnp.int32)


def insertion_index(pool_valid, pool_time, now, cfg: PoolConfig):
    """Where an added state goes: the first free entry, else the eviction policy's victim.

    fifo: the entry written longest ago (ALGORITHMS.md 4.4).
    spacing: keep the write times spread over the whole past. With the new state counted at ``now``,
    evict the entry ``i`` whose removal leaves the smallest gap ``t_next(i) - t_prev(i)``; the oldest
    entry is never evicted. Task-free: it reads only write times. pool_valid, pool_time: [k].
    """
    free = jnp.argmin(pool_valid)
    if cfg.eviction == "fifo":
        victim = jnp.argmin(pool_time)
    else:
        order = jnp.argsort(pool_time, stable=True)
        times = pool_time[order]
        after = jnp.append(times[1:], now)
        before = jnp.concatenate([times[:1], times[:-1]])
        gap = jnp.where(jnp.arange(times.shape[0]) == 0, jnp.iinfo(jnp.int32).max, after - before)
        victim = order[jnp.argmin(gap)]
    return jnp.where(jnp.all(pool_valid), victim, free).astype(jnp.int32)
