"""The same learner in a larger engine: a deeper tree, larger block or record arenas (docs/algorithm.md
§6.2, §6.5).
"""

from __future__ import annotations

import jax.numpy as jnp

from nctl.core.engine.config import EngineConfig
from nctl.core.engine.records import reserve_records
from nctl.core.engine.state import State


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

    nets = state.nets
    slot_pads = {"loglik": 0.0, "logprior": 0.0, "source": -1, "detached": False, "slot_lineage": -1,
                 "slot_lineage_n": 0, "slot_lineage_seen": 0, "log_b": 0.0, "block_of": -1, "lanes": -1,
                 "lane_since": 0}
    entry_pads = {"in_pool": False, "age": 0, "order": 0, "born": 0, "lineage": -1, "lineage_n": 0,
                  "lineage_seen": 0}
    fields = {name: pad(getattr(nets, name), 1, dS, v) for name, v in slot_pads.items()
              if getattr(nets, name) is not None}
    fields.update({name: pad(getattr(nets, name), 1, dE, v) for name, v in entry_pads.items()})
    free = []
    for index, (a, b) in enumerate(zip(old.layers, new.layers)):
        if b.fixed:  # more slots: their blocks come after the others' (slot-major places)
            free.append(nets.free[index])
            continue
        # the free stack keeps its free ids and gets the new blocks on top
        top = nets.n_free[:, index][:, None]
        at = jnp.arange(b.blocks, dtype=jnp.int32)[None, :]
        kept = jnp.take_along_axis(nets.free[index], jnp.minimum(at, a.blocks - 1), axis=1)
        free.append(jnp.where(at < top, kept, a.blocks + at - top))
    grown = jnp.array([0 if b.fixed else b.blocks - a.blocks for a, b in zip(old.layers, new.layers)], jnp.int32)
    nets = nets._replace(
        **fields,
        pool_rows=tuple(pad(rows, 3, dE) for rows in nets.pool_rows),
        blocks=tuple(pad(blocks, 1, b.blocks - a.blocks) for blocks, a, b in zip(nets.blocks, old.layers, new.layers)),
        stamps=None if nets.stamps is None else tuple(
            pad(stamps, 1, b.blocks - a.blocks, -1) for stamps, a, b in zip(nets.stamps, old.layers, new.layers)),
        free=tuple(free), n_free=nets.n_free + grown, hidden=pad(nets.hidden, 1, dA_r),
        record_contexts=pad(nets.record_contexts, 1, dA_r))
    records = state.records
    records = records._replace(z=pad(records.z, 0, dA_r), y=pad(records.y, 0, dA_r),
                               segment=pad(records.segment, 0, dS, -1), segment_n=pad(records.segment_n, 0, dS),
                               segment_seen=pad(records.segment_seen, 0, dS))
    sched = state.schedule
    sched = sched._replace(level=pad(sched.level, 0, dS), start=pad(sched.start, 0, dS, 1))
    return reserve_records(State(sched, nets, records, state.key), new)[0]
