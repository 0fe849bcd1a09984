"""Pool updates at a boundary (docs/algorithm.md §4.4-§4.7, §6.3, §6.4).

``update_pool`` runs at the boundary of a step ``t = 1 (mod P)``, after the step before has been
learned and before the closed slots are popped. Per class network and neuron it:

1. takes the decision of §4.5 for every eligible closing segment, longest first; a stored winner is
   *pending* (scored from its slot's rows) and a replace only marks the parent as out of the pool;
2. prunes the pool, pending states included, back to capacity (§4.7);
3. writes every surviving pending state into an entry that neither stays in the pool nor is the
   source of a state being written (preferring entries no live slot still reads), after detaching the
   live slots that read the entry: their lineage is copied into the slot and, in exact mode, their
   remaining rows are materialised into blocks (§6.3, §6.4).
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp

from nctl.core import native, pool, reservoir
from nctl.core.reservoir import Reservoir
from nctl.core.engine.arena import allocate, fill_blocks
from nctl.core.engine.config import EngineConfig, kernel_trains
from nctl.core.engine.decisions import Close, layer_actions
from nctl.core.engine.members import member_weights
from nctl.core.engine.ops import any_net, per_net, when
from nctl.core.engine.records import read_entries
from nctl.core.engine.state import Net, State, pool_roster
from nctl.core.platform import by_platform


class Pending(NamedTuple):
    """States stored at this boundary, one per close (``[X, ...]``), written after pruning."""

    valid: jax.Array  # [X, N] bool
    slot: jax.Array  # [X] int32: the closing slot holding the winner
    winner: jax.Array  # [X, N] int32: member index in that slot
    source: jax.Array  # [X, N] int32: the cell the winner was copied from (-1: the fresh model)
    lineage: Reservoir  # [X, N, R]
    born: jax.Array  # [X, N] int32
    order: jax.Array  # [X, N] int32


@jax.named_scope("pool_update")
def update_pool(nets: Net, state: State, adv, cfg: EngineConfig) -> Net:
    positives = jnp.asarray(cfg.positives)
    return per_net(lambda net, positive: _update_net(net, positive, state, adv, cfg), nets, positives)


def _update_net(net: Net, positive, state: State, adv, cfg: EngineConfig) -> Net:
    X, N, R = cfg.max_closes, cfg.neurons, cfg.pool.reservoir_size
    now = adv.new.t
    n_closes = jnp.clip(adv.new.depth - cfg.pool.min_segment_log2 - adv.closing + 1, 0, X)
    pending = Pending(
        valid=jnp.zeros((X, N), bool), slot=jnp.zeros(X, jnp.int32), winner=jnp.zeros((X, N), jnp.int32),
        source=jnp.full((X, N), -1, jnp.int32),
        lineage=Reservoir(jnp.full((X, N, R), -1, jnp.int32), jnp.zeros((X, N), jnp.int32), jnp.zeros((X, N), jnp.int32)),
        born=jnp.zeros((X, N), jnp.int32), order=jnp.zeros((X, N), jnp.int32))

    def close(q, carry):
        in_pool, pending, events = carry
        return _close(net, positive, state, adv.kept - 1 + q, q, now, in_pool, pending, events, cfg)

    in_pool, pending, events = jax.lax.fori_loop(0, n_closes, close, (net.pool.in_pool, pending, net.pool.events))
    net = net.with_pool(events=events, next_order=net.pool.next_order + X)
    return _prune_and_write(net, in_pool, pending, n_closes, now, adv.kept, cfg)


def _close(net: Net, positive, state: State, slot, q, now, in_pool, pending: Pending, events, cfg: EngineConfig):
    """§4.5 for the segment of ``slot`` (the ``q``-th close of this boundary), every neuron."""
    k, N = cfg.pool.capacity, cfg.neurons
    neurons = jnp.arange(N)
    records = state.records
    tolerance = pool.tie_tolerance(cfg.rows.dtype)
    winner = pool.select_winner(net.slots.loglik[slot], net.slots.logprior[slot] > -jnp.inf, tolerance)  # [N]
    stored = winner < k
    member = jnp.minimum(winner, k - 1)
    source = net.slots.source[slot, member, neurons]
    attached = stored & (source >= 0) & ~net.slots.detached[slot, member, neurons]
    parent = jnp.where(attached, source, -1)
    parent_in_pool = attached & in_pool[jnp.maximum(source, 0), neurons]
    if cfg.pool.bounded:
        trained = jnp.any(net.slots.lanes[slot] == winner[:, None], axis=-1)
    else:
        trained = jnp.ones(N, bool)

    # the lineage the winner carries (§4.3): its source's, as copied, or none for the fresh model
    from_entry = lambda a: a[jnp.maximum(source, 0), neurons]
    from_slot = lambda a: a[slot, member, neurons]
    def pick(entry, copied, none):
        expand = lambda m: m.reshape(m.shape + (1,) * (entry.ndim - 1))
        return jnp.where(expand(attached), entry, jnp.where(expand(stored), copied, none))

    carried = pick(from_entry(net.pool.lineage.ids), from_slot(net.slots.lineage.ids), -1)
    carried_n = pick(from_entry(net.pool.lineage.n), from_slot(net.slots.lineage.n), 0)
    carried_seen = pick(from_entry(net.pool.lineage.seen), from_slot(net.slots.lineage.seen), 0)

    segment = records.segment.ids[slot]
    segment_used = jnp.arange(cfg.pool.reservoir_size) < records.segment.n[slot]
    nonempty = jnp.any(in_pool, axis=0) | jnp.any(pending.valid & (jnp.arange(pending.valid.shape[0]) < q)[:, None],
                                                  axis=0)
    context = Close(state, positive, slot, q, winner, parent, parent_in_pool, trained, nonempty, carried, carried_n,
                    segment, segment_used, in_pool, pending.slot, pending.winner, pending.valid)
    action = jnp.concatenate([layer_actions(net, layer, cfg, context) for layer in range(len(cfg.layers))])
    refine = action == pool.REFINE

    key = reservoir.event_key(state.key, reservoir.MERGE_TAG, state.schedule.start[slot], now)
    positions, merged_n, merged_seen = jax.vmap(
        lambda n, seen: reservoir.merge(n, seen, records.segment.n[slot], records.segment.seen[slot],
                                        cfg.pool.reservoir_size, key))(carried_n, carried_seen)
    candidates = jnp.concatenate([carried, jnp.broadcast_to(segment, carried.shape)], axis=1)
    merged = jnp.where(positions >= 0, jnp.take_along_axis(candidates, jnp.maximum(positions, 0), axis=1), -1)

    in_pool = in_pool.at[jnp.maximum(source, 0), neurons].set(in_pool[jnp.maximum(source, 0), neurons] & ~refine)
    pending = Pending(
        valid=pending.valid.at[q].set(action != pool.SKIP),
        slot=pending.slot.at[q].set(slot),
        winner=pending.winner.at[q].set(winner),
        source=pending.source.at[q].set(jnp.where(stored, source, -1)),
        lineage=jax.tree.map(lambda a, v: a.at[q].set(v), pending.lineage, Reservoir(merged, merged_n, merged_seen)),
        born=pending.born.at[q].set(jnp.where(refine, net.pool.born[jnp.maximum(source, 0), neurons], now)),
        order=pending.order.at[q].set(net.pool.next_order + q),
    )
    events = events + jax.nn.one_hot(action, 4, dtype=jnp.int32)
    return in_pool, pending, events


def _prune_and_write(net: Net, in_pool, pending: Pending, n_closes, now, kept, cfg: EngineConfig) -> Net:
    E, X, N, k = cfg.entries, cfg.max_closes, cfg.neurons, cfg.pool.capacity
    neurons = jnp.arange(N)
    alive = jnp.concatenate([in_pool, pending.valid])
    age = jnp.concatenate([net.pool.age, jnp.full((X, N), now, jnp.int32)])
    order = jnp.concatenate([net.pool.order, pending.order])
    removed = jax.vmap(lambda a, g, o: pool.prune(a, g, o, now, cfg.pool), in_axes=1, out_axes=1)(alive, age, order)
    net = net.with_pool(events=net.pool.events.at[:, 3].add(jnp.sum(removed, axis=0, dtype=jnp.int32)))
    in_pool = in_pool & ~removed[:E]
    writes = pending.valid & ~removed[E:]  # [X, N]

    # targets: out of the pool, not read by a state being written; entries no live slot reads first
    read = writes & (pending.source >= 0)  # a winner's untrained rows are read from its source cell
    read_by_write = jnp.zeros((E, N), bool).at[jnp.where(read, pending.source, E), neurons].set(True, mode="drop")
    pinned = read_entries(net, kept, cfg)
    usable = ~in_pool & ~read_by_write
    rank = pool.stable_order(jnp.where(usable, pinned.astype(jnp.int32), 2) * E + jnp.arange(E, dtype=jnp.int32)[:, None])
    nth = jnp.cumsum(writes, axis=0) - 1  # [X, N]
    target = jnp.take_along_axis(rank, jnp.maximum(nth, 0), axis=0)  # [X, N]

    def write(q, net):
        return when(any_net(jnp.any(writes[q])), lambda net: _write(net, pending, q, writes[q], target[q], now, kept, cfg),
                           net)

    net = net.with_pool(in_pool=in_pool)
    net = jax.lax.fori_loop(0, n_closes, write, net)  # the states of this boundary's closes
    return net.with_pool(roster=pool_roster(net.pool.in_pool, net.pool.order, k))


def _write(net: Net, pending: Pending, q, writes, target, now, kept, cfg: EngineConfig) -> Net:
    """Store pending state ``q`` in entry ``target`` [N] of the neurons in ``writes`` [N]."""
    net = detach(net, writes, target, kept, cfg)
    neurons = jnp.arange(cfg.neurons)
    slot, winner = pending.slot[q], pending.winner[q]
    pool_rows = list(net.arena.pool_rows)
    for layer, shape in enumerate(cfg.layers):
        cols = slice(shape.offset, shape.offset + shape.neurons)
        entry = jnp.where(writes[cols], target[cols], cfg.entries)  # out of range: dropped
        pool_rows[layer] = _store_rows(net, layer, slot, winner[cols], entry, cfg)
    at = (jnp.where(writes, target, cfg.entries), neurons)
    put = lambda a, v: a.at[at].set(v, mode="drop")
    return net.with_arena(pool_rows=tuple(pool_rows)).with_pool(
        in_pool=put(net.pool.in_pool, True),
        age=put(net.pool.age, now),
        order=put(net.pool.order, pending.order[q]),
        born=put(net.pool.born, pending.born[q]),
        lineage=jax.tree.map(lambda a, v: put(a, v[q]), net.pool.lineage, pending.lineage),
    )


def _store_rows(net: Net, layer: int, slot, winner, entry, cfg: EngineConfig):
    """The layer's pool rows with member ``winner[i]`` of ``slot`` stored in entry ``entry[i]`` of each
    neuron ``i`` (out of range: none), every context: by the CPU kernel where it runs (it copies the rows
    in place, §6.11), else neuron by neuron."""
    by_loop = lambda rows: jax.lax.fori_loop(0, cfg.layers[layer].neurons,
                                             partial(_write_neuron, net, layer, slot, winner, entry, cfg), rows)
    if not kernel_trains(cfg.rows):
        return by_loop(net.arena.pool_rows[layer])
    shape, slots, arena = cfg.layers[layer], net.slots, net.arena
    stamps = arena.stamps[layer] if cfg.pool.bounded else None
    kernel = lambda rows: native.store_rows(rows, arena.blocks[layer], stamps, slots.block_of, slots.lanes,
                                            slots.lane_since, slots.source, slot, winner, entry, shape.offset,
                                            cfg.rows.init_value(shape.fan_in))
    return by_platform(net.arena.pool_rows[layer], cpu=kernel, default=by_loop)


def _write_neuron(net: Net, layer: int, slot, winner, entry, cfg: EngineConfig, i, rows):
    """Neuron ``i``'s rows of member ``winner[i]`` of ``slot`` at every context into cell ``entry[i]`` of
    ``rows``, the layer's pool rows (§6.3): one neuron's C rows are in flight, not the layer's. They are
    read from ``rows``, which differs from the pool only at the neurons already written; reading the
    pool from before the loop would make XLA keep it, a copy of every cell."""
    current = tuple(rows if j == layer else r for j, r in enumerate(net.arena.pool_rows))
    values = member_weights(net.with_arena(pool_rows=current), layer, cfg, slot, winner[i], i,
                            jnp.arange(cfg.contexts))  # [C, w]
    return rows.at[i, :, entry[i]].set(values, mode="drop")


def detach(net: Net, writes, target, kept, cfg: EngineConfig) -> Net:
    """Before entry ``target`` [N] is overwritten: continuing slots whose members still read it keep its
    lineage (copied into the slot) and, in exact mode, get every remaining block of those neurons
    created and filled from the current sources (§6.4)."""
    continuing = (jnp.arange(cfg.slots) < kept)[:, None, None]
    hit = continuing & writes & (net.slots.source == target) & ~net.slots.detached  # [S, k, N]
    # a write usually finds an entry no continuing slot reads (about two in three on Elec2): then no
    # slot's lineages are rewritten
    return when(any_net(jnp.any(hit)), lambda net: _detach_hit(net, hit, target, kept, cfg), net)


def _detach_hit(net: Net, hit, target, kept, cfg: EngineConfig) -> Net:
    """``detach`` of the members ``hit`` [S, k, N]."""
    N = cfg.neurons
    entry = jnp.maximum(target, 0)
    neurons = jnp.arange(N)
    copy = lambda slot_a, entry_a: jnp.where(hit[..., None] if slot_a.ndim == 4 else hit,
                                             entry_a[entry, neurons][None, None], slot_a)
    net = net.with_slots(lineage=jax.tree.map(copy, net.slots.lineage, net.pool.lineage), detached=net.slots.detached | hit)
    if cfg.pool.bounded:
        return net
    affected = jnp.any(hit, axis=1)  # [S, N]: (slot, neuron) pairs to materialise
    return jax.lax.fori_loop(0, kept, lambda p, net: when(
        any_net(jnp.any(affected[p])), lambda net: _materialise(net, p, affected[p], cfg), net), net)


def _materialise(net: Net, slot, neurons_hit, cfg: EngineConfig) -> Net:
    """Create and fill, from the current sources, every missing block of ``slot`` for the neurons in
    ``neurons_hit`` [N]."""
    for layer, shape in enumerate(cfg.layers):
        local = jnp.arange(shape.neurons)[:, None]
        contexts = jnp.arange(cfg.contexts)[None, :]
        need = neurons_hit[shape.offset:shape.offset + shape.neurons][:, None] & (
            net.slots.block_of[slot, shape.offset + local, contexts] < 0)  # [N_i, C]
        net, block = allocate(net, layer, cfg, need, slot, local, contexts)
        net = fill_blocks(net, layer, cfg, slot, local, contexts, block, need)
    return net
