"""Forks (docs/algorithm.md §6.7): a journal of what learning a few rows overwrites, and its undo.
"""

from __future__ import annotations

import tempfile
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from nctl.core import tree
from nctl.core.engine.config import EngineConfig, arenas_outgrown
from nctl.core.engine.records import unheld_records
from nctl.core.engine.state import State


class Journal(NamedTuple):
    """What learning a few rows overwrites, kept to undo it: the state but its arenas (copies; also
    without the records' arrays where no pool boundary falls among the rows); per layer the blocks
    those rows may overwrite: those they train in place, and those of the slots they close (``ids``
    [nets, B], padded with the layer's block count; ``rows`` [nets, B, W, width]); and, where a pool
    boundary falls among the rows, the pool entries' rows (``pool``: per layer a host array [nets, N_i,
    C, E, width], in memory or mapped from a temporary file)."""

    small: State
    ids: tuple
    rows: tuple
    pool: tuple | None


GATE_TOLERANCE = 1e-4  # a gate whose margin is within this share of sum_d |v_d z_d| may fall either way


def journal(state: State, cfg: EngineConfig, X, on_disk: bool = False, pool: tuple | None = None) -> Journal | None:
    """The journal of ``learn(state, cfg, X, ...)`` (§6.7), so that ``undo`` can give ``state`` back
    after it; None where learning the rows must be done on a copy instead: where they would enlarge the
    tree or a block arena. ``on_disk``: a pool boundary's copy of the pool entries goes to a temporary
    file rather than to memory; ``pool``: such a copy of these very pool rows (an earlier journal's,
    whose undo gave them back), taken instead of a new one."""
    T, n = int(state.schedule.t), X.shape[0]
    boundaries = (T + n - 1) // cfg.chunk - (T - 1) // cfg.chunk  # steps t = 0 mod P among the rows
    grows = T + n > 2**cfg.max_depth or arenas_outgrown(cfg, T + n)  # (monotone in t: the last step decides)
    # a boundary reserves P record rows that no reservoir holds, and its reservoirs hold no row but those
    # held now and those written since: with (boundaries + 1) P rows unheld now, none runs short (§6.5).
    # A record arena that may run short is doubled among the rows: the journal holds its arrays, and undo
    # puts them back, shapes and all, but not block arenas that a growing tree enlarges with it
    short = boundaries and int(unheld_records(state, cfg)) < (boundaries + 1) * cfg.chunk
    if grows or (short and cfg.arena_depth < cfg.max_depth):
        return None
    nets = state.nets
    normals, offsets, block_of, size, popped = jax.device_get(
        (nets.gates.normals, nets.gates.offsets, nets.slots.block_of, state.schedule.size, _lowest_popped(state.schedule, n)))
    reachable = candidate_contexts(normals, offsets, np.asarray(X, np.float32))  # [nets, N, C]
    ids, rows = [], []
    for layer, shape in enumerate(cfg.layers):
        cols = slice(shape.offset, shape.offset + shape.neurons)
        # the blocks of live slots that the rows train, and every block of a live slot that a restart pops:
        # the free stack hands those to the new slots, for any context
        trained = [b[:popped, cols][:, r[cols]] for b, r in zip(block_of, reachable)]
        touched = [np.unique(np.concatenate([t.reshape(-1), b[popped:size, cols].reshape(-1)]))
                   for t, b in zip(trained, block_of)]
        touched = [t[t >= 0] for t in touched]
        # one compiled shape per power of two, and never more blocks than the arena holds
        width = min(1 << max(0, max(map(len, touched)) - 1).bit_length(), shape.blocks)
        padded = np.full((cfg.n_nets, width), shape.blocks, np.int32)
        for i, t in enumerate(touched):
            padded[i, :len(t)] = t
        ids.append(jnp.asarray(padded))
        rows.append(_gather_blocks(nets.arena.blocks[layer], ids[-1]))
    pool = (pool or _copy_pool(nets.arena.pool_rows, on_disk)) if boundaries else None
    return Journal(jax.tree.map(jnp.copy, _without_arenas(state, boundaries > 0)), tuple(ids), tuple(rows), pool)


def _copy_pool(pool_rows: tuple, on_disk: bool) -> tuple:
    """Host copies of every layer's pool rows [nets, N_i, C, E, width], taken one class network at a
    time so that no more than one network's rows are in flight: arrays, or read-only maps of a temporary
    file (``_file_copy``)."""
    return tuple((_file_copy if on_disk else _memory_copy)(rows) for rows in pool_rows)


def _memory_copy(rows) -> np.ndarray:
    copy = np.empty(rows.shape, rows.dtype)
    for i in range(rows.shape[0]):
        copy[i] = jax.device_get(rows[i])
    return copy


def _file_copy(rows) -> np.memmap:
    """``rows`` written to a temporary file (deleted when its map goes) and mapped read-only: written, not
    filled through the map, so the copy passes through the page cache and only the cells an undo reads
    back are mapped into the process."""
    with tempfile.TemporaryFile(prefix="nctl-pool-") as file:  # the map keeps the file open
        for i in range(rows.shape[0]):
            file.write(np.ascontiguousarray(jax.device_get(rows[i])).data)
        file.flush()
        return np.memmap(file, dtype=rows.dtype, mode="r", shape=rows.shape)


