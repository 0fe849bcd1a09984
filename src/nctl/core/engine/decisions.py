"""The decision at a segment's close, for every neuron of a layer: REFINE, SKIP or ADD (docs/algorithm.md
§4.5, §4.8, §6.3).

Two tests, each comparing log likelihoods on stored records: ``refines`` (the winner beats its parent,
both frozen, on the parent's lineage) and ``skips`` (the pool explains the segment better than the
winner). Both score rows through ``scores``: with XLA's gathers, in batches of neurons, or with the CPU
kernel, which reads the rows and the records in place.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from nctl.core import mixing, native, pool
from nctl.core.engine.config import EngineConfig, uses_kernel
from nctl.core.engine.members import member_row, member_weights, source_entry
from nctl.core.engine.ops import any_net, when
from nctl.core.engine.state import Net, State
from nctl.core.platform import by_platform

SCORE_BYTES = 8 * 2**20  # working set of one batch of neurons scored at a close by XLA's gathers


class Close(NamedTuple):
    """What every neuron's decision at one close reads (§4.5)."""

    state: State
    positive: jax.Array
    slot: jax.Array
    q: jax.Array  # index of this close at the boundary: the states stored by closes 0 .. q - 1 are pending
    winner: jax.Array  # [N]
    parent: jax.Array  # [N] the winner's source entry when it still reads it, else -1
    parent_in_pool: jax.Array  # [N]
    trained: jax.Array  # [N] bounded mode: the winner holds a lane
    nonempty: jax.Array  # [N] the pool holds a state
    carried: jax.Array  # [N, R] lineage the winner carries
    carried_n: jax.Array  # [N]
    segment: jax.Array  # [R] record ids of the segment's reservoir
    segment_used: jax.Array  # [R]
    in_pool: jax.Array  # [E, N]
    pending_slot: jax.Array  # [X] the slot of each pending state (stored by a longer segment closing here)
    pending_winner: jax.Array  # [X, N] its member in that slot
    pending_valid: jax.Array  # [X, N] it is stored


class _Layer(NamedTuple):
    """One layer's neurons at a close, and how their rows are scored."""

    net: Net
    layer: int
    cfg: EngineConfig
    close: Close
    kernel: bool  # the CPU kernel scores the layer's neurons, all at once; else XLA, in batches
    batch: int  # neurons per batch of XLA's gathers
    segment_x: jax.Array  # [R] the segment's records' targets
    segment_contexts: jax.Array  # [N_i, R] the contexts the steps gated the segment's records with


