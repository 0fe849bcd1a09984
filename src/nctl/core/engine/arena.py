"""The block arenas: blocks created for the contexts a slot visits, filled from their sources, and
freed when their slot closes (docs/algorithm.md §6.2, §6.4).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from nctl.core import native
from nctl.core.engine.config import EngineConfig, LayerShape, slot_rows_bytes
from nctl.core.engine.members import source_weights
from nctl.core.engine.ops import any_net, put, unique_or_drop
from nctl.core.engine.state import Net
from nctl.core.platform import by_platform


@jax.named_scope("allocate")
def allocate(net: Net, layer: int, cfg: EngineConfig, need, slot, neuron, context):
    """New blocks for the (slot, neuron, context) items where ``need`` (arrays that broadcast together);
    returns the net and the item's block (new where needed): the item's fixed place in a layer with
    fixed blocks, else the top of the layer's free stack (§6.2)."""
    shape = cfg.layers[layer]
    col = shape.offset + neuron
    if shape.fixed:
        ids = ((slot * shape.neurons + neuron) * cfg.contexts + context).astype(jnp.int32)
        block = jnp.where(need, ids, net.slots.block_of[slot, col, context])
        return net.with_slots(block_of=net.slots.block_of.at[slot, col, context].set(block)), block
    rank = (jnp.cumsum(need.reshape(-1)) - 1).reshape(need.shape)
    top = net.arena.n_free[layer]
    ids = net.arena.free[layer][jnp.clip(top - 1 - rank, 0, shape.blocks - 1)]
    block = jnp.where(need, ids, net.slots.block_of[slot, col, context])
    block_of = net.slots.block_of.at[slot, col, context].set(block)
    net = net.with_slots(block_of=block_of)
    return net.with_arena(n_free=net.arena.n_free.at[layer].add(-jnp.sum(need, dtype=jnp.int32))), block


FILL_ROUND_BYTES = 2**16  # a fill round of a small layer copies up to this many bytes of source rows


