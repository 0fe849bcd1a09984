"""Where a member's row lies: its trained row in a block, or its source row, a pool entry or the
fresh model's (docs/algorithm.md §4.1, §6.2).
"""

from __future__ import annotations

import jax.numpy as jnp

from nctl.core.engine.config import EngineConfig
from nctl.core.engine.state import Net


def source_weights(net: Net, layer: int, cfg: EngineConfig, slot, member, neuron, context):
    """The row a member starts from (§4.1): its pool entry, or the initial weights for the fresh model
    and absent members. ``slot``, ``member``, layer-local ``neuron``, ``context`` broadcast together."""
    shape = cfg.layers[layer]
    init = jnp.asarray(cfg.rows.init_value(shape.fan_in), cfg.rows.dtype)
    if not cfg.pool.capacity:
        items = jnp.broadcast_shapes(jnp.shape(slot), jnp.shape(member), jnp.shape(neuron), jnp.shape(context))
        return jnp.broadcast_to(init, items + (shape.width,))
    entry = source_entry(net, layer, cfg, slot, member, neuron)
    rows = net.arena.pool_rows[layer][neuron, context, jnp.maximum(entry, 0)]
    return jnp.where((entry >= 0)[..., None], rows, init)


def source_entry(net: Net, layer: int, cfg: EngineConfig, slot, member, neuron):
    """The pool entry a member starts from, or -1 for the initial weights (the fresh model, absent
    members, empty pools)."""
    k = cfg.pool.capacity
    if not k:
        return jnp.full(jnp.broadcast_shapes(jnp.shape(slot), jnp.shape(member), jnp.shape(neuron)), -1, jnp.int32)
    entry = net.slots.source[slot, jnp.clip(member, 0, k - 1), cfg.layers[layer].offset + neuron]
    return jnp.where((member >= 0) & (member < k) & (entry >= 0), entry, -1)


def _lane(net: Net, layer: int, cfg: EngineConfig, slot, member, neuron, block):
    """Lane of ``member`` in its (slot, neuron) and whether that lane's row in ``block`` is current."""
    if not cfg.pool.bounded:
        return member, block >= 0
    col = cfg.layers[layer].offset + neuron
    matches = net.slots.lanes[slot, col] == jnp.asarray(member)[..., None]
    lane = jnp.argmax(matches, axis=-1)
    stamp = net.arena.stamps[layer][jnp.maximum(block, 0), lane]
    return lane, (block >= 0) & jnp.any(matches, axis=-1) & (stamp >= net.slots.lane_since[slot, col, lane])


def member_row(net: Net, layer: int, cfg: EngineConfig, slot, member, neuron, context):
    """Where the row ``member`` of ``slot`` predicts with at ``context`` lies: ``(block, lane, owns)``, its
    trained row ``blocks[block, lane]`` where ``owns``, else its source row (``source_weights``, §6.2)."""
    block = net.slots.block_of[slot, cfg.layers[layer].offset + neuron, context]
    lane, owns = _lane(net, layer, cfg, slot, member, neuron, block)
    return block, lane, owns


def member_weights(net: Net, layer: int, cfg: EngineConfig, slot, member, neuron, context):
    """The row ``member`` of ``slot`` predicts with at ``context`` (``member_row``). Arguments broadcast
    together; -> [..., width]."""
    block, lane, owns = member_row(net, layer, cfg, slot, member, neuron, context)
    trained = net.arena.blocks[layer][jnp.maximum(block, 0), lane]
    return jnp.where(owns[..., None], trained, source_weights(net, layer, cfg, slot, member, neuron, context))