@jax.jit
def _lowest_popped(schedule: tree.Schedule, n):
    """The lowest position of the slot stack that the restarts of the next ``n`` steps pop (``size``
    if none): the live slots from there on are closed, and their blocks freed, within those steps."""
    def one(_, carry):
        s, lowest = carry
        adv = tree.advance(s)
        return adv.new, jnp.minimum(lowest, adv.kept)

    return jax.lax.fori_loop(0, n, one, (schedule, schedule.size))[1]


def candidate_contexts(normals: np.ndarray, offsets: np.ndarray, X: np.ndarray) -> np.ndarray:
    """Every context [nets, N, C] bool that some row of ``X`` may select (§1.2), computed on the host in
    float64: a gate within ``GATE_TOLERANCE`` of its threshold counts both ways, so that rounding in the
    compiled step can never select a context outside the set."""
    v, z = normals.astype(np.float64), X.astype(np.float64)
    margin = np.einsum("ansd,rd->arns", v, z) - offsets[:, None].astype(np.float64)  # [nets, rows, N, s]
    scale = np.einsum("ansd,rd->arns", np.abs(v), np.abs(z)) + 1.0
    either = np.abs(margin) <= GATE_TOLERANCE * scale
    powers = 1 << np.arange(normals.shape[2])
    base = np.sum(((margin > 0) & ~either) * powers, axis=-1)  # [nets, rows, N]: the sure bits
    free = np.sum(either * powers, axis=-1)
    contexts = np.arange(1 << normals.shape[2])
    hits = (contexts & ~free[..., None]) == base[..., None]  # context = base with any of the free bits set
    return np.any(hits, axis=1)


@jax.jit
def _gather_blocks(blocks, ids):
    return jax.vmap(lambda b, i: b.at[i].get(mode="fill", fill_value=0))(blocks, ids)


def _without_arenas(state: State, boundary: bool) -> State:
    """``state`` without the arrays a journal does not copy: the blocks (restored from the journal's
    rows), the pool entries (written at boundaries only, restored from the journal's pool copy) and,
    unless a pool ``boundary`` falls among the rows, the records' arrays (written, until a boundary, in
    the rows it reserved, which no reservoir held)."""
    nets = state.nets.with_arena(blocks=None, pool_rows=None)
    if boundary:
        return state._replace(nets=nets)
    nets = nets._replace(hidden=None, record_contexts=None)
    return state._replace(nets=nets, records=state.records._replace(z=None, y=None))


def undo(state: State, journal: Journal) -> State:
    """``state`` as it was when ``journal`` was taken, from the state after the rows were learned (§6.7)."""
    written = None if journal.pool is None else np.nonzero(np.asarray(
        state.nets.pool.order != journal.small.nets.pool.order))  # (net, entry, neuron) before state is donated
    state = _undo(state, journal.small, journal.ids, journal.rows)
    if written is None:
        return state
    restored, offset = [], 0
    for rows, copy in zip(state.nets.arena.pool_rows, journal.pool):
        restored.append(_put_back(rows, copy, written, offset))
        offset += copy.shape[1]
    return state._replace(nets=state.nets.with_arena(pool_rows=tuple(restored)))


def _put_back(rows, copy: np.ndarray, written: tuple, offset: int):
    """A layer's pool rows ``rows`` [nets, N_i, C, E, width] (the layer's neurons from ``offset``) with
    the cells ``written`` (net, entry, neuron) read back from ``copy``: only the cells a boundary wrote
    are read, one class network, neuron and entry's C rows each."""
    net, entry, neuron = written
    mine = (neuron >= offset) & (neuron < offset + copy.shape[1])
    net, entry, neuron = net[mine], entry[mine], neuron[mine] - offset
    if not len(net):
        return rows
    cells = copy[net, neuron, :, entry]  # [K, C, width]
    size = 1 << (len(net) - 1).bit_length()  # one compiled shape per power of two
    pad = lambda a, fill: np.concatenate([a, np.full((size - len(a),) + a.shape[1:], fill, a.dtype)])
    return _put_cells(rows, pad(net, copy.shape[0]), pad(neuron, 0), pad(entry, 0), pad(cells, 0))


@partial(jax.jit, donate_argnums=(0,))
def _put_cells(rows, net, neuron, entry, cells):
    return rows.at[net, neuron, :, entry].set(cells, mode="drop")  # padding: net out of range, dropped


@partial(jax.jit, donate_argnums=(0,))
def _undo(state: State, small: State, ids: tuple, rows: tuple) -> State:
    blocks = tuple(jax.vmap(lambda b, i, r: b.at[i].set(r, mode="drop"))(b, i, r)
                   for b, i, r in zip(state.nets.arena.blocks, ids, rows))
    nets = small.nets.with_arena(blocks=blocks, pool_rows=state.nets.arena.pool_rows)
    records = small.records
    if nets.hidden is None:  # no pool boundary among the rows: what it alone writes was not copied
        nets = nets._replace(hidden=state.nets.hidden, record_contexts=state.nets.record_contexts)
        records = records._replace(z=state.records.z, y=state.records.y)
    return small._replace(nets=nets, records=records)