def fill_round(shape: LayerShape, lanes: int) -> int:
    """Items filled per round: a layer's neuron count, or as many multiples of it as fit in
    ``FILL_ROUND_BYTES`` (the blocks a boundary creates for one slot then take one round in small layers)."""
    return shape.neurons * max(1, FILL_ROUND_BYTES // slot_rows_bytes(shape.neurons, lanes, shape.width))


@jax.named_scope("fill_blocks")
def fill_blocks(net: Net, layer: int, cfg: EngineConfig, slot, neuron, context, block, mask):
    """Exact mode: copy into every ``block`` where ``mask`` its members' source rows, compacted,
    ``fill_round`` items per round (blocks a boundary creates, §6.4; a step's new blocks read their
    sources where they are trained, §6.2). Where one round holds every item, that round is the fill:
    no compaction and no loop (fewer kernels to compile, the same rows written)."""
    shape = cfg.layers[layer]
    W = cfg.pool.lanes
    flat = lambda a: jnp.broadcast_to(a, mask.shape).reshape(-1)
    slot, neuron, context, block, pending = flat(slot), flat(neuron), flat(context), flat(block), flat(mask)
    count = slot.shape[0]

    def write(net, i, valid):
        """Fill the blocks of items ``i`` where ``valid``."""
        member = jnp.arange(W)[None, :]
        rows = source_weights(net, layer, cfg, slot[i][:, None], member, neuron[i][:, None], context[i][:, None])
        dest = unique_or_drop(block[i][:, None] * W + member, valid[:, None], shape.blocks * W)
        blocks = net.arena.blocks[layer].reshape(-1, shape.width).at[dest.reshape(-1)].set(
            rows.reshape(-1, shape.width), mode="drop", unique_indices=True).reshape(shape.blocks, W, shape.width)
        return net.with_arena(blocks=put(net.arena.blocks, layer, blocks))

    if fill_round(shape, W) >= count:
        return write(net, jnp.arange(count), pending)

    def one_round(carry):
        pending, net = carry
        (index,) = jnp.nonzero(pending, size=fill_round(shape, W), fill_value=count)
        valid = index < count
        net = write(net, jnp.minimum(index, count - 1), valid)
        return pending.at[jnp.where(valid, index, count)].set(False, mode="drop"), net

    return jax.lax.while_loop(lambda c: any_net(jnp.any(c[0])), one_round, (pending, net))[1]


def running_count(flags):
    """``cumsum(flags)`` of a 1-D bool array as int32, in two levels of about ``sqrt(n)``: running sums
    within rows of ``b`` flags (one product with a triangle of ones, exact in float32), then of the rows'
    totals. XLA:CPU lowers ``cumsum`` to a window reduction that adds every prefix anew (``n^2`` additions
    for a free stack's ``N_i C`` flags), and a log-depth scan to some forty small operations."""
    n = flags.shape[0]
    b = math.isqrt(max(n, 1) - 1) + 1
    rows = -(-n // b)
    padded = jnp.pad(flags.astype(jnp.float32), (0, rows * b - n)).reshape(rows, b)
    within = jnp.matmul(padded, jnp.triu(jnp.ones((b, b), jnp.float32)),
                        precision=jax.lax.Precision.HIGHEST).astype(jnp.int32)
    before = jnp.cumsum(within[:, -1]) - within[:, -1]
    return (within + before[:, None]).reshape(-1)[:n]


@jax.named_scope("free_blocks")
def free_blocks(net: Net, first, stop, cfg: EngineConfig) -> Net:
    """Return the blocks of slots ``first .. stop - 1`` to their layers' free stacks (a layer with fixed
    blocks has none: a slot's places wait for the next slot pushed at its stack position), then empty
    the block table of slot ``first``, the slot pushed in their place."""
    stacked = [index for index, shape in enumerate(cfg.layers) if not shape.fixed]
    if not stacked:
        return net.with_slots(block_of=net.slots.block_of.at[first].set(-1))
    if not native.enabled():
        return free_blocks_by_loop(net, first, stop, cfg, stacked)
    return by_platform(net, cpu=lambda net: free_blocks_by_kernel(net, first, stop, cfg, stacked),
                       default=lambda net: free_blocks_by_loop(net, first, stop, cfg, stacked))


def free_blocks_by_kernel(net: Net, first, stop, cfg: EngineConfig, stacked: list) -> Net:
    """``free_blocks`` by the CPU kernel (§6.11): one pass over the slots' block tables per layer, the last
    layer's call emptying slot ``first``'s table; tables and stacks updated in place."""
    block_of, free, n_free = net.slots.block_of, list(net.arena.free), net.arena.n_free
    for index in stacked:
        shape = cfg.layers[index]
        block_of, free[index], n_free = native.free_blocks(block_of, free[index], n_free, first, stop, index,
                                                           shape.offset, shape.neurons, clear=index == stacked[-1])
    return net.with_slots(block_of=block_of).with_arena(free=tuple(free), n_free=n_free)


def free_blocks_by_loop(net: Net, first, stop, cfg: EngineConfig, stacked: list) -> Net:
    """``free_blocks`` as XLA code: a loop over the slots, each slot's held blocks counted in order and
    scattered onto the stacks."""

    def one_slot(p, net):
        free, n_free = list(net.arena.free), net.arena.n_free
        for index in stacked:
            shape = cfg.layers[index]
            ids = net.slots.block_of[p, shape.offset:shape.offset + shape.neurons].reshape(-1)
            held = ids >= 0
            at = unique_or_drop(n_free[index] + running_count(held) - 1, held, shape.blocks)
            free[index] = free[index].at[at].set(ids, mode="drop", unique_indices=True)
            n_free = n_free.at[index].add(jnp.sum(held, dtype=jnp.int32))
        return net.with_arena(free=tuple(free), n_free=n_free)

    net = jax.lax.fori_loop(first, stop, one_slot, net)
    return net.with_slots(block_of=net.slots.block_of.at[first].set(-1))
