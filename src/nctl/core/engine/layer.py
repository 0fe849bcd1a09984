"""One layer of a step: every member's prediction and, when learning, every trained row updated
(docs/algorithm.md §1.3, §6.2, §6.11).
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp

from nctl.core import native, tree
from nctl.core.engine.arena import allocate
from nctl.core.engine.config import EngineConfig, LANE_PREDICTION_BYTES, slot_rows_bytes, uses_kernel
from nctl.core.engine.members import source_entry, source_weights
from nctl.core.engine.ops import put, unique_or_drop
from nctl.core.engine.state import Net
from nctl.core.platform import by_platform


def row_predictions(cfg: EngineConfig, rows, u, kernel: bool):
    """``cfg.rows.predict(rows, u)`` (``u`` one [K] or one per row); where ``kernel``, with the CPU
    kernel's dot product, so that every prediction of a state in a layer that uses it rounds alike (§6.11)."""
    if not kernel:
        return cfg.rows.predict(rows, u)
    return by_platform(rows, cpu=lambda r: native.row_predictions(r, u, cfg.rows.prob_eps),
                       default=lambda r: cfg.rows.predict(r, u))


def neutral(cfg: EngineConfig, shape: tuple):
    """Predictions that are not computed: ``rows.neutral``, [*shape, *rows.prediction_shape]."""
    return jnp.broadcast_to(jnp.asarray(cfg.rows.neutral, cfg.rows.dtype), shape + cfg.rows.prediction_shape)


class Lanes(NamedTuple):
    """A layer's lanes at the step's contexts, per live slot and neuron."""

    block: jax.Array  # [S, N_i] block of (slot, neuron, context); -1 none
    member: jax.Array  # [S, N_i, W] member trained in each lane (-1 none)
    stale: jax.Array  # [S, N_i, W] live lanes new to their block: trained from their sources
    live: jax.Array  # [S] the slot is live


@jax.named_scope("layer_pass")
def layer_pass(net: Net, layer: int, cfg: EngineConfig, sched: tree.Schedule, contexts, u, x, learn: bool):
    """Every member's prediction ``q`` [S, M, N_i] for layer ``layer`` on inputs ``u`` [K] and, when
    learning, every trained row of every live slot updated on ``x`` (§1.3). Returns (net, q, logq):
    ``logq`` [S, M, N_i] the members' ``log q(x)`` when learning (else None)."""
    shape = cfg.layers[layer]
    W, S = cfg.pool.lanes, cfg.slots
    neurons = jnp.arange(shape.neurons)
    live = jnp.arange(S) < sched.size
    block = net.slots.block_of[jnp.arange(S)[:, None], shape.offset + neurons, contexts]  # [S, N_i]
    if cfg.pool.bounded:
        member = net.slots.lanes[:, shape.offset + neurons]  # [S, N_i, W]
        stamp = net.arena.stamps[layer][jnp.maximum(block, 0)]
        current = (block >= 0)[..., None] & (member >= 0) & (stamp >= net.slots.lane_since[:, shape.offset + neurons])
    else:
        member = jnp.broadcast_to(jnp.arange(W), (S, shape.neurons, W))
        current = jnp.broadcast_to((block >= 0)[..., None], member.shape)
    stale = live[:, None, None] & (member >= 0) & ~current
    if learn:
        net, block = allocate(net, layer, cfg, live[:, None] & (block < 0), jnp.arange(S)[:, None], neurons, contexts)
    lanes = Lanes(block, member, stale, live)

    # every member has a lane unless bounded: a small layer then predicts as it learns, each lane from its
    # block or its source row; a large one predicts each pool entry once instead (source_predictions, §6.2)
    whole = not cfg.pool.bounded and (learn or shape.vectorised or
                                      cfg.slots * slot_rows_bytes(shape.neurons, W, shape.width) <= LANE_PREDICTION_BYTES)
    blocks, q = train_rows(net, layer, cfg, sched, contexts, u, x, lanes, learn, from_sources=learn or whole)
    net = net.with_arena(blocks=put(net.arena.blocks, layer, blocks))
    if learn and cfg.pool.bounded:  # the lanes just started from their sources are current from now on
        filled = unique_or_drop(block[..., None] * W + jnp.arange(W), stale, shape.blocks * W)
        stamps = net.arena.stamps[layer].reshape(-1).at[filled.reshape(-1)].set(sched.t, mode="drop", unique_indices=True)
        net = net.with_arena(stamps=put(net.arena.stamps, layer, stamps.reshape(shape.blocks, W)))
    if whole:  # every member trained its lane: [S, N_i, W] is [S, M, N_i] with the axes moved
        q = jnp.moveaxis(q, 2, 1)
        return net, q, cfg.rows.log_likelihood(q, x) if learn else None
    return net, *source_predictions(net, layer, cfg, contexts, u, x, q, member, current, live, learn)