def layer_actions(net: Net, layer: int, cfg: EngineConfig, close: Close):
    """REFINE, SKIP or ADD for every neuron of ``layer`` (§4.5) [N_i] int32."""
    shape = cfg.layers[layer]
    # XLA gathers the rows a test reads: neurons in batches whose stored rows at the records' contexts
    # take about SCORE_BYTES, each batch running every test. A layer whose neurons each take more (a
    # large layer, or a single neuron) is scored by the CPU kernel where it computes the layer: it reads
    # the rows and the records in place, all the layer's neurons at once, and a test costs only the
    # neurons that need it; without the kernel such a layer goes one neuron at a time, running only the
    # tests it needs (§6.3).
    per_neuron = cfg.pool.reservoir_size * (cfg.pool.capacity + 3) * shape.width * 4
    batch = int(max(1, min(shape.neurons, SCORE_BYTES // per_neuron)))
    segment = jnp.maximum(close.segment, 0)
    at = _Layer(net, layer, cfg, close, kernel=batch == 1 and uses_kernel(cfg, shape), batch=batch,
                segment_x=cfg.rows.target(close.state.records.y[segment], close.positive),
                segment_contexts=net.record_contexts[segment, shape.offset:shape.offset + shape.neurons]
                .astype(jnp.int32).T)
    if at.kernel:
        return _decide(at, jnp.arange(shape.neurons))
    return jax.lax.map(lambda n: _decide(at, n[None])[0], jnp.arange(shape.neurons),
                       batch_size=batch if batch > 1 else None)


def _decide(at: _Layer, neurons):
    """The action of ``neurons`` [B]: a refine decides alone; an untrained winner (bounded mode) is stored."""
    cols = at.cfg.layers[at.layer].offset + neurons
    close = at.close
    refined = _where_needed(at, close.parent_in_pool[cols], refines, neurons)
    skipped = _where_needed(at, close.nonempty[cols] & ~refined, skips, neurons)
    action = jnp.where(refined, pool.REFINE, jnp.where(skipped, pool.SKIP, pool.ADD))
    return jnp.where(close.trained[cols], action, pool.SKIP).astype(jnp.int32)


def _where_needed(at: _Layer, needed, test, neurons):
    """``needed & test(at, neurons, needed)``; scored alone or by the kernel, the test runs only where some
    neuron of some class network needs it."""
    if at.batch > 1:
        return needed & test(at, neurons, needed)
    return needed & when(any_net(jnp.any(needed)), lambda _: test(at, neurons, needed), jnp.zeros_like(needed))


def refines(at: _Layer, neurons, needed):
    """The winner beats its parent, both frozen, on the parent's lineage (§4.5 step 2); [B] bool."""
    close, cfg = at.close, at.cfg
    cols = cfg.layers[at.layer].offset + neurons
    ids = jnp.maximum(close.carried[cols], 0)  # [B, R]
    x = cfg.rows.target(close.state.records.y[ids], close.positive)
    c = at.net.record_contexts[ids, cols[:, None]].astype(jnp.int32)
    parent = jnp.maximum(close.parent[cols], 0)[:, None]
    stored, member = scores(at, neurons, needed, ids, c, x, parent, close.slot[None], close.winner[cols][None],
                            jnp.ones_like(needed)[None], 1)
    new, old = jnp.log(member(0)), jnp.log(stored[..., 0])
    carried = jnp.arange(ids.shape[-1]) < close.carried_n[cols][:, None]
    # the two log likelihoods compared, not their difference: the tie tolerance scales with them (§4.8)
    new, old = (jnp.sum(jnp.where(carried, q, 0.0), axis=-1) for q in (new, old))
    return pool.beats(new, old, cfg.pool.refine_threshold, pool.tie_tolerance(cfg.rows.dtype))


def skips(at: _Layer, neurons, needed):
    """The pool explains the segment better than the winner (§4.5 step 3): ``E0 - E1 > beta``; [B] bool."""
    close, cfg = at.close, at.cfg
    cols = cfg.layers[at.layer].offset + neurons
    used, joint = close.segment_used, cfg.pool.joint_evidence
    roster = at.net.pool.roster[:, cols].T  # [B, k]: the pool at the boundary's start, in pool order
    alive = (roster >= 0) & close.in_pool[jnp.maximum(roster, 0), cols[:, None]]
    # members: the winner, then the states stored by the longer segments closing at this boundary
    slots = jnp.concatenate([close.slot[None], close.pending_slot])
    members = jnp.concatenate([close.winner[cols][None], close.pending_winner[:, cols]])
    on = jnp.concatenate([jnp.ones_like(needed)[None], close.pending_valid[:, cols]])
    stored, member = scores(at, neurons, needed, jnp.maximum(close.segment, 0), at.segment_contexts[neurons],
                            at.segment_x, jnp.maximum(roster, 0), slots, members, on, 1 + close.q)  # [B, R, k]
    add = jax.vmap(lambda acc, probs, members: pool.evidence_add(acc, probs, members, used, joint))

    def add_pending(j, acc):
        return add(acc, member(1 + j)[..., None], close.pending_valid[j, cols][:, None])

    start = jax.tree.map(lambda a: jnp.broadcast_to(a, neurons.shape + a.shape), pool.evidence_start(used.shape[0]))
    acc = jax.lax.fori_loop(0, close.q, add_pending, add(start, stored, alive))
    e0 = jax.vmap(lambda acc: pool.evidence(acc, used, joint))(acc)
    e1 = jnp.sum(jnp.where(used, jnp.log(member(0)), 0.0), axis=-1)
    return pool.beats(e0, e1, cfg.pool.skip_threshold, pool.tie_tolerance(cfg.rows.dtype))


def scores(at: _Layer, neurons, needed, ids, c, x, entries, slots, members, on, count):
    """``q(x)`` of ``neurons`` [B] on records ``ids`` ([B, R], or [R] for every neuron) at contexts ``c``
    [B, R] with targets ``x`` (shaped as ``ids``): ``(stored, member)``, ``stored`` [B, R, J] under the
    pool entries ``entries`` [B, J] and ``member(m)`` [B, R] under the member ``members[m]`` [B] of slot
    ``slots[m]`` ([M]), which is scored where ``on[m]`` [B] (it holds a state) and ``m < count``. Neurons
    not ``needed`` [B] may be left unscored."""
    net, layer, cfg = at.net, at.layer, at.cfg
    shape = cfg.layers[layer]
    in_axes = (0, 0, 0, 0 if ids.ndim == 2 else None)  # each neuron's records, or the same for all

    def gathered_stored(pool_rows, u):  # [B, R, J]
        one = lambda n, c, e, u: cfg.rows.predict(pool_rows[n, c[:, None], e], u[:, None])
        return jax.vmap(one, in_axes)(neurons, c, entries, u)

    def gathered_member(m, u):  # [B, R]
        one = lambda n, member, c, u: cfg.rows.predict(member_weights(net, layer, cfg, slots[m], member, n, c), u)
        return jax.vmap(one, in_axes)(neurons, members[m], c, u)

    if not at.kernel:
        u = _record_inputs(at, ids)
        return cfg.rows.likelihood(gathered_stored(net.arena.pool_rows[layer], u), x[..., None]), \
            lambda m: cfg.rows.likelihood(gathered_member(m, u), x)

    # the kernel scores the pool entries and the members in one pass over the records (other
    # platforms: the rows gathered, the members one by one)
    def gathered(pool_rows):  # [B, R, J + M]
        u = _record_inputs(at, ids)
        empty = jnp.full((slots.shape[0],) + c.shape, 0.5, cfg.rows.dtype)
        q = jax.lax.fori_loop(0, count, lambda m, q: q.at[m].set(gathered_member(m, u)), empty)
        return jnp.concatenate([gathered_stored(pool_rows, u), jnp.moveaxis(q, 0, -1)], axis=-1)

    block, lane, owns = member_row(net, layer, cfg, slots[:, None, None], members[..., None],
                                   neurons[None, :, None], c[None])  # [M, B, R]
    entry = source_entry(net, layer, cfg, slots[:, None], members, neurons[None])  # [M, B]
    rows = jnp.where(owns, jnp.maximum(block, 0) * net.arena.blocks[layer].shape[-2] + lane, -2 - entry[..., None])
    table, offset, bound = _input_table(at)
    scored = on & needed & (jnp.arange(slots.shape[0]) < count)[:, None]
    q = by_platform(net.arena.pool_rows[layer], cpu=lambda pool_rows: native.pool_predictions(
        pool_rows, net.arena.blocks[layer], jnp.where(needed, neurons, -1), c, entries, rows, scored, table, ids, offset,
        bound, mixing.BIAS_LOGIT, cfg.rows.init_value(shape.fan_in), cfg.rows.prob_eps), default=gathered)
    q = cfg.rows.likelihood(q, x[..., None])
    J = entries.shape[-1]
    return q[..., :J], lambda m: jax.lax.dynamic_index_in_dim(q, J + m, axis=-1, keepdims=False)


def _input_table(at: _Layer):
    """Where the layer's input logits of the records lie: ``(table, offset, bound)``, the logits of record
    ``i`` being ``clip(table[i, offset : offset + K - 1], -bound, bound)`` (its bias input is last)."""
    if at.layer == 0:
        return at.close.state.records.z, 0, at.cfg.rows.feature_bound()
    return at.net.hidden, at.cfg.rows.values_per_input * sum(at.cfg.layer_sizes[: at.layer - 1]), float("inf")


def _record_inputs(at: _Layer, ids):
    """The layer's inputs [..., K] (input logits; or [..., K, 2] Gaussians) of records ``ids`` [...]."""
    table, offset, bound = _input_table(at)
    rows = at.cfg.rows
    if at.layer == 0:
        return rows.record_base_inputs(jnp.clip(table[ids][..., :at.cfg.n_features], -bound, bound))
    count = rows.values_per_input * at.cfg.layer_sizes[at.layer - 1]
    return rows.record_inputs(jnp.clip(table[ids][..., offset: offset + count], -bound, bound))
