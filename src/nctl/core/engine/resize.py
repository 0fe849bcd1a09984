"""The same learner in a larger engine: a deeper tree, larger block or record arenas (docs/algorithm.md
§6.2, §6.5).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from nctl.core.engine.config import EngineConfig
from nctl.core.engine.records import reserve_records
from nctl.core.engine.state import Arena, State
from nctl.core.reservoir import Reservoir

EMPTY_RESERVOIR = Reservoir(-1, 0, 0)
# what a new slot's or a new pool entry's fields hold (the slots' and the pool's per-entry fields)
SLOT_FILLS = {"loglik": 0.0, "logprior": 0.0, "source": -1, "detached": False, "lineage": EMPTY_RESERVOIR, "log_b": 0.0,
              "block_of": -1, "lanes": -1, "lane_since": 0}
ENTRY_FILLS = {"in_pool": False, "age": 0, "order": 0, "born": 0, "lineage": EMPTY_RESERVOIR}


def resize(state: State, old: EngineConfig, new: EngineConfig) -> State:
    """The same learner in a larger engine (deeper tree, more record rows): every array padded, new
    blocks free, new pool entries empty. Nothing the learner computes changes."""
    dS, dA_r, dE = new.slots - old.slots, new.record_rows - old.record_rows, new.entries - old.entries
    if min(dS, dA_r, dE, new.arena_depth - old.arena_depth) < 0 or new._replace(
            max_depth=old.max_depth, record_rows=old.record_rows, arena_depth=old.arena_depth,
            layers=old.layers) != old:
        raise ValueError("resize only enlarges the tree depth and the arenas of the same learner")

    def pad(a, axis, amount, value=0):
        widths = [(0, 0)] * a.ndim
        widths[axis] = (0, amount)
        return jnp.pad(a, widths, constant_values=value)

    def padded(group, fills: dict, axis: int, amount: int):
        """``group`` with the fields ``fills`` names padded by ``amount`` along ``axis``, with their fill."""
        return group._replace(**{name: jax.tree.map(lambda a, v: pad(a, axis, amount, v), getattr(group, name), fill)
                                 for name, fill in fills.items() if getattr(group, name) is not None})

    nets = state.nets
    free = []
    for index, (a, b) in enumerate(zip(old.layers, new.layers)):
        if b.fixed:  # more slots: their blocks come after the others' (slot-major places)
            free.append(nets.arena.free[index])
            continue
        # the free stack keeps its free ids and gets the new blocks on top
        top = nets.arena.n_free[:, index][:, None]
        at = jnp.arange(b.blocks, dtype=jnp.int32)[None, :]
        kept = jnp.take_along_axis(nets.arena.free[index], jnp.minimum(at, a.blocks - 1), axis=1)
        free.append(jnp.where(at < top, kept, a.blocks + at - top))
    grown = jnp.array([0 if b.fixed else b.blocks - a.blocks for a, b in zip(old.layers, new.layers)], jnp.int32)
    more_blocks = lambda arrays, fill: tuple(pad(x, 1, b.blocks - a.blocks, fill)
                                             for x, a, b in zip(arrays, old.layers, new.layers))
    arena = nets.arena
    nets = nets._replace(
        slots=padded(nets.slots, SLOT_FILLS, 1, dS),
        arena=Arena(pool_rows=tuple(pad(rows, 3, dE) for rows in arena.pool_rows), blocks=more_blocks(arena.blocks, 0),
                    stamps=None if arena.stamps is None else more_blocks(arena.stamps, -1), free=tuple(free),
                    n_free=arena.n_free + grown),
        pool=padded(nets.pool, ENTRY_FILLS, 1, dE),
        hidden=pad(nets.hidden, 1, dA_r),
        record_contexts=pad(nets.record_contexts, 1, dA_r))
    records = state.records._replace(z=pad(state.records.z, 0, dA_r), y=pad(state.records.y, 0, dA_r))
    records = padded(records, {"segment": EMPTY_RESERVOIR}, 0, dS)
    sched = state.schedule
    sched = sched._replace(level=pad(sched.level, 0, dS), start=pad(sched.start, 0, dS, 1))
    return reserve_records(State(sched, nets, records, state.key), new)[0]
