"""The Forget-Me-Not process over any base model: the dense, one-process form.

FMN (ALGORITHMS.md 4) is PTW whose nodes predict with a Bayesian mixture over a snapshot of a pool
of remembered base-model states plus a fresh model:
``nu_a(x_{a:b}) = sum_m lambda_m rho_m(x_{a:b})``, every member learning on the segment. When a
segment of length ``>= L_min`` closes, its best member refines, skips or enters the pool
(``nctl.core.pool``). Each tree level owns its own mixture here (dense copies), which is simple and
exact; the NCTL network (``nctl.core.network``) implements the same process for GGM neurons with
shared slots and lazily copied weight rows, and is tested against this module.

Step order (ALGORITHMS.md decisions): boundary processing and pool update, then predict, then learn.
"""

from typing import Any, NamedTuple, Sequence

import jax
import jax.numpy as jnp
from jax.nn import logsumexp, softmax

from nctl.core import pool as pool_rules
from nctl.core import reservoir, tree
from nctl.core.base import BaseModel, log_prob


class Records(NamedTuple):
    """Stored examples: base-model inputs and targets, leading axes ``[..., R]``."""

    inputs: Any
    x: jax.Array


class Pool(NamedTuple):
    states: Any  # [k, ...] stored base states
    valid: jax.Array  # [k] bool
    time: jax.Array  # [k] int32: step of the last write (add or refine)
    version: jax.Array  # [k] int32: incremented at every write of the entry
    lineage: Records  # [k, R, ...]: examples the entry's lineage was trained on
    lineage_n: jax.Array  # [k] int32
    lineage_seen: jax.Array  # [k] int32


class FMNState(NamedTuple):
    t: jax.Array  # int32: steps seen
    depth: jax.Array  # int32: current D
    members: Any  # [S, M, ...]: mixture members per level; member k is the fresh model
    loglik: jax.Array  # [S, M] float64: in-segment log-likelihood of each member
    logprior: jax.Array  # [S, M] float64: log mixture prior (-inf: no such member)
    src_version: jax.Array  # [S, k] int32: pool version each member was copied from (-1: none)
    log_b: jax.Array  # [S] float64
    start: jax.Array  # [S] int32: start step of each level's current node
    segment: Records  # [S, R, ...]: reservoir of each level's current segment
    segment_n: jax.Array  # [S] int32
    segment_seen: jax.Array  # [S] int32
    pool: Pool
    key: jax.Array  # PRNG key of all reservoir randomness


def init(
    base: BaseModel,
    cfg: pool_rules.PoolConfig,
    capacity: int,
    example_input: Any,
    key,
    depth: int = 0,
    initial_pool: Sequence[Any] = (),
) -> FMNState:
    """A fresh FMN with ``capacity`` tree levels; ``initial_pool`` pre-fills the model pool."""
    cfg = cfg.validate()
    k, size = cfg.capacity, cfg.reservoir_size
    if len(initial_pool) > k:
        raise ValueError(f"initial_pool has {len(initial_pool)} states but the pool holds {k}")
    stack = lambda tree_, n: jax.tree.map(lambda a: jnp.repeat(jnp.asarray(a)[None], n, axis=0), tree_)
    fresh = base.init()
    filled = list(initial_pool) + [fresh] * (k - len(initial_pool))
    states = jax.tree.map(lambda *a: jnp.stack(a), *filled) if k else stack(fresh, 0)
    valid = jnp.arange(k) < len(initial_pool)
    records = Records(jax.tree.map(lambda a: jnp.zeros((size,) + jnp.shape(a), jnp.asarray(a).dtype), example_input),
                      jnp.zeros(size, jnp.int32))
    zeros_k = jnp.zeros(k, jnp.int32)
    pool = Pool(states, valid, zeros_k, valid.astype(jnp.int32), stack(records, k), zeros_k, zeros_k)
    members, logprior, src_version = _new_segment(pool, fresh)
    zeros = jnp.zeros(capacity, jnp.float64)
    zeros_s = jnp.zeros(capacity, jnp.int32)
    return FMNState(
        t=jnp.int32(0),
        depth=jnp.int32(depth),
        members=stack(members, capacity),
        loglik=jnp.zeros((capacity, k + 1), jnp.float64),
        logprior=stack(logprior, capacity),
        src_version=stack(src_version, capacity),
        log_b=zeros,
        start=zeros_s + 1,
        segment=stack(records, capacity),
        segment_n=zeros_s,
        segment_seen=zeros_s,
        pool=pool,
        key=key,
    )


