"""One step: predict, learn and record; and the end of a step: the pool update when due, the
restart of the closed slots (docs/algorithm.md §3.2, §4.2).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from nctl.core import gating, reservoir, tree
from nctl.core.pool import member_log_prior
from nctl.core.reservoir import Reservoir
from nctl.core.engine.arena import free_blocks
from nctl.core.engine.config import EngineConfig, uses_kernel
from nctl.core.engine.layer import layer_pass
from nctl.core.engine.ops import per_net, unique_or_drop
from nctl.core.engine.pool_update import update_pool
from nctl.core.engine.posterior import assign_lanes, mixture_posterior, posterior
from nctl.core.engine.state import Net, State
from nctl.core.platform import by_platform


class Forward(NamedTuple):
    net: Net
    p: jax.Array  # output neuron's prediction (shaped rows.prediction_shape)
    hidden: jax.Array  # [H] inputs of layers 2..L as a record keeps them (the step's record)
    contexts: jax.Array  # [N] every neuron's context (the step's record)
    logq: tuple  # per layer [S, M, N_i] the members' log q(x) when learning (else empty)


def forward(net: Net, sched: tree.Schedule, z, x, cfg: EngineConfig, learn: bool) -> Forward:
    """Every layer in order: member predictions, neuron outputs ``p`` mixed from them by the posteriors
    (``rows.mix``, §4.2), and, when learning, every trained row's update and every member's ``log q(x)``."""
    post = posterior(net, sched, cfg)
    if cfg.pool.bounded:
        lanes, since = assign_lanes(net, sched, cfg)
        net = net.with_slots(lanes=lanes, lane_since=since)
    contexts = gating.contexts(net.gates, z)
    u = cfg.rows.base_inputs(z)
    live = (jnp.arange(cfg.slots) < sched.size)[:, None]
    hidden, logqs = [], []
    for index, shape in enumerate(cfg.layers):
        cols = slice(shape.offset, shape.offset + shape.neurons)
        if index:
            hidden.append(cfg.rows.input_values(u))
        net, q, logq = layer_pass(net, index, cfg, sched, contexts[cols], u, x, learn)
        p = cfg.rows.mix(post.alpha[:, :, cols], post.mass[:, cols], q, live)
        if learn:
            logqs.append(logq)
        u = cfg.rows.layer_inputs(p)
    hidden = jnp.concatenate(hidden) if hidden else jnp.zeros(0, jnp.float32)
    return Forward(net, p[0], hidden, contexts, tuple(logqs))


def _learn_net(net: Net, sched: tree.Schedule, z, x, cfg: EngineConfig):
    out = forward(net, sched, z, x, cfg, learn=True)
    live = (jnp.arange(cfg.slots) < sched.size)[:, None, None]
    logq = [jnp.where(live, layer_logq, 0.0) for layer_logq in out.logq]

    def per_layer(loglik):  # on a CPU a concatenation kept XLA from vectorising the update
        for shape, layer_logq in zip(cfg.layers, logq):
            loglik = loglik.at[:, :, shape.offset:shape.offset + shape.neurons].add(layer_logq)
        return loglik

    # on a GPU the per-layer form let XLA fuse it so that a step's prediction and a later call's parted in
    # their last float32 bit (docs/algorithm.md §6.9); the same sums either way
    loglik = by_platform(out.net.slots.loglik, cpu=per_layer,
                         default=lambda loglik: loglik + jnp.concatenate(logq, axis=2))
    net = out.net.with_slots(loglik=loglik)
    return net, out.p, (out.hidden, out.contexts)


def step(state: State, z, y, cfg: EngineConfig):
    """Learn one example: predict, learn, record; returns the state (its boundary not yet processed)
    and the pre-update predictions [classes]."""
    sched = state.schedule
    x = cfg.rows.target(y, jnp.asarray(cfg.positives))
    nets, p, (hidden, contexts) = per_net(lambda net, x: _learn_net(net, sched, z, x, cfg), state.nets, x,
                                          keep_axis=any(uses_kernel(cfg, shape) for shape in cfg.layers))
    return _record(state._replace(nets=nets), z, y, hidden, contexts, cfg), p


@jax.named_scope("record")
def _record(state: State, z, y, hidden, contexts, cfg: EngineConfig) -> State:
    """Store step ``t``'s inputs, label, hidden logits and contexts, and offer it to every live slot's
    reservoir."""
    sched, nets, records = state.schedule, state.nets, state.records
    row = records.free[(sched.t - 1) % cfg.chunk]
    nets = nets._replace(hidden=nets.hidden.at[:, row].set(hidden),
                         record_contexts=nets.record_contexts.at[:, row].set(contexts.astype(cfg.context_dtype)))
    keys = reservoir.event_key(state.key, reservoir.SEGMENT_TAG, sched.start, sched.t)
    positions, n, seen = jax.vmap(lambda n, s, k: reservoir.offer(n, s, cfg.pool.reservoir_size, k))(
        records.segment.n, records.segment.seen, keys)
    live = jnp.arange(cfg.slots) < sched.size
    keep = live & (positions >= 0)
    records = records._replace(
        z=records.z.at[row].set(jnp.asarray(z, jnp.float32)),
        y=records.y.at[row].set(y),
        segment=Reservoir(
            records.segment.ids.at[unique_or_drop(jnp.arange(cfg.slots), keep, cfg.slots), jnp.maximum(positions, 0)].set(
                row, mode="drop", unique_indices=True),
            jnp.where(live, n, records.segment.n),
            jnp.where(live, seen, records.segment.seen)),
    )
    return state._replace(nets=nets, records=records)


@jax.named_scope("advance")
def advance(state: State, cfg: EngineConfig, pool_update: bool) -> State:
    """Process the boundary of the next step: tree weights, pool updates of the segments that close
    (when ``pool_update``; the record rows are then reserved by ``boundary``), pruning, popping the
    closed slots and pushing the new one (§3.2, §4.2-§4.7)."""
    old = state.schedule
    adv = tree.advance(old)
    nets = state.nets
    if pool_update and cfg.max_closes:  # a pool, and segments long enough to update it
        nets = update_pool(nets, state, adv, cfg)
    nets = per_net(lambda net: _restart(net, old, adv, cfg), nets)
    segment = state.records.segment
    records = state.records._replace(segment=segment._replace(n=segment.n.at[adv.kept].set(0),
                                                              seen=segment.seen.at[adv.kept].set(0)))
    return state._replace(schedule=adv.new, nets=nets, records=records)


@jax.named_scope("restart")
def _restart(net: Net, old: tree.Schedule, adv: tree.Advance, cfg: EngineConfig) -> Net:
    """PTW weight of the completed node, free the popped slots' blocks, push the new slot (§3.2, §6.2):
    ``free_blocks`` empties its block table."""
    live = (jnp.arange(cfg.slots) < old.size)[:, None, None]
    log_r = mixture_posterior(jnp.where(live, net.slots.logprior + net.slots.loglik, 0.0), cfg.rows.dtype)[1]  # [S, N]
    log_r = log_r[tree.canonical_slots(old)][:, None]  # [S, 1, N]: the same for every split probability
    w_c = tree.node_log_weight(net.slots.log_b, log_r, old.depth, adv.completed, tree.stacked(cfg.prior))  # [A, N] (§3.6)
    log_b = jnp.where(adv.grow, tree.shift_levels(net.slots.log_b), net.slots.log_b)
    i = adv.closing - 1
    log_b = jnp.where(jnp.arange(cfg.slots)[:, None, None] > i, 0.0, log_b).at[i].set(w_c)
    net = free_blocks(net, adv.kept, old.size, cfg)
    pushed = adv.kept
    count = jnp.sum(net.pool.roster >= 0, axis=0)
    net = net.with_slots(
        log_b=log_b,
        loglik=net.slots.loglik.at[pushed].set(0.0),
        logprior=net.slots.logprior.at[pushed].set(member_log_prior(count, cfg.pool.capacity)),
        source=net.slots.source.at[pushed].set(net.pool.roster),
        detached=net.slots.detached.at[pushed].set(False),
    )
    if cfg.pool.bounded:
        net = net.with_slots(lanes=net.slots.lanes.at[pushed].set(-1), lane_since=net.slots.lane_since.at[pushed].set(0))
    return net