def train_rows(net: Net, layer: int, cfg: EngineConfig, sched: tree.Schedule, contexts, u, x, lanes: Lanes,
               learn: bool, from_sources: bool):
    """Every lane's prediction ``q`` [S, N_i, W] and, when learning, its row updated on ``x``; returns the
    layer's blocks and ``q``. Lanes new to their block read their source rows where ``from_sources`` (else
    their blocks only). The layer's code path (config.py): every slot at once, the live slots chunk by
    chunk, or the CPU kernel (§6.11)."""
    shape = cfg.layers[layer]
    S = cfg.slots
    neurons = jnp.arange(shape.neurons)
    positions = jnp.arange(S)[:, None]
    blocks = net.arena.blocks[layer]  # gathers and scatters move whole blocks, kept [W, width] (no layout copy)
    read = jnp.where(lanes.live[:, None], lanes.block, 0)
    write = unique_or_drop(lanes.block, lanes.live[:, None], shape.blocks)

    @jax.named_scope("train_rows")
    def train(blocks, slot, lane_member, index, write_index, stale):
        rows = blocks[index]
        if from_sources:
            sources = source_weights(net, layer, cfg, slot, lane_member, neurons[:, None], contexts[:, None])
            rows = jnp.where(stale[..., None], sources, rows)
        q = cfg.rows.predict(rows, u)
        if not learn:
            return blocks, q
        new = cfg.rows.update(rows, u, q, x)
        return blocks.at[write_index].set(new, mode="drop", unique_indices=True), q

    def train_slots(blocks, chunk: int):
        """``train`` for the live slots, ``chunk`` slots at a time (the slot axis padded to a multiple of
        ``chunk`` with slots that are not live); slots past the live ones' last chunk predict ``rows.neutral``."""
        rounds = -(-S // chunk)
        extra = rounds * chunk - S
        pad = lambda a, fill: jnp.pad(a, [(0, extra)] + [(0, 0)] * (a.ndim - 1), constant_values=fill)
        padded_write = unique_or_drop(pad(lanes.block, -1), pad(lanes.live, False)[:, None], shape.blocks) if extra else write
        items = (pad(lanes.member, 0), pad(read, 0), padded_write, pad(lanes.stale, False))

        def body(r, carry):
            at = r * chunk
            taken = [jax.lax.dynamic_slice_in_dim(a, at, chunk) for a in items]
            blocks, q = train(carry[0], (at + jnp.arange(chunk))[:, None, None], *taken)
            return blocks, jax.lax.dynamic_update_slice_in_dim(carry[1], q, at, 0)

        q = neutral(cfg, (rounds * chunk, shape.neurons, cfg.pool.lanes))
        blocks, q = jax.lax.fori_loop(0, (sched.size + chunk - 1) // chunk, body, (blocks, q))
        return blocks, q[:S]

    @jax.named_scope("train_rows")
    def train_native(blocks):
        """``train`` for every live slot at once, in place, by the CPU kernel (§6.11)."""
        entry = source_entry(net, layer, cfg, positions[..., None], lanes.member, neurons[:, None])
        new_lanes = lanes.stale if from_sources else jnp.zeros_like(lanes.stale)
        return native.ggm_rows(blocks, net.arena.pool_rows[layer], read, write, entry, new_lanes, contexts, u, x,
                               sched.size, cfg.rows, learn=learn)

    all_slots = lambda blocks: train(blocks, positions[..., None], lanes.member, read, write, lanes.stale)
    if shape.vectorised and shape.slot_chunk < S:
        # on a CPU the live slots only, chunk by chunk; elsewhere every slot at once (a loop's every round
        # waits for the device there)
        return by_platform(blocks, cpu=partial(train_slots, chunk=shape.slot_chunk), default=all_slots)
    if shape.vectorised:
        return all_slots(blocks)
    if uses_kernel(cfg, shape):
        return by_platform(blocks, cpu=train_native, default=partial(train_slots, chunk=1))
    return train_slots(blocks, 1)


def entry_predictions(cfg: EngineConfig, layer: int, pool_rows, contexts, u, source, live, kernel: bool):
    """``q`` [N_i, E] of every pool entry (``pool_rows`` [N_i, C, E, width]) of each neuron at its context;
    where ``kernel``, by the CPU kernel, which reads the entries where they are stored, and only those a
    member of a ``live`` [S] slot starts from (``source`` [S, k, N]; the others' q are 1/2, §6.11)."""
    def gathered(pool_rows):
        neurons, contexts_each, entries, width = pool_rows.shape
        rows = pool_rows.reshape(neurons * contexts_each, -1)[jnp.arange(neurons) * contexts_each + contexts]
        return cfg.rows.predict(rows.reshape(neurons, entries, width), u)

    if not kernel:
        return gathered(pool_rows)
    offset = cfg.layers[layer].offset
    return by_platform(pool_rows, default=gathered, cpu=lambda rows: native.entry_predictions(
        rows, contexts, u, cfg.rows.prob_eps, source, offset, live))


@jax.named_scope("source_predictions")
def source_predictions(net: Net, layer: int, cfg: EngineConfig, contexts, u, x, q, member, current, live, learn: bool):
    """The lanes' predictions ``q`` [S, N_i, W] completed to every member, [S, M, N_i] (each prediction
    ``rows.prediction_shape``, trailing; so in every shape here): members without a lane, and (when
    predicting) lanes not trained in their slot's block yet, predict with their source row; each pool
    entry is predicted once per step. When learning, also the members' ``log q(x)`` [S, M, N_i], each
    pool entry's taken once too (the same values as those of the completed predictions). Bounded mode,
    and large layers' frozen predictions (§6.2, §6.6)."""
    shape = cfg.layers[layer]
    kernel = uses_kernel(cfg, shape)
    q_entries = entry_predictions(cfg, layer, net.arena.pool_rows[layer], contexts, u, net.slots.source, live,
                                  kernel)  # [N_i, E]
    q_fresh = row_predictions(cfg, jnp.full((shape.width,), cfg.rows.init_value(shape.fan_in), cfg.rows.dtype), u, kernel)
    if not learn:  # lanes not trained in this slot's block yet keep their sources' predictions
        member = jnp.where(current & live[:, None, None], member, -1)
    values = partial(member_values, cfg, layer, net.slots.source, member, kernel)
    predictions = values(q_entries, q_fresh, q)
    if not learn:
        return predictions, None
    log_likelihood = cfg.rows.log_likelihood
    return predictions, values(log_likelihood(q_entries, x), log_likelihood(q_fresh, x), log_likelihood(q, x))


def member_values(cfg: EngineConfig, layer: int, source, member, kernel: bool, entries, fresh, lanes):
    """Every member's value [S, M, N_i] in layer ``layer``'s nodes: its source's (``entries`` [N_i, E, *v]
    of the pool entries, ``fresh`` [*v] of the fresh model, by ``source`` [S, k, N]), replaced by its
    lane's (``lanes`` [S, N_i, W, *v]) where ``member`` [S, N_i, W] names it; where ``kernel``, by the
    CPU kernel (§6.11), which moves each value once."""
    shape = cfg.layers[layer]

    def gathered(entries):
        layer_source = jnp.moveaxis(source[:, :, shape.offset + jnp.arange(shape.neurons)], 1, 2)  # [S, N_i, k]
        return _with_lanes(_frozen_members(entries, fresh, layer_source), lanes, member)

    if not kernel:
        return gathered(entries)
    return by_platform(entries, cpu=lambda e: native.member_values(e, fresh, source, shape.offset, lanes, member),
                       default=gathered)


def _frozen_members(entries, fresh, source):
    """Every member's value from its source: ``entries`` [N_i, E, *v] of the pool entries, ``fresh`` [*v]
    of the fresh model (members 0..k-1 without an entry, and member k); ``source`` [S, N_i, k] ->
    [S, N_i, M, *v]."""
    S, N, _ = source.shape
    trailing = (1,) * fresh.ndim
    stored = entries[jnp.arange(N)[None, :, None], jnp.maximum(source, 0)]
    stored = jnp.where((source >= 0).reshape(source.shape + trailing), stored, fresh)
    return jnp.concatenate([stored, jnp.broadcast_to(fresh, (S, N, 1) + fresh.shape)], axis=2)


def _with_lanes(frozen, lanes, member):
    """``frozen`` [S, N_i, M, *v] with each lane's value ``lanes`` [S, N_i, W, *v] put at its member,
    moved to [S, M, N_i, *v]."""
    # by one flat index: a lane without a member is dropped past the array's end, where an index past the
    # member axis alone would be wrapped into the next slot's first member by XLA:GPU's deterministic
    # scatter (§6.9); a node's lanes hold distinct members
    S, N, M = frozen.shape[:3]
    value = frozen.shape[3:]
    flat = (jnp.arange(S)[:, None, None] * N + jnp.arange(N)[None, :, None]) * M + member  # [S, N_i, W]
    index = unique_or_drop(flat, member >= 0, S * N * M)
    members = frozen.reshape((-1,) + value).at[index.reshape(-1)].set(lanes.reshape((-1,) + value), mode="drop",
                                                                      unique_indices=True)
    return jnp.moveaxis(members.reshape(frozen.shape), 2, 1)