def _new_segment(pool: Pool, fresh):
    """Members of a node starting now: a copy of every pool state, then the fresh model."""
    members = jax.tree.map(lambda p, f: jnp.concatenate([p, f[None]]), pool.states, fresh)
    src_version = jnp.where(pool.valid, pool.version, -1)
    return members, pool_rules.member_log_prior(pool.valid), src_version


def _frozen_log_probs(base: BaseModel, state, records: Records):
    """``log P(x_s | state)`` of every stored example, without learning. -> [R]."""
    return jax.vmap(lambda inp, x: log_prob(base, state, inp, x))(records.inputs, records.x)


def update_pool(state: FMNState, level, t, base: BaseModel, cfg: pool_rules.PoolConfig) -> FMNState:
    """UPDATEMODELPOOL for the node of ``level`` whose segment just closed (ALGORITHMS.md 4.3)."""
    k, size = cfg.capacity, cfg.reservoir_size
    pool = state.pool
    take = lambda tree_, i: jax.tree.map(lambda a: a[i], tree_)
    winner_index = pool_rules.select_winner(state.loglik[level], state.logprior[level])
    winner = take(state.members, (level, winner_index))
    parent_index = jnp.minimum(winner_index, k - 1)
    stored = winner_index < k
    parent_current = (
        stored & pool.valid[parent_index] & (pool.version[parent_index] == state.src_version[level, parent_index])
    )
    lineage = take(pool.lineage, parent_index)
    lineage_n = jnp.where(parent_current, pool.lineage_n[parent_index], 0)
    lineage_seen = jnp.where(parent_current, pool.lineage_seen[parent_index], 0)
    used = jnp.arange(size) < lineage_n
    gain = jnp.sum(jnp.where(used, _frozen_log_probs(base, winner, lineage)
                             - _frozen_log_probs(base, take(pool.states, parent_index), lineage), 0.0))

    segment = take(state.segment, level)
    segment_n = state.segment_n[level]
    logp_pool = jax.vmap(lambda s: _frozen_log_probs(base, s, segment))(pool.states)
    e0 = pool_rules.h0_evidence(logp_pool, segment_n, pool.valid, cfg.joint_evidence)
    e1 = jnp.sum(jnp.where(jnp.arange(size) < segment_n, _frozen_log_probs(base, winner, segment), 0.0))
    action = pool_rules.decide(stored, parent_current, gain, e0, e1, jnp.any(pool.valid), cfg)

    key = reservoir.event_key(state.key, reservoir.MERGE_TAG, state.start[level], t)
    positions, merged_n, merged_seen = reservoir.merge(
        lineage_n, lineage_seen, segment_n, state.segment_seen[level], size, key
    )
    merged = jax.tree.map(lambda a, b: jnp.concatenate([a, b])[positions], lineage, segment)

    target = jnp.where(action == pool_rules.REFINE, parent_index, pool_rules.insertion_index(pool.valid, pool.time, t, cfg))
    write = action != pool_rules.SKIP
    put = lambda old, new: old.at[target].set(jnp.where(write, new, old[target]))
    pool = Pool(
        states=jax.tree.map(put, pool.states, winner),
        valid=pool.valid.at[target].set(pool.valid[target] | write),
        time=put(pool.time, t),
        version=pool.version.at[target].add(write.astype(jnp.int32)),
        lineage=jax.tree.map(put, pool.lineage, merged),
        lineage_n=put(pool.lineage_n, merged_n),
        lineage_seen=put(pool.lineage_seen, merged_seen),
    )
    return state._replace(pool=pool)


_LEVEL_FIELDS = ("members", "loglik", "logprior", "src_version", "log_b", "start", "segment", "segment_n", "segment_seen")


