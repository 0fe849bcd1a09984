"""The learner's state: per class network (``Net``), the shared records (``Records``), the PTW
schedule; a fresh state (docs/algorithm.md §6.1).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from nctl.core import gating, gln, programs, threefry, tree
from nctl.core.engine.config import EngineConfig
from nctl.core.pool import stable_order
from nctl.core.reservoir import Reservoir
from nctl.deferred import jax, jnp


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


def init(cfg: EngineConfig, seed: int, depth: int = 0, initial_pool: np.ndarray | None = None, xp=np) -> State:
    """A fresh state of a learner of seed ``seed``, prepared for step 1, its arrays made by ``xp``: numpy (a
    state either engine adopts; nothing compiles), or ``jax.numpy`` under ``jax.eval_shape`` (the state's
    shapes, nothing allocated). The hyperplanes are drawn in numpy (``gates``), the reservoirs' seed is
    ``jax.random.bits(fold_in(PRNGKey(seed), 0), uint64)`` (``threefry``). ``initial_pool`` [j, width]
    pre-fills the pool of every neuron of a one-layer, one-context engine (the sequence predictors' tests)."""
    layer_gates = gates(cfg, seed)
    normals = np.concatenate([g.normals for g in layer_gates], axis=1)
    offsets = np.concatenate([g.offsets for g in layer_gates], axis=1)
    S, R, P = cfg.slots, cfg.pool.reservoir_size, cfg.chunk
    records = Records(
        z=xp.zeros((cfg.record_rows, cfg.n_features), np.float32),
        y=xp.zeros(cfg.record_rows, cfg.rows.label_dtype),
        segment=Reservoir(xp.full((S, R), -1, np.int32), xp.zeros(S, np.int32), xp.zeros(S, np.int32)),
        free=xp.arange(P, dtype=np.int32),
        ok=xp.asarray(True),
    )
    schedule = tree.Schedule(xp.asarray(1, np.int32), xp.asarray(depth, np.int32), xp.asarray(1, np.int32),
                             xp.zeros(S, np.int32), xp.ones(S, np.int32))
    reservoir_seed = threefry.uint64_bits(threefry.fold_in(threefry.key(seed), 0))
    return State(schedule, _fresh_nets(xp, cfg, normals, offsets, initial_pool), records,
                 xp.asarray(reservoir_seed, np.uint64))


def _fresh_nets(xp, cfg: EngineConfig, normals: np.ndarray, offsets: np.ndarray, initial_pool) -> Net:
    """Every class network's fresh arrays, a leading class-network axis on each (§6.1): nothing trained,
    nothing stored but ``initial_pool``, every block free."""
    S, k, M, N, C, E = cfg.slots, cfg.pool.capacity, cfg.pool.members, cfg.neurons, cfg.contexts, cfg.entries
    R, W, nets = cfg.pool.reservoir_size, cfg.pool.lanes, cfg.n_nets
    stored = 0 if initial_pool is None else len(initial_pool)
    if stored and (len(cfg.layers) != 1 or C != 1 or stored > k):
        raise ValueError("initial_pool needs a one-layer, one-context engine and at most the pool's size in states")

    def full(shape: tuple, value, dtype):
        return xp.full((nets,) + shape, value, dtype)

    def each_net(values: np.ndarray, shape: tuple):  # the same values [shape's trailing axes] in every slot and net
        return xp.array(xp.broadcast_to(xp.asarray(values), (nets,) + shape))

    pool_rows = [full((s.neurons, C, E, s.width), 0, cfg.rows.dtype) for s in cfg.layers]
    if stored:  # a one-layer, one-context engine: small, built in numpy
        rows = np.zeros((nets, N, 1, E, cfg.layers[0].width), cfg.rows.dtype)
        rows[:, :, 0, :stored] = np.asarray(initial_pool, cfg.rows.dtype)
        pool_rows[0] = xp.asarray(rows)
    members, entries = np.arange(M), np.arange(E)
    # the mixture prior of pool.member_log_prior over ``stored`` copies: each 1/(2 stored), the fresh model 1/2
    # (1 with an empty pool)
    prior = np.where(members < stored, -np.log(2.0 * max(stored, 1)), -np.inf)
    prior[k] = np.log(0.5) if stored else 0.0
    roster = np.where(np.arange(k) < stored, np.arange(k), -1).astype(np.int32)  # pool order is entry order
    bounded = cfg.pool.bounded
    return Net(
        gates=gating.Gates(xp.asarray(normals), xp.asarray(offsets)),
        slots=Slots(
            loglik=full((S, M, N), 0, np.float64),
            logprior=each_net(prior[:, None], (S, M, N)),
            source=each_net(roster[:, None], (S, k, N)),
            detached=full((S, k, N), False, bool),
            lineage=Reservoir(full((S, k, N, R), -1, np.int32), full((S, k, N), 0, np.int32),
                              full((S, k, N), 0, np.int32)),
            log_b=full((S, len(cfg.prior), N), 0, np.float64),
            block_of=full((S, N, C), -1, np.int32),
            lanes=full((S, N, W), -1, np.int32) if bounded else None,
            lane_since=full((S, N, W), 0, np.int32) if bounded else None,
        ),
        arena=Arena(
            pool_rows=tuple(pool_rows),
            blocks=tuple(full((s.blocks, W, s.width), 0, cfg.rows.dtype) for s in cfg.layers),
            stamps=tuple(full((s.blocks, W), -1, np.int32) for s in cfg.layers) if bounded else None,
            free=tuple(each_net(np.arange(0 if s.fixed else s.blocks, dtype=np.int32)[::-1], (0 if s.fixed else s.blocks,))
                       for s in cfg.layers),
            n_free=each_net(np.array([0 if s.fixed else s.blocks for s in cfg.layers], np.int32), (len(cfg.layers),)),
        ),
        pool=Pool(
            in_pool=each_net((entries < stored)[:, None], (E, N)),
            age=full((E, N), 0, np.int32),
            order=each_net(entries.astype(np.int32)[:, None], (E, N)),
            born=full((E, N), 0, np.int32),
            lineage=Reservoir(full((E, N, R), -1, np.int32), full((E, N), 0, np.int32), full((E, N), 0, np.int32)),
            roster=each_net(roster[:, None], (k, N)),
            next_order=full((N,), E, np.int32),
            events=full((N, 4), 0, np.int32),
        ),
        hidden=full((cfg.record_rows, cfg.hidden_width), 0, np.float32),
        record_contexts=full((cfg.record_rows, N), 0, cfg.context_dtype),
    )


def pool_roster(in_pool, order, k: int):
    """[k, N]: the entries in the pool in pool order, padded with -1."""
    big = jnp.iinfo(jnp.int32).max
    ranked = stable_order(jnp.where(in_pool, order, big))[:k]
    return jnp.where(jnp.take_along_axis(in_pool, ranked, axis=0), ranked, -1)


def gates(cfg: EngineConfig, seed: int) -> tuple:
    """The hyperplanes that ``init`` gives the state of seed ``seed``: per layer, ``Gates(normals [nets,
    N_i, s, d], offsets [nets, N_i, s])`` (GLN's with the same seed)."""
    return gln.network_gates(seed, cfg.n_nets, cfg.n_features, cfg.layer_sizes, cfg.context_bits)
