"""The record arena's garbage collection: the rows a reservoir or lineage holds, and the rows reserved
for the records of the next ``P`` steps (docs/algorithm.md §6.5); the records' contexts of an old save.
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp

from nctl.core import gating
from nctl.core.engine.config import EngineConfig
from nctl.core.engine.ops import any_net, per_net, when
from nctl.core.engine.state import Net, State


LINEAGE_CHUNK = 32  # detached members whose lineages are marked at once


def mark_detached(held, detached, lineage, lineage_n):
    """``held`` [rows] with the lineage records of the detached members marked: ``detached`` [m],
    ``lineage`` [m, R], ``lineage_n`` [m]. The detached members are listed first and marked
    ``LINEAGE_CHUNK`` at a time (a scatter costs per index, and few of a slot's members are detached)."""
    m, R = lineage.shape
    if m == 0:  # a pool of size 0 has no members
        return held
    padded = -(-m // LINEAGE_CHUNK) * LINEAGE_CHUNK  # every chunk a whole slice of the list
    (listed,) = jnp.nonzero(detached, size=padded, fill_value=0)
    count = jnp.sum(detached, dtype=jnp.int32)

    def chunk(i, held):
        at = i * LINEAGE_CHUNK + jnp.arange(LINEAGE_CHUNK)
        members = jax.lax.dynamic_slice(listed, (i * LINEAGE_CHUNK,), (LINEAGE_CHUNK,))
        marked = (at < count)[:, None] & (jnp.arange(R) < lineage_n[members][:, None])
        return held.at[jnp.where(marked, lineage[members], held.shape[0])].set(True, mode="drop")

    return jax.lax.fori_loop(0, -(-count // LINEAGE_CHUNK), chunk, held)


@jax.named_scope("reserve_records")
def reserve_records(state: State, cfg: EngineConfig):
    """Reserve the record rows of the next ``P`` steps: rows no reservoir holds (mark and sweep, §6.5).
    Returns the state and the count of rows no reservoir holds (how close the arena is to full)."""
    held = held_records(state, cfg)
    free = first_unheld(held, cfg.chunk)
    state = state._replace(records=state.records._replace(free=free, ok=jnp.all(free >= 0)))
    return state, jnp.sum(~held, dtype=jnp.int32)


@partial(jax.jit, static_argnums=1)
def unheld_records(state: State, cfg: EngineConfig):
    """The count of record rows no reservoir holds now."""
    return jnp.sum(~held_records(state, cfg), dtype=jnp.int32)


def held_records(state: State, cfg: EngineConfig):
    """[A_r] bool: the record rows that a live slot's segment reservoir, a pool entry's lineage (in the pool,
    or read by a live slot) or a detached member's lineage holds (the mark of §6.5)."""
    records, sched = state.records, state.schedule
    rows, R = cfg.record_rows, cfg.pool.reservoir_size
    live = jnp.arange(cfg.slots) < sched.size
    used = live[:, None] & (jnp.arange(R) < records.segment.n[:, None])
    held = jnp.zeros(rows, bool).at[jnp.where(used, records.segment.ids, rows)].set(True, mode="drop")

    def net_held(net: Net):
        reads = read_entries(net, sched.size, cfg)
        keep = net.pool.in_pool | reads
        used = keep[:, :, None] & (jnp.arange(R) < net.pool.lineage.n[:, :, None])
        held = jnp.zeros(rows, bool).at[jnp.where(used, net.pool.lineage.ids, rows)].set(True, mode="drop")
        def copied_lineages(held):  # slot by slot, the live slots only, and their detached members only
            def one_slot(p, held):
                return mark_detached(held, net.slots.detached[p].reshape(-1), net.slots.lineage.ids[p].reshape(-1, R),
                                      net.slots.lineage.n[p].reshape(-1))

            return jax.lax.fori_loop(0, sched.size, one_slot, held)

        return when(any_net(jnp.any(live[:, None, None] & net.slots.detached)), copied_lineages, held)

    return held | jnp.any(per_net(net_held, state.nets), axis=0)


FREE_SEARCH_BLOCK = 256  # rows per block of the search for free record rows


def first_unheld(held, count: int):
    """The first ``count`` rows not ``held`` [rows], in order, -1 past the last. Top-k picks them (its
    ties go to the lower index; XLA:CPU computes it in one pass where ``nonzero`` takes a prefix sum over
    the arena in several) in two rounds: the first ``count`` blocks of ``FREE_SEARCH_BLOCK`` rows that
    hold a free row, then the first ``count`` free rows among theirs, so that no top-k spans the arena
    (§6.5)."""
    size = FREE_SEARCH_BLOCK
    blocks = -(-held.shape[0] // size)
    free = jnp.pad(~held, (0, blocks * size - held.shape[0])).reshape(blocks, size)  # padding: not free
    _, chosen = jax.lax.top_k(jnp.any(free, axis=1).astype(jnp.float32), min(count, blocks))
    found, at = jax.lax.top_k(free[chosen].reshape(-1).astype(jnp.float32), count)
    return jnp.where(found > 0, chosen[at // size] * size + at % size, -1).astype(jnp.int32)


def read_entries(net: Net, kept, cfg: EngineConfig):
    """[E, N]: entries that an attached member of a continuing slot still reads."""
    E, N = cfg.entries, cfg.neurons
    continuing = (jnp.arange(cfg.slots) < kept)[:, None, None]
    reads = continuing & (net.slots.source >= 0) & ~net.slots.detached  # [S, k, N]
    neurons = jnp.broadcast_to(jnp.arange(N), reads.shape)
    return jnp.zeros((E, N), bool).at[jnp.where(reads, net.slots.source, E), neurons].set(True, mode="drop")


@jax.jit
def with_record_contexts(state: State) -> State:
    """``state`` with every record row's contexts computed from its side information (for saves made
    before the records kept them)."""
    def one_net(net: Net):
        contexts = jax.vmap(lambda z: gating.contexts(net.gates, z))(state.records.z)
        return contexts.astype(net.record_contexts.dtype)

    return state._replace(nets=state.nets._replace(record_contexts=jax.vmap(one_net)(state.nets)))
