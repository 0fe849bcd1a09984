"""The learner's state: per class network (``Net``), the shared records (``Records``), the PTW
schedule; a fresh state (docs/algorithm.md §6.1).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from nctl.core import gating, gln, programs, tree
from nctl.core.pool import member_log_prior, stable_order
from nctl.core.reservoir import Reservoir
from nctl.core.engine.config import EngineConfig


class Slots(NamedTuple):
    """Per slot (tree level), neuron and member: ``[S, ...]``; pushing a slot resets its row (§6.1)."""

    loglik: jax.Array  # [S, M, N] float64: segment log likelihood of each member
    logprior: jax.Array  # [S, M, N] float64: mixture prior (-inf: no such member)
    source: jax.Array  # [S, k, N] int32: physical entry each stored member was copied from (-1: none)
    detached: jax.Array  # [S, k, N] bool: the entry was reused since; the lineage lives in the slot
    lineage: Reservoir  # [S, k, N, R]: lineage of detached members
    log_b: jax.Array  # [S, A, N] float64: PTW completed-left-sibling weight, per tree level and split probability
    block_of: jax.Array  # [S, N, C] int32: block of (slot, neuron, context); -1 not yet created
    lanes: jax.Array | None  # [S, N, W] int32: member trained in each lane (bounded mode; -1 none)
    lane_since: jax.Array | None  # [S, N, W] int32: step at which the lane's member took it


class Arena(NamedTuple):
    """Where the rows lie, one array per layer in each field (§6.2, §6.4)."""

    pool_rows: tuple  # of [N_i, C, E, width]: the stored states
    blocks: tuple  # of [A_i, W, width]: the slots' trained rows, one block per (slot, neuron, context)
    stamps: tuple | None  # of [A_i, W] int32: step each block row was filled (bounded mode)
    free: tuple  # of [A_i] int32: stack of free blocks
    n_free: jax.Array  # [layers] int32


class Pool(NamedTuple):
    """The pool, per physical entry ``[E, N]`` and per neuron (§4.4-§4.7)."""

    in_pool: jax.Array  # [E, N] bool
    age: jax.Array  # [E, N] int32: step of the last add or replace
    order: jax.Array  # [E, N] int32: pool order key (larger: later)
    born: jax.Array  # [E, N] int32: step the entry's lineage was first added
    lineage: Reservoir  # [E, N, R]: record ids of the entry's lineage
    roster: jax.Array  # [k, N] int32: entries in the pool, in pool order (-1 pad)
    next_order: jax.Array  # [N] int32
    events: jax.Array  # [N, 4] int32: refine, skip, add, evict (pool.EVENTS)


class Net(NamedTuple):
    """One network (one class of a one-vs-all ensemble); the state stacks them on a leading axis."""

    gates: gating.Gates  # normals [N, s, d], offsets [N, s] float32: the gating hyperplanes (fixed)
    slots: Slots
    arena: Arena
    pool: Pool
    hidden: jax.Array  # [A_r, H] float32: the record's input logits of layers 2..L (bias excluded)
    record_contexts: jax.Array  # [A_r, N] int16 (int32 beyond 2^15 contexts): each neuron's context at the record's step

    def with_slots(self, **fields) -> Net:
        return self._replace(slots=self.slots._replace(**fields))

    def with_arena(self, **fields) -> Net:
        return self._replace(arena=self.arena._replace(**fields))

    def with_pool(self, **fields) -> Net:
        return self._replace(pool=self.pool._replace(**fields))


class Records(NamedTuple):
    """Stored steps, shared by the class networks (they see the same ``z`` and ``y``)."""

    z: jax.Array  # [A_r, d] float32
    y: jax.Array  # [A_r] the label (int32), or the real target (float32; rows.label_dtype)
    segment: Reservoir  # [S, R]: record ids sampled from each slot's segment
    free: jax.Array  # [P] int32: rows reserved for the records of steps t .. (next boundary)
    ok: jax.Array  # bool: the last reservation found P free rows


class State(NamedTuple):
    schedule: tree.Schedule
    nets: Net  # leading class-network axis
    records: Records
    key: jax.Array  # uint64 seed of all reservoir randomness (nctl.core.reservoir)


programs.register(State, Net, Slots, Arena, Pool, Reservoir, Records, tree.Schedule)  # the state's types, for programs stored on disk (§6.10)


def init(cfg: EngineConfig, seed: int, depth: int = 0, initial_pool: np.ndarray | None = None) -> State:
    """A fresh state of a learner of seed ``seed``, prepared for step 1; ``initial_pool`` [j, width]
    pre-fills the pool of every neuron of a one-layer, one-context engine (the sequence predictors' tests).
    The hyperplanes are drawn in numpy (``gates``), the rest of the state by one compiled program."""
    return init_state(cfg, jax.random.PRNGKey(seed), depth, initial_pool, gates(cfg, seed))


def init_state(cfg: EngineConfig, key, depth: int, initial_pool, layer_gates: tuple) -> State:
    """``init`` with the hyperplanes ``layer_gates`` (per layer, ``[nets, N_i, s, d]`` and ``[nets, N_i, s]``)."""
    normals = jnp.concatenate([g.normals for g in layer_gates], axis=1)
    offsets = jnp.concatenate([g.offsets for g in layer_gates], axis=1)
    nets = jax.vmap(lambda v, o: _init_net(cfg, v, o, initial_pool))(normals, offsets)
    S, R, P = cfg.slots, cfg.pool.reservoir_size, cfg.chunk
    records = Records(
        z=jnp.zeros((cfg.record_rows, cfg.n_features), jnp.float32),
        y=jnp.zeros(cfg.record_rows, cfg.rows.label_dtype),
        segment=Reservoir(jnp.full((S, R), -1, jnp.int32), jnp.zeros(S, jnp.int32), jnp.zeros(S, jnp.int32)),
        free=jnp.arange(P, dtype=jnp.int32),
        ok=jnp.bool_(True),
    )
    seed = jax.random.bits(jax.random.fold_in(key, 0), dtype=jnp.uint64)
    return State(tree.initial_schedule(S, depth), nets, records, seed)


# ``init_state`` as one compiled program: op by op it is about a hundred small compilations and tens of
# milliseconds per call
init_state = programs.jit(init_state, static_argnums=(0, 2))


def _init_net(cfg: EngineConfig, normals, offsets, initial_pool) -> Net:
    S, k, M, N, C, E = cfg.slots, cfg.pool.capacity, cfg.pool.members, cfg.neurons, cfg.contexts, cfg.entries
    R, W = cfg.pool.reservoir_size, cfg.pool.lanes
    pool_rows = [jnp.zeros((s.neurons, C, E, s.width), cfg.rows.dtype) for s in cfg.layers]
    in_pool = jnp.zeros((E, N), bool)
    if initial_pool is not None and len(initial_pool):
        if len(cfg.layers) != 1 or C != 1 or len(initial_pool) > k:
            raise ValueError("initial_pool needs a one-layer, one-context engine and at most pool_size states")
        stored = jnp.asarray(initial_pool, cfg.rows.dtype)
        pool_rows[0] = pool_rows[0].at[:, 0, : stored.shape[0]].set(stored)
        in_pool = in_pool.at[: stored.shape[0]].set(True)
    order = jnp.broadcast_to(jnp.arange(E, dtype=jnp.int32)[:, None], (E, N))
    roster = pool_roster(in_pool, order, k)
    count = jnp.sum(in_pool, axis=0)
    zeros_skn = jnp.zeros((S, k, N), jnp.int32)
    bounded = cfg.pool.bounded
    return Net(
        gates=gating.Gates(normals, offsets),
        slots=Slots(
            loglik=jnp.zeros((S, M, N), jnp.float64),
            logprior=jnp.broadcast_to(member_log_prior(count, k), (S, M, N)),
            source=jnp.broadcast_to(roster, (S, k, N)),
            detached=jnp.zeros((S, k, N), bool),
            lineage=Reservoir(jnp.full((S, k, N, R), -1, jnp.int32), zeros_skn, zeros_skn),
            log_b=jnp.zeros((S, len(cfg.prior), N), jnp.float64),
            block_of=jnp.full((S, N, C), -1, jnp.int32),
            lanes=jnp.full((S, N, W), -1, jnp.int32) if bounded else None,
            lane_since=jnp.zeros((S, N, W), jnp.int32) if bounded else None,
        ),
        arena=Arena(
            pool_rows=tuple(pool_rows),
            blocks=tuple(jnp.zeros((s.blocks, W, s.width), cfg.rows.dtype) for s in cfg.layers),
            stamps=tuple(jnp.full((s.blocks, W), -1, jnp.int32) for s in cfg.layers) if bounded else None,
            free=tuple(jnp.arange(0 if s.fixed else s.blocks, dtype=jnp.int32)[::-1] for s in cfg.layers),
            n_free=jnp.array([0 if s.fixed else s.blocks for s in cfg.layers], jnp.int32),
        ),
        pool=Pool(
            in_pool=in_pool,
            age=jnp.zeros((E, N), jnp.int32),
            order=order,
            born=jnp.zeros((E, N), jnp.int32),
            lineage=Reservoir(jnp.full((E, N, R), -1, jnp.int32), jnp.zeros((E, N), jnp.int32),
                              jnp.zeros((E, N), jnp.int32)),
            roster=roster,
            next_order=jnp.full(N, E, jnp.int32),
            events=jnp.zeros((N, 4), jnp.int32),
        ),
        hidden=jnp.zeros((cfg.record_rows, cfg.hidden_width), jnp.float32),
        record_contexts=jnp.zeros((cfg.record_rows, N), cfg.context_dtype),
    )


@jax.jit
def with_record_contexts(state: State) -> State:
    """``state`` with every record row's contexts computed from its side information (for saves made
    before the records kept them)."""
    def one_net(net: Net):
        contexts = jax.vmap(lambda z: gating.contexts(net.gates, z))(state.records.z)
        return contexts.astype(net.record_contexts.dtype)

    return state._replace(nets=state.nets._replace(record_contexts=jax.vmap(one_net)(state.nets)))


def pool_roster(in_pool, order, k: int):
    """[k, N]: the entries in the pool in pool order, padded with -1."""
    big = jnp.iinfo(jnp.int32).max
    ranked = stable_order(jnp.where(in_pool, order, big))[:k]
    return jnp.where(jnp.take_along_axis(in_pool, ranked, axis=0), ranked, -1)


def gates(cfg: EngineConfig, seed: int) -> tuple:
    """The hyperplanes that ``init`` gives the state of seed ``seed``: per layer, ``Gates(normals [nets,
    N_i, s, d], offsets [nets, N_i, s])`` (GLN's with the same seed)."""
    return gln.network_gates(seed, cfg.n_nets, cfg.n_features, cfg.layer_sizes, cfg.context_bits)