def begin_step(state: FMNState, base: BaseModel, cfg: pool_rules.PoolConfig, prior: tree.TreePrior) -> FMNState:
    """Advance to step ``t + 1``: pool updates for the closing levels, root growth, restarts."""
    t = state.t + 1

    def boundary(s: FMNState) -> FMNState:
        j_c = tree.completed_level(t, s.depth)
        log_r = logsumexp(s.logprior + s.loglik, axis=1)
        w_c = tree.subtree_log_weight(s.log_b, log_r, s.depth, j_c, prior)
        if cfg.capacity:
            eligible_below = s.depth - cfg.min_segment_log2

            def close(level, s):
                return jax.lax.cond(level <= eligible_below, lambda s: update_pool(s, level, t, base, cfg), lambda s: s, s)

            s = jax.lax.fori_loop(j_c, s.depth + 1, close, s)
        grow = j_c == 0
        s = jax.lax.cond(grow, _grow, lambda s: s, s)
        i = j_c - 1 + grow
        restart = jnp.arange(s.log_b.shape[0]) > i
        members, logprior, src_version = _new_segment(s.pool, base.init())
        pick = lambda old, new: jnp.where(restart.reshape((-1,) + (1,) * jnp.ndim(new)), new, old)
        return s._replace(
            t=t,
            depth=s.depth + grow,
            members=jax.tree.map(pick, s.members, members),
            loglik=pick(s.loglik, jnp.zeros_like(s.loglik[0])),
            logprior=pick(s.logprior, logprior),
            src_version=pick(s.src_version, src_version),
            log_b=pick(s.log_b, 0.0).at[i].set(w_c),
            start=pick(s.start, t),
            segment_n=pick(s.segment_n, 0),
            segment_seen=pick(s.segment_seen, 0),
        )

    return jax.lax.cond(t >= 2, boundary, lambda s: s._replace(t=t), state)


def _grow(s: FMNState) -> FMNState:
    fields = {name: jax.tree.map(tree.shift_levels, getattr(s, name)) for name in _LEVEL_FIELDS}
    return s._replace(**fields)


def level_posterior(state: FMNState, prior: tree.TreePrior):
    """Level posterior ``pi`` [S], member posteriors ``alpha`` [S, M] and ``log FMN(x_{1:t})``."""
    member_logits = state.logprior + state.loglik
    log_r = logsumexp(member_logits, axis=1)
    level_logits = tree.level_log_prior(state.log_b, state.depth, prior) + log_r
    return softmax(level_logits), softmax(member_logits, axis=1), logsumexp(level_logits)


def prob(state: FMNState, base: BaseModel, inp, prior: tree.TreePrior):
    """``P(x_t = 1 | x_<t) = sum_j pi_j sum_m alpha_{j,m} rho_{j,m}(1)`` (after ``begin_step``)."""
    pi, alpha, _ = level_posterior(state, prior)
    q = jax.vmap(jax.vmap(base.prob, in_axes=(0, None)), in_axes=(0, None))(state.members, inp)
    return jnp.sum(pi * jnp.sum(alpha * q, axis=1))


def learn(state: FMNState, base: BaseModel, inp, x, cfg: pool_rules.PoolConfig) -> FMNState:
    """Every member of every level learns ``x_t``; each level's reservoir is offered the example."""
    logp = jax.vmap(jax.vmap(lambda m: log_prob(base, m, inp, x)))(state.members)
    members = jax.vmap(jax.vmap(base.update, in_axes=(0, None, None)), in_axes=(0, None, None))(state.members, inp, x)
    keys = jax.vmap(lambda r: reservoir.event_key(state.key, reservoir.SEGMENT_TAG, r, state.t))(state.start)
    positions, n, seen = jax.vmap(lambda n, s, key: reservoir.offer(n, s, cfg.reservoir_size, key))(
        state.segment_n, state.segment_seen, keys
    )
    levels = jnp.arange(positions.shape[0])
    safe = jnp.maximum(positions, 0)
    record = Records(inp, jnp.asarray(x, jnp.int32))

    def store(column, value):
        kept = column[levels, safe]
        new = jnp.where((positions >= 0).reshape((-1,) + (1,) * jnp.ndim(value)), value, kept)
        return column.at[levels, safe].set(new)

    segment = jax.tree.map(store, state.segment, record)
    return state._replace(members=members, loglik=state.loglik + logp, segment=segment, segment_n=n, segment_seen=seen)


def step(state: FMNState, base: BaseModel, inp, x, cfg: pool_rules.PoolConfig, prior: tree.TreePrior):
    """One full step; returns the new state, ``P(x_t = 1 | x_<t)``, ``log P(x_t | x_<t)`` and the
    log evidence ``log FMN_D(x_{1:t})`` of the current tree."""
    state = begin_step(state, base, cfg, prior)
    p1 = prob(state, base, inp, prior)
    pi, alpha, _ = level_posterior(state, prior)
    logp = jax.vmap(jax.vmap(lambda m: log_prob(base, m, inp, x)))(state.members)
    log_px = logsumexp(jnp.log(pi)[:, None] + jnp.log(alpha) + logp)
    state = learn(state, base, inp, x, cfg)
    return state, p1, log_px, level_posterior(state, prior)[2]
