"""The NCTL engine: a network of FMN processes over any row model (docs/algorithm.md §3-§6).

One engine serves NCTL (GGM rows, ``nctl.learners.NCTL``) and the binary sequence predictors (KT
counts, ``nctl.sequence``). Its entry points are the whole contract:

* ``configure(...)`` and ``init(cfg, key)``: a fresh state, prepared for step 1;
* ``learn(state, cfg, X, Y, observe=None)``: learn the rows in order; returns the (possibly enlarged)
  state and configuration, the pre-update predictions and, per step, ``observe(state, cfg)`` taken
  after the step is learned and before its boundary is processed;
* ``predict(state, cfg, X)``: frozen predictions; the state never changes;
* ``learn_then_predict(state, cfg, X, Y, z)``: ``learn``, then ``predict`` of one row, in one compiled
  call where possible (the river path, §6.9).

The state is always *prepared*: the boundary of the next step (closing segments, pool updates,
pruning, the restart) has been processed at the end of the step before (§4.2), so predicting is a
pure read. ``learn`` runs two compiled programs: ``run_steps`` (steps whose boundary needs no pool
update) and ``boundary`` (one pool update, every ``P`` steps), and it enlarges the state when the
record arena or the tree needs room.

Layout (§6): neurons of all layers sit side by side in every per-neuron array (``N`` in all); each
layer keeps its pool entries as ``pool_rows [N_i, C, E, width]`` and its slots' trained rows as
``blocks [A_i, W, width]``, one block (the ``W`` lanes' rows, contiguous) per (slot, neuron, context)
the slot's segment has visited.
A step reads and writes whole blocks; a lane new to its block reads its source row instead (§6.2).

Shapes: ``S`` slots (tree levels), ``k`` pool capacity, ``M = k + 1`` members (fresh last), ``E``
physical pool entries, ``W`` lanes (rows trained per block), ``N`` neurons, ``C`` contexts, ``R``
reservoir size, ``A_r`` record rows, ``d`` features, ``H`` hidden inputs recorded per step.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from functools import lru_cache, partial
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.nn import logsumexp, softmax

from nctl.core import gating, gln, mixing, native, programs, reservoir, tree
from nctl.core.pool import PoolConfig, member_log_prior, stable_order
from nctl.core.rows import GGMRows, KTRows


def jaxlib_version() -> tuple:
    """(major, minor) of the installed jaxlib."""
    from jaxlib.version import __version__

    return tuple(int(part) for part in __version__.split(".")[:2])


VECTORISED_LAYER_BYTES = 4 * 2**20  # without the CPU kernel (§6.11), layers whose slot blocks at one context
# fit in this many bytes are computed several slots at once (SLOT_CHUNK); larger layers loop over the live
# slots one by one. Where the kernel trains GGM rows, it computes every layer's live slots in one call
LANE_PREDICTION_BYTES = 2**20  # a frozen prediction of a layer not computed by XLA many slots at once reads
# every lane's row as a step does where the slots' rows at one context take at most this many bytes; a
# larger layer predicts each pool entry once (source_predictions, §6.2)
SLOT_CHUNK = 8  # on a CPU a small layer computes its live slots' rows in equal chunks of at most this many
# slots (§6.2; other platforms compute every slot at once)
CHUNKED_SLOT_BYTES = 4096  # but only where one slot's rows at one context take at least this many bytes: for
# fewer (an output neuron) the loop costs more than the dead slots it skips
LEARN_BLOCK = 64  # rows per compiled run of steps
PREDICT_BLOCK = 256  # rows per compiled prediction
# XLA:CPU hands small reductions to its YNNPACK library, which costs the river path most (one row per
# call): the engine's programs keep every reduction in XLA's own code (docs/algorithm.md §6.9). jaxlib <
# 0.9 has neither the library nor the option. XLA:GPU's reductions and scatters may add in a different
# order from run to run (atomics): the engine's programs ask for the deterministic ones, so that a seed
# gives the same bits twice. They turn off the pass that makes scatters deterministic by sorting them on
# one flattened index: it moves an update meant to be dropped (an index past an inner axis, or past a
# class network's arrays under vmap) into the next row (§6.9).
COMPILER_OPTIONS = {"gpu": {"xla_gpu_deterministic_ops": True, "xla_gpu_enable_scatter_determinism_expander": False},
                    **({"cpu": {"xla_cpu_experimental_ynn_fusion_type": ""}} if jaxlib_version() >= (0, 9) else {})}
# The pool boundary, a configuration's largest program, runs once every P steps: XLA:CPU's older emitters
# compile it with about 40% less work, to the same bits, at a cost of under a millisecond per boundary
# (docs/algorithm.md §6.8).
BOUNDARY_COMPILER_OPTIONS = {**COMPILER_OPTIONS,
                             "cpu": {**COMPILER_OPTIONS.get("cpu", {}), "xla_cpu_use_fusion_emitters": False}}


def unique_or_drop(index, keep, size: int):
    """``index`` where ``keep``, else a distinct out-of-range index: scatters that drop the rest can then
    promise unique indices, which makes them several times faster on a CPU."""
    spare = size + jnp.arange(int(np.prod(index.shape)), dtype=jnp.int32).reshape(index.shape)
    return jnp.where(keep, index, spare)


def when(predicate, fn, operand):
    """``fn(operand)`` if ``predicate`` else ``operand``, as a loop that runs zero times or once: unlike
    ``lax.cond``, XLA then updates the operand's buffers in place instead of copying them."""
    return jax.lax.while_loop(lambda c: c[0], lambda c: (jnp.bool_(False), fn(c[1])), (predicate, operand))[1]


# ----------------------------------------------------------------------------- configuration


class LayerShape(NamedTuple):
    """Static sizes of one layer."""

    offset: int  # index of its first neuron in the side-by-side arrays
    neurons: int  # N_i
    fan_in: int  # inputs including the bias
    width: int  # row length (GGM: fan_in; KT: 2)
    blocks: int  # A_i: blocks in the arena
    vectorised: bool  # code path: XLA's, many slots at once; else the CPU kernel where built, or a loop over the
    # live slots one by one
    slot_chunk: int  # vectorised, on a CPU: slots per round of the loop over the live ones (all slots: no loop)
    fixed: bool  # blocks at fixed places, (slot, neuron, context) -> (slot N_i + neuron) C + context; no free stack


class EngineConfig(NamedTuple):
    """Everything static about an engine (hashable: it keys compiled programs)."""

    n_features: int
    layer_sizes: tuple
    context_bits: int
    rows: GGMRows | KTRows
    pool: PoolConfig
    prior: tuple  # of tree.TreePrior: the split-probability grid (one point: plain PTW, §3.6)
    n_classes: int  # 2: one binary network; K > 2: K one-vs-all networks
    max_depth: int  # the tree may grow up to this depth: S = max_depth + 1 slots
    record_rows: int  # A_r
    arena_depth: int  # the block arenas hold the blocks of trees up to this depth (<= max_depth)
    layers: tuple  # of LayerShape

    @property
    def slots(self) -> int:
        return self.max_depth + 1

    @property
    def contexts(self) -> int:
        return 2**self.context_bits

    @property
    def chunk(self) -> int:
        """``P = L_min``: pool updates only happen at the boundaries of steps ``t = 1 (mod P)``."""
        return self.pool.min_segment

    @property
    def neurons(self) -> int:
        return sum(self.layer_sizes)

    @property
    def max_closes(self) -> int:
        """``X``: the most segments that can update the pool at one boundary (§6.3)."""
        if not self.pool.capacity:
            return 0
        return max(0, self.max_depth + 1 - self.pool.min_segment_log2)

    @property
    def entries(self) -> int:
        """``E = k + X`` physical pool entries per neuron."""
        return self.pool.capacity + self.max_closes

    @property
    def hidden_width(self) -> int:
        return sum(self.layer_sizes[:-1])

    @property
    def context_dtype(self):
        """The dtype of a recorded context: int16, or int32 beyond 2^15 contexts."""
        return np.dtype(np.int16 if self.contexts <= 2**15 else np.int32)

    @property
    def positives(self) -> np.ndarray:
        """Label that is the positive class of each network."""
        return np.arange(self.n_classes) if self.n_classes > 2 else np.array([1])

    @property
    def n_nets(self) -> int:
        return self.n_classes if self.n_classes > 2 else 1  # len(positives), without building it (per call)


def block_bound(depth: int, contexts: int, chunk: int, neurons: int) -> int:
    """Blocks a layer of ``neurons`` can hold at once (§6.2): a slot at stack position ``p`` covers at most
    ``2^(D-p)`` steps, hence ``min(C, 2^(D-p))`` contexts, and slots that outlive a pool write (``2^(D-p)
    >= 2P``) may be materialised to all ``C``."""
    per_neuron = 0
    for p in range(depth + 1):
        span = 2 ** (depth - p)
        per_neuron += contexts if span >= 2 * chunk else min(contexts, span)
    return neurons * per_neuron


FIXED_BLOCKS_SLACK = 1.125  # a layer keeps its blocks at fixed places when that takes at most this many times
# the blocks its arena would hold at full depth (and that arena is sized at once): §6.2


def configure(n_features: int, layer_sizes, context_bits: int, rows, pool: PoolConfig, prior: tuple,
              n_classes: int, max_depth: int, record_rows: int | None = None,
              arena_depth: int | None = None, fixed_blocks: tuple | None = None) -> EngineConfig:
    """An engine for trees up to ``max_depth`` whose block arenas hold trees up to ``arena_depth``
    (default ``max_depth``; ``learn`` enlarges them as a growing tree deepens) (§6.2, §6.5). Which
    layers keep their blocks at fixed places: ``fixed_blocks`` (one bool per layer), by default those
    where that costs at most ``FIXED_BLOCKS_SLACK`` times the arena's blocks at full depth, and that
    arena is small enough to be sized at once."""
    pool = pool.validate()
    arena_depth = max_depth if arena_depth is None else min(arena_depth, max_depth)
    contexts = 2**context_bits
    shapes, offset = [], 0
    for n, fan_in in zip(layer_sizes, gln.fan_ins(n_features, layer_sizes)):
        width = rows.width(fan_in)
        blocks = block_bound(arena_depth, contexts, pool.min_segment, n)
        one_slot_bytes = slot_rows_bytes(n, pool.lanes, width)
        shapes.append(LayerShape(offset, n, fan_in, width, blocks, _vectorised((max_depth + 1) * one_slot_bytes, rows),
                                 _slot_chunk(max_depth + 1, one_slot_bytes), False))
        offset += n
    cfg = EngineConfig(n_features, tuple(layer_sizes), context_bits, rows, pool, prior, n_classes, max_depth,
                       record_rows or 0, arena_depth, tuple(shapes))
    if fixed_blocks is None:
        eager = lean_arena_depth(cfg, 0) == max_depth
        fixed_blocks = [eager and cfg.slots * s.neurons * contexts
                        <= FIXED_BLOCKS_SLACK * block_bound(max_depth, contexts, pool.min_segment, s.neurons)
                        for s in shapes]
    cfg = cfg._replace(layers=tuple(s._replace(fixed=True, blocks=cfg.slots * s.neurons * contexts) if fixed else s
                                    for s, fixed in zip(shapes, fixed_blocks)))
    return cfg if record_rows is not None else cfg._replace(record_rows=initial_record_rows(cfg))


def slot_rows_bytes(neurons: int, lanes: int, width: int) -> int:
    """Bytes of one slot's rows of a layer at one context (float32)."""
    return neurons * lanes * width * 4


def _vectorised(slot_bytes: int, rows) -> bool:
    """Whether a layer whose slot blocks at one context take ``slot_bytes`` is computed by XLA many
    slots at once (§6.2), or otherwise: by the kernel, on a CPU where it is built (§6.11), else slot by
    slot."""
    if jax.default_backend() == "cpu" and kernel_trains(rows):
        return False
    return slot_bytes <= VECTORISED_LAYER_BYTES


def _slot_chunk(slots: int, one_slot_bytes: int) -> int:
    """Slots per round where a vectorised layer computes its live slots only, on a CPU (§6.2): ``slots``
    in ``ceil(slots / SLOT_CHUNK)`` equal chunks, or all at once where one slot's rows take fewer than
    ``CHUNKED_SLOT_BYTES``."""
    if one_slot_bytes < CHUNKED_SLOT_BYTES:
        return slots
    return -(-slots // -(-slots // SLOT_CHUNK))


def kernel_trains(rows) -> bool:
    """Whether the CPU kernel (§6.11) trains rows of this kind: GGM rows, where the kernel is built."""
    return isinstance(rows, GGMRows) and native.enabled()


EAGER_RECORD_BYTES = 64 * 2**20  # record arenas this small hold every record the pools can name from the start


def initial_record_rows(cfg: EngineConfig) -> int:
    """Rows of a new record arena (§6.5): room for every record that the pool entries' lineages and the
    live segments' reservoirs can name (``nets E N R + S R + 2P``) when that takes at most
    ``EAGER_RECORD_BYTES``, so that a stream (almost) never doubles the arena, which would compile new
    programs mid-stream; else ``R (D + 5) + 2P``, doubled when full."""
    R, P = cfg.pool.reservoir_size, cfg.chunk
    lazy = R * (cfg.max_depth + 5) + 2 * P
    named = cfg.n_nets * cfg.entries * cfg.neurons * R + cfg.slots * R + 2 * P
    row_bytes = (4 * (cfg.n_features + 1 + cfg.n_nets * cfg.hidden_width)
                 + cfg.n_nets * cfg.neurons * cfg.context_dtype.itemsize)
    return max(lazy, named) if named * row_bytes <= EAGER_RECORD_BYTES else lazy


def max_depth_for(n_steps: int) -> int:
    """The smallest ``max_depth`` whose state learns ``n_steps`` steps without growing: after step ``n``
    the state is prepared for step ``n + 1`` (§6.1), so the tree must hold ``n + 1`` steps."""
    return tree.depth_for(n_steps + 1)


EAGER_ARENA_BYTES = 64 * 2**20  # arenas this small are sized for max_depth at once: never enlarged
ARENA_HEADROOM = 3  # an enlarged arena holds trees this many levels deeper than the tree needs
MIN_ARENA_DEPTH = 12  # and trees of at least 2^12 steps: the first enlargement comes late enough in the
# stream for its programs to be compiled ahead (§6.8)


def lean_arena_depth(cfg: EngineConfig, n_steps: int) -> int:
    """The arena depth for a growing tree that has seen ``n_steps`` steps: ``max_depth`` when the full
    arenas are small (no later enlargement, no recompilation), else the depth the tree reaches within the
    next ``P`` steps plus ``ARENA_HEADROOM`` levels (at least ``MIN_ARENA_DEPTH``), so that the arenas
    grow with the live tree levels."""
    full = sum(block_bound(cfg.max_depth, cfg.contexts, cfg.chunk, s.neurons) * cfg.pool.lanes * s.width
               for s in cfg.layers) * np.dtype(cfg.rows.dtype).itemsize * cfg.n_nets
    if full <= EAGER_ARENA_BYTES:
        return cfg.max_depth
    return min(cfg.max_depth, max(MIN_ARENA_DEPTH, tree.depth_for(n_steps + cfg.chunk) + ARENA_HEADROOM))


# ----------------------------------------------------------------------------- state


class Net(NamedTuple):
    """One network (one class of a one-vs-all ensemble); the state stacks them on a leading axis."""

    normals: jax.Array  # [N, s, d] float32: gating hyperplanes (fixed)
    offsets: jax.Array  # [N, s] float32
    # per slot
    loglik: jax.Array  # [S, M, N] float64: segment log likelihood of each member
    logprior: jax.Array  # [S, M, N] float64: mixture prior (-inf: no such member)
    source: jax.Array  # [S, k, N] int32: physical entry each stored member was copied from (-1: none)
    detached: jax.Array  # [S, k, N] bool: the entry was reused since; the lineage lives in the slot
    slot_lineage: jax.Array  # [S, k, N, R] int32: lineage of detached members
    slot_lineage_n: jax.Array  # [S, k, N] int32
    slot_lineage_seen: jax.Array  # [S, k, N] int32
    log_b: jax.Array  # [S, A, N] float64: PTW completed-left-sibling weight, per tree level and split probability
    block_of: jax.Array  # [S, N, C] int32: block of (slot, neuron, context); -1 not yet created
    lanes: jax.Array | None  # [S, N, W] int32: member trained in each lane (bounded mode; -1 none)
    lane_since: jax.Array | None  # [S, N, W] int32: step at which the lane's member took it
    # per layer
    pool_rows: tuple  # of [N_i, C, E, width]: the stored states
    blocks: tuple  # of [A_i, W, width]: the slots' trained rows, one block per (slot, neuron, context)
    stamps: tuple | None  # of [A_i, W] int32: step each block row was filled (bounded mode)
    free: tuple  # of [A_i] int32: stack of free blocks
    n_free: jax.Array  # [layers] int32
    # pool, per physical entry
    in_pool: jax.Array  # [E, N] bool
    age: jax.Array  # [E, N] int32: step of the last add or replace
    order: jax.Array  # [E, N] int32: pool order key (larger: later)
    born: jax.Array  # [E, N] int32: step the entry's lineage was first added
    lineage: jax.Array  # [E, N, R] int32: record ids of the entry's lineage reservoir
    lineage_n: jax.Array  # [E, N] int32
    lineage_seen: jax.Array  # [E, N] int32
    roster: jax.Array  # [k, N] int32: entries in the pool, in pool order (-1 pad)
    next_order: jax.Array  # [N] int32
    events: jax.Array  # [N, 4] int32: refine, skip, add, evict (pool.EVENTS)
    hidden: jax.Array  # [A_r, H] float32: the record's input logits of layers 2..L (bias excluded)
    record_contexts: jax.Array  # [A_r, N] int16 (int32 beyond 2^15 contexts): each neuron's context at the record's step


class Records(NamedTuple):
    """Stored steps, shared by the class networks (they see the same ``z`` and ``y``)."""

    z: jax.Array  # [A_r, d] float32
    y: jax.Array  # [A_r] int32
    segment: jax.Array  # [S, R] int32: record ids sampled from each slot's segment
    segment_n: jax.Array  # [S] int32
    segment_seen: jax.Array  # [S] int32
    free: jax.Array  # [P] int32: rows reserved for the records of steps t .. (next boundary)
    ok: jax.Array  # bool: the last reservation found P free rows


class State(NamedTuple):
    schedule: tree.Schedule
    nets: Net  # leading class-network axis
    records: Records
    key: jax.Array  # uint64 seed of all reservoir randomness (nctl.core.reservoir)


programs.register(State, Net, Records, tree.Schedule)  # the state's types, for programs stored on disk (§6.10)


def per_net(fn, *args, keep_axis: bool = False):
    """``fn`` over the class networks (the leading axis of ``args``): vmapped, or called directly when
    there is one network, which keeps the traced program small (a binary learner's first call).
    ``keep_axis`` vmaps one network too: the CPU kernel that updates blocks in place (§6.11) must receive
    the state's own buffer, and XLA hands it a copy of a reshaped one."""
    if jax.tree.leaves(args[0])[0].shape[0] == 1 and not keep_axis:
        out = fn(*jax.tree.map(lambda a: a[0], args))
        return jax.tree.map(lambda a: a[None], out)
    return jax.vmap(fn, axis_name=NET_AXIS)(*args)


NET_AXIS = "nets"


def any_net(flag):
    """``flag`` of any class network, inside ``per_net``'s vmap (``flag`` itself outside it). A loop whose
    condition is per network becomes, under vmap, a select of its whole carry per iteration: a copy of
    the network's arenas. With the condition shared, the loop runs in place, and a body that masks its
    writes by each network's own flag leaves the finished networks unchanged."""
    try:
        return jax.lax.psum(flag.astype(jnp.int32), NET_AXIS) > 0
    except NameError:  # one network: not vmapped
        return flag


def init(cfg: EngineConfig, key, depth: int = 0, initial_pool: np.ndarray | None = None) -> State:
    """A fresh state prepared for step 1; ``initial_pool`` [j, width] pre-fills the pool of every neuron
    of a one-layer, one-context engine (the sequence predictors' tests). Two kinds of compiled program:
    the hyperplanes (``gln.network_gates``, shared by every configuration with these layers, GLN's
    included) and the rest of the state."""
    return _init(cfg, key, depth, initial_pool, gates(cfg, key))


def _init(cfg: EngineConfig, key, depth: int, initial_pool, layer_gates: tuple) -> State:
    """``init`` with the hyperplanes ``layer_gates`` (per layer, ``[nets, N_i, s, d]`` and ``[nets, N_i, s]``)."""
    normals = jnp.concatenate([g.normals for g in layer_gates], axis=1)
    offsets = jnp.concatenate([g.offsets for g in layer_gates], axis=1)
    nets = jax.vmap(lambda v, o: _init_net(cfg, v, o, initial_pool))(normals, offsets)
    S, R, P = cfg.slots, cfg.pool.reservoir_size, cfg.chunk
    records = Records(
        z=jnp.zeros((cfg.record_rows, cfg.n_features), jnp.float32),
        y=jnp.zeros(cfg.record_rows, jnp.int32),
        segment=jnp.full((S, R), -1, jnp.int32),
        segment_n=jnp.zeros(S, jnp.int32),
        segment_seen=jnp.zeros(S, jnp.int32),
        free=jnp.arange(P, dtype=jnp.int32),
        ok=jnp.bool_(True),
    )
    seed = jax.random.bits(jax.random.fold_in(key, 0), dtype=jnp.uint64)
    return State(tree.initial_schedule(S, depth), nets, records, seed)


# ``_init`` as one compiled program: op by op it is about a hundred small compilations and tens of
# milliseconds per call
_init = programs.jit(_init, static_argnums=(0, 2))


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
    roster = _roster(in_pool, order, k)
    count = jnp.sum(in_pool, axis=0)
    zeros_skn = jnp.zeros((S, k, N), jnp.int32)
    bounded = cfg.pool.bounded
    return Net(
        normals=normals,
        offsets=offsets,
        loglik=jnp.zeros((S, M, N), jnp.float64),
        logprior=jnp.broadcast_to(member_log_prior(count, k), (S, M, N)),
        source=jnp.broadcast_to(roster, (S, k, N)),
        detached=jnp.zeros((S, k, N), bool),
        slot_lineage=jnp.full((S, k, N, R), -1, jnp.int32),
        slot_lineage_n=zeros_skn,
        slot_lineage_seen=zeros_skn,
        log_b=jnp.zeros((S, len(cfg.prior), N), jnp.float64),
        block_of=jnp.full((S, N, C), -1, jnp.int32),
        lanes=jnp.full((S, N, W), -1, jnp.int32) if bounded else None,
        lane_since=jnp.zeros((S, N, W), jnp.int32) if bounded else None,
        pool_rows=tuple(pool_rows),
        blocks=tuple(jnp.zeros((s.blocks, W, s.width), cfg.rows.dtype) for s in cfg.layers),
        stamps=tuple(jnp.full((s.blocks, W), -1, jnp.int32) for s in cfg.layers) if bounded else None,
        free=tuple(jnp.arange(0 if s.fixed else s.blocks, dtype=jnp.int32)[::-1] for s in cfg.layers),
        n_free=jnp.array([0 if s.fixed else s.blocks for s in cfg.layers], jnp.int32),
        in_pool=in_pool,
        age=jnp.zeros((E, N), jnp.int32),
        order=order,
        born=jnp.zeros((E, N), jnp.int32),
        lineage=jnp.full((E, N, R), -1, jnp.int32),
        lineage_n=jnp.zeros((E, N), jnp.int32),
        lineage_seen=jnp.zeros((E, N), jnp.int32),
        roster=roster,
        next_order=jnp.full(N, E, jnp.int32),
        events=jnp.zeros((N, 4), jnp.int32),
        hidden=jnp.zeros((cfg.record_rows, cfg.hidden_width), jnp.float32),
        record_contexts=jnp.zeros((cfg.record_rows, N), cfg.context_dtype),
    )


@jax.jit
def with_record_contexts(state: State) -> State:
    """``state`` with every record row's contexts computed from its side information (for saves made
    before the records kept them)."""
    def one_net(net: Net):
        gates = gating.Gates(net.normals, net.offsets)
        contexts = jax.vmap(lambda z: gating.contexts(gates, z))(state.records.z)
        return contexts.astype(net.record_contexts.dtype)

    return state._replace(nets=state.nets._replace(record_contexts=jax.vmap(one_net)(state.nets)))


def _roster(in_pool, order, k: int):
    """[k, N]: the entries in the pool in pool order, padded with -1."""
    big = jnp.iinfo(jnp.int32).max
    ranked = stable_order(jnp.where(in_pool, order, big))[:k]
    return jnp.where(jnp.take_along_axis(in_pool, ranked, axis=0), ranked, -1)


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
    from nctl.core import boundary

    return boundary.reserve_records(State(sched, nets, records, state.key), new)[0]


def gates(cfg: EngineConfig, key) -> tuple:
    """The hyperplanes that ``init`` gives the state: per layer, ``Gates(normals [nets, N_i, s, d],
    offsets [nets, N_i, s])`` (GLN's with the same seed)."""
    return gln.network_gates(key, cfg.n_nets, cfg.n_features, cfg.layer_sizes, cfg.context_bits)


# ----------------------------------------------------------------------------- weights of members


def source_weights(net: Net, layer: int, cfg: EngineConfig, slot, member, neuron, context):
    """The row a member starts from (§4.1): its pool entry, or the initial weights for the fresh model
    and absent members. ``slot``, ``member``, layer-local ``neuron``, ``context`` broadcast together."""
    shape = cfg.layers[layer]
    init = jnp.asarray(cfg.rows.init_value(shape.fan_in), cfg.rows.dtype)
    if not cfg.pool.capacity:
        items = jnp.broadcast_shapes(jnp.shape(slot), jnp.shape(member), jnp.shape(neuron), jnp.shape(context))
        return jnp.broadcast_to(init, items + (shape.width,))
    entry = source_entry(net, layer, cfg, slot, member, neuron)
    rows = net.pool_rows[layer][neuron, context, jnp.maximum(entry, 0)]
    return jnp.where((entry >= 0)[..., None], rows, init)


def source_entry(net: Net, layer: int, cfg: EngineConfig, slot, member, neuron):
    """The pool entry a member starts from, or -1 for the initial weights (the fresh model, absent
    members, empty pools)."""
    k = cfg.pool.capacity
    if not k:
        return jnp.full(jnp.broadcast_shapes(jnp.shape(slot), jnp.shape(member), jnp.shape(neuron)), -1, jnp.int32)
    entry = net.source[slot, jnp.clip(member, 0, k - 1), cfg.layers[layer].offset + neuron]
    return jnp.where((member >= 0) & (member < k) & (entry >= 0), entry, -1)


def _lane(net: Net, layer: int, cfg: EngineConfig, slot, member, neuron, block):
    """Lane of ``member`` in its (slot, neuron) and whether that lane's row in ``block`` is current."""
    if not cfg.pool.bounded:
        return member, block >= 0
    col = cfg.layers[layer].offset + neuron
    matches = net.lanes[slot, col] == jnp.asarray(member)[..., None]
    lane = jnp.argmax(matches, axis=-1)
    stamp = net.stamps[layer][jnp.maximum(block, 0), lane]
    return lane, (block >= 0) & jnp.any(matches, axis=-1) & (stamp >= net.lane_since[slot, col, lane])


def member_row(net: Net, layer: int, cfg: EngineConfig, slot, member, neuron, context):
    """Where the row ``member`` of ``slot`` predicts with at ``context`` lies: ``(block, lane, owns)``, its
    trained row ``blocks[block, lane]`` where ``owns``, else its source row (``source_weights``, §6.2)."""
    block = net.block_of[slot, cfg.layers[layer].offset + neuron, context]
    lane, owns = _lane(net, layer, cfg, slot, member, neuron, block)
    return block, lane, owns


def member_weights(net: Net, layer: int, cfg: EngineConfig, slot, member, neuron, context):
    """The row ``member`` of ``slot`` predicts with at ``context`` (``member_row``). Arguments broadcast
    together; -> [..., width]."""
    block, lane, owns = member_row(net, layer, cfg, slot, member, neuron, context)
    trained = net.blocks[layer][jnp.maximum(block, 0), lane]
    return jnp.where(owns[..., None], trained, source_weights(net, layer, cfg, slot, member, neuron, context))


# ----------------------------------------------------------------------------- posteriors


class Posterior(NamedTuple):
    alpha: jax.Array  # [S, M, N] member posterior within each slot
    level: jax.Array  # [S, N] pi: posterior that the current step lies in each tree level's node
    mass: jax.Array  # [S, N] the same summed per slot
    log_evidence: jax.Array  # [N] log FMN(x_{1:t}) of every neuron


def mixture_posterior(logits, dtype):
    """``softmax`` over members and ``log sum exp`` of the float64 ``logits`` [S, M, N], with one
    exponential pass in ``dtype``, the precision of the members' predictions (float32 for GGM rows,
    §1.3; float64 for KT counts)."""
    top = jnp.max(logits, axis=1, keepdims=True)
    weights = jnp.exp((logits - top).astype(dtype))
    total = jnp.sum(weights, axis=1)
    return weights / total[:, None], top[:, 0] + jnp.log(total).astype(jnp.float64)


@jax.named_scope("posterior")
def posterior(net: Net, sched: tree.Schedule, cfg: EngineConfig) -> Posterior:
    """``alpha = softmax_m(log lambda + L)``, ``pi_j = softmax_j(Lambda_j + R_canon(j))`` summed per slot (§3.3)."""
    live = (jnp.arange(cfg.slots) < sched.size)[:, None, None]
    alpha, log_r = mixture_posterior(jnp.where(live, net.logprior + net.loglik, 0.0), cfg.rows.dtype)
    canon = tree.canonical_slots(sched)
    level_logits = tree.mixed_level_log_prior(net.log_b, sched.depth, cfg.prior) + log_r[canon]
    pi = softmax(level_logits, axis=0)
    return Posterior(alpha, pi, jnp.zeros_like(log_r).at[canon].add(pi), logsumexp(level_logits, axis=0))


def top_members(weights, count: int):
    """The indices of the ``count`` largest of ``weights`` [..., M], largest first, ties lower index first
    (``lax.top_k``'s order). Each member's rank is counted by comparing it with every other: M^2
    comparisons per node, where XLA:CPU sorts each node's M members by calling a comparator."""
    members = jnp.arange(weights.shape[-1])
    ahead = (weights[..., None, :] > weights[..., :, None]) | (
        (weights[..., None, :] == weights[..., :, None]) & (members[None, :] < members[:, None]))
    rank = jnp.sum(ahead, axis=-1, dtype=jnp.int32)  # [..., M]: members ranked ahead of each
    return jnp.argmax(rank[..., None, :] == jnp.arange(count)[:, None], axis=-1).astype(jnp.int32)


@jax.named_scope("assign_lanes")
def assign_lanes(net: Net, sched: tree.Schedule, cfg: EngineConfig):
    """Bounded mode (§5.3): the ``W`` most probable members of every node hold the lanes; a member that
    stays keeps its lane, newcomers take the lanes given up, in rank order. -> (lanes, lane_since).
    Members are ranked by their float64 log weights ``log lambda_m + L_m``, the order of ``alpha`` without
    its float32 exponentials (whose last bits differ between platforms and can make or break a tie)."""
    W = cfg.pool.lanes
    log_weight = jnp.moveaxis(net.logprior + net.loglik, 1, 2)  # [S, N, M]
    valid = jnp.moveaxis(net.logprior > -jnp.inf, 1, 2)
    desired = top_members(jnp.where(valid, log_weight, -jnp.inf), W)  # [S, N, W]
    desired = jnp.where(jnp.take_along_axis(valid, desired, axis=2), desired, -1)
    held = net.lanes
    keep = jnp.any(held[..., :, None] == desired[..., None, :], axis=-1) & (held >= 0)
    placed = jnp.any(desired[..., :, None] == held[..., None, :], axis=-1) | (desired < 0)
    newcomer_rank = jnp.cumsum(~placed, axis=-1) - 1
    open_rank = jnp.cumsum(~keep, axis=-1) - 1
    take = (~keep[..., :, None]) & (~placed[..., None, :]) & (open_rank[..., :, None] == newcomer_rank[..., None, :])
    newcomer = jnp.max(jnp.where(take, desired[..., None, :], -1), axis=-1)
    lanes = jnp.where(keep, held, newcomer)
    since = jnp.where(keep, net.lane_since, sched.t)
    live = (jnp.arange(cfg.slots) < sched.size)[:, None, None]
    return jnp.where(live, lanes, net.lanes), jnp.where(live, since, net.lane_since)


# ----------------------------------------------------------------------------- blocks


@jax.named_scope("allocate")
def allocate(net: Net, layer: int, cfg: EngineConfig, need, slot, neuron, context):
    """New blocks for the (slot, neuron, context) items where ``need`` (arrays that broadcast together);
    returns the net and the item's block (new where needed): the item's fixed place in a layer with
    fixed blocks, else the top of the layer's free stack (§6.2)."""
    shape = cfg.layers[layer]
    col = shape.offset + neuron
    if shape.fixed:
        ids = ((slot * shape.neurons + neuron) * cfg.contexts + context).astype(jnp.int32)
        block = jnp.where(need, ids, net.block_of[slot, col, context])
        return net._replace(block_of=net.block_of.at[slot, col, context].set(block)), block
    rank = (jnp.cumsum(need.reshape(-1)) - 1).reshape(need.shape)
    top = net.n_free[layer]
    ids = net.free[layer][jnp.clip(top - 1 - rank, 0, shape.blocks - 1)]
    block = jnp.where(need, ids, net.block_of[slot, col, context])
    block_of = net.block_of.at[slot, col, context].set(block)
    return net._replace(block_of=block_of, n_free=net.n_free.at[layer].add(-jnp.sum(need, dtype=jnp.int32))), block


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
        blocks = net.blocks[layer].reshape(-1, shape.width).at[dest.reshape(-1)].set(
            rows.reshape(-1, shape.width), mode="drop", unique_indices=True).reshape(shape.blocks, W, shape.width)
        return net._replace(blocks=_put(net.blocks, layer, blocks))

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


def _put(items: tuple, index: int, value) -> tuple:
    return items[:index] + (value,) + items[index + 1:]


@jax.named_scope("free_blocks")
def free_blocks(net: Net, first, stop, cfg: EngineConfig) -> Net:
    """Return the blocks of slots ``first .. stop - 1`` to their layers' free stacks (a layer with fixed
    blocks has none: a slot's places wait for the next slot pushed at its stack position)."""
    stacked = [index for index, shape in enumerate(cfg.layers) if not shape.fixed]
    if not stacked:
        return net

    def one_slot(p, net):
        free, n_free = list(net.free), net.n_free
        for index in stacked:
            shape = cfg.layers[index]
            ids = net.block_of[p, shape.offset:shape.offset + shape.neurons].reshape(-1)
            held = ids >= 0
            at = unique_or_drop(n_free[index] + running_count(held) - 1, held, shape.blocks)
            free[index] = free[index].at[at].set(ids, mode="drop", unique_indices=True)
            n_free = n_free.at[index].add(jnp.sum(held, dtype=jnp.int32))
        return net._replace(free=tuple(free), n_free=n_free)

    return jax.lax.fori_loop(first, stop, one_slot, net)


# ----------------------------------------------------------------------------- one layer


def uses_kernel(cfg: EngineConfig, shape: LayerShape) -> bool:
    """Whether a layer's rows go through the CPU kernel (§6.11) when the engine runs on a CPU: GGM rows
    of a layer computed slot by slot, where the kernel is built."""
    return not shape.vectorised and kernel_trains(cfg.rows)


def row_predictions(cfg: EngineConfig, rows, u, kernel: bool):
    """``cfg.rows.predict(rows, u)`` (``u`` one [K] or one per row); where ``kernel``, with the CPU
    kernel's dot product, so that every prediction of a state in a layer that uses it rounds alike (§6.11)."""
    if not kernel:
        return cfg.rows.predict(rows, u)
    return jax.lax.platform_dependent(rows, cpu=lambda r: native.row_predictions(r, u, cfg.rows.prob_eps),
                                      default=lambda r: cfg.rows.predict(r, u))


@jax.named_scope("layer_pass")
def layer_pass(net: Net, layer: int, cfg: EngineConfig, sched: tree.Schedule, contexts, u, x, learn: bool):
    """Every member's prediction ``q`` [S, M, N_i] for layer ``layer`` on inputs ``u`` [K] and, when
    learning, every trained row of every live slot updated on ``x`` (§1.3). Returns (net, q)."""
    shape = cfg.layers[layer]
    W, S = cfg.pool.lanes, cfg.slots
    neurons = jnp.arange(shape.neurons)
    positions = jnp.arange(S)[:, None]
    live = jnp.arange(S) < sched.size
    block = net.block_of[positions, shape.offset + neurons, contexts]  # [S, N_i]
    if cfg.pool.bounded:
        member = net.lanes[:, shape.offset + neurons]  # [S, N_i, W]
        stamp = net.stamps[layer][jnp.maximum(block, 0)]
        current = (block >= 0)[..., None] & (member >= 0) & (stamp >= net.lane_since[:, shape.offset + neurons])
    else:
        member = jnp.broadcast_to(jnp.arange(W), (S, shape.neurons, W))
        current = jnp.broadcast_to((block >= 0)[..., None], member.shape)

    stale = live[:, None, None] & (member >= 0) & ~current  # lanes new to their block: trained from their sources
    if learn:
        net, block = allocate(net, layer, cfg, live[:, None] & (block < 0), positions, neurons, contexts)

    blocks = net.blocks[layer]  # gathers and scatters move whole blocks, kept [W, width] (no layout copy)
    read = jnp.where(live[:, None], block, 0)
    write = unique_or_drop(block, live[:, None], shape.blocks)
    # every member has a lane unless bounded: a small layer then predicts as it learns, each lane from its
    # block or its source row; a large one predicts each pool entry once instead (source_predictions, §6.2)
    whole = not cfg.pool.bounded and (learn or shape.vectorised or
                                      cfg.slots * slot_rows_bytes(shape.neurons, W, shape.width) <= LANE_PREDICTION_BYTES)
    from_sources = learn or whole  # lanes new to their block read their source rows (else their blocks only)

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
        ``chunk`` with slots that are not live); slots past the live ones' last chunk predict 1/2."""
        rounds = -(-S // chunk)
        extra = rounds * chunk - S
        pad = lambda a, fill: jnp.pad(a, [(0, extra)] + [(0, 0)] * (a.ndim - 1), constant_values=fill)
        padded_write = unique_or_drop(pad(block, -1), pad(live, False)[:, None], shape.blocks) if extra else write
        items = (pad(member, 0), pad(read, 0), padded_write, pad(stale, False))

        def body(r, carry):
            at = r * chunk
            taken = [jax.lax.dynamic_slice_in_dim(a, at, chunk) for a in items]
            blocks, q = train(carry[0], (at + jnp.arange(chunk))[:, None, None], *taken)
            return blocks, jax.lax.dynamic_update_slice_in_dim(carry[1], q, at, 0)

        q = jnp.full((rounds * chunk, shape.neurons, W), 0.5, cfg.rows.dtype)
        blocks, q = jax.lax.fori_loop(0, (sched.size + chunk - 1) // chunk, body, (blocks, q))
        return blocks, q[:S]

    @jax.named_scope("train_rows")
    def train_native(blocks):
        """``train`` for every live slot at once, in place, by the CPU kernel (§6.11); lanes new to their
        block read their sources where ``train``'s do (``from_sources``)."""
        entry = source_entry(net, layer, cfg, positions[..., None], member, neurons[:, None])
        new_lanes = stale if from_sources else jnp.zeros_like(stale)
        return native.ggm_rows(blocks, net.pool_rows[layer], read, write, entry, new_lanes, contexts, u, x,
                               sched.size, cfg.rows, learn=learn)

    all_slots = lambda blocks: train(blocks, positions[..., None], member, read, write, stale)
    if shape.vectorised and shape.slot_chunk < S:
        # on a CPU the live slots only, chunk by chunk; elsewhere every slot at once (a loop's every round
        # waits for the device there)
        blocks, q = jax.lax.platform_dependent(blocks, cpu=partial(train_slots, chunk=shape.slot_chunk), default=all_slots)
    elif shape.vectorised:
        blocks, q = all_slots(blocks)
    elif uses_kernel(cfg, shape):
        blocks, q = jax.lax.platform_dependent(blocks, cpu=train_native, default=partial(train_slots, chunk=1))
    else:
        blocks, q = train_slots(blocks, 1)
    net = net._replace(blocks=_put(net.blocks, layer, blocks))
    if learn and cfg.pool.bounded:  # the lanes just started from their sources are current from now on
        filled = unique_or_drop(block[..., None] * W + jnp.arange(W), stale, shape.blocks * W)
        stamps = net.stamps[layer].reshape(-1).at[filled.reshape(-1)].set(sched.t, mode="drop", unique_indices=True)
        net = net._replace(stamps=_put(net.stamps, layer, stamps.reshape(shape.blocks, W)))
    if whole:
        return net, jnp.moveaxis(q, 2, 1)

    return net, source_predictions(net, layer, cfg, contexts, u, q, member, current, live, learn)


def entry_predictions(cfg: EngineConfig, pool_rows, contexts, u, kernel: bool):
    """``q`` [N_i, E] of every pool entry (``pool_rows`` [N_i, C, E, width]) of each neuron at its context;
    where ``kernel``, by the CPU kernel, which reads the entries where they are stored (§6.11)."""
    def gathered(pool_rows):
        neurons, contexts_each, entries, width = pool_rows.shape
        rows = pool_rows.reshape(neurons * contexts_each, -1)[jnp.arange(neurons) * contexts_each + contexts]
        return cfg.rows.predict(rows.reshape(neurons, entries, width), u)

    if not kernel:
        return gathered(pool_rows)
    return jax.lax.platform_dependent(
        pool_rows, cpu=lambda rows: native.entry_predictions(rows, contexts, u, cfg.rows.prob_eps), default=gathered)


@jax.named_scope("source_predictions")
def source_predictions(net: Net, layer: int, cfg: EngineConfig, contexts, u, q, member, current, live, learn: bool):
    """The lanes' predictions ``q`` [S, N_i, W] completed to every member, [S, M, N_i]: members without a
    lane, and (when predicting) lanes not trained in their slot's block yet, predict with their source
    row; each pool entry is predicted once per step. Bounded mode, and large layers' frozen predictions
    (§6.2, §6.6)."""
    shape = cfg.layers[layer]
    k, S = cfg.pool.capacity, cfg.slots
    neurons = jnp.arange(shape.neurons)
    positions = jnp.arange(S)[:, None]
    kernel = uses_kernel(cfg, shape)
    q_entries = entry_predictions(cfg, net.pool_rows[layer], contexts, u, kernel)  # [N_i, E]
    q_fresh = row_predictions(cfg, jnp.full((shape.width,), cfg.rows.init_value(shape.fan_in), cfg.rows.dtype), u, kernel)
    source = jnp.moveaxis(net.source[:, :, shape.offset + neurons], 1, 2)  # [S, N_i, k]
    stored = jnp.where(source >= 0, q_entries[neurons[None, :, None], jnp.maximum(source, 0)], q_fresh)
    frozen = jnp.concatenate([stored, jnp.broadcast_to(q_fresh, (S, shape.neurons, 1))], axis=2)  # [S, N_i, M]
    if not learn:  # lanes not trained in this slot's block yet read their sources
        current = current & live[:, None, None]
        q = jnp.where(current, q, jnp.take_along_axis(frozen, jnp.clip(member, 0, k), axis=2))
    # each lane's prediction to its member (a node's lanes hold distinct members), by one flat index: a
    # lane without a member is dropped past the array's end, where an index past the member axis alone
    # would be wrapped into the next slot's first member by XLA:GPU's deterministic scatter (§6.9)
    M = k + 1
    flat = (positions[..., None] * shape.neurons + neurons[None, :, None]) * M + member  # [S, N_i, W]
    index = unique_or_drop(flat, member >= 0, S * shape.neurons * M)
    q_members = frozen.reshape(-1).at[index.reshape(-1)].set(q.reshape(-1), mode="drop", unique_indices=True)
    return jnp.moveaxis(q_members.reshape(frozen.shape), 2, 1)


# ----------------------------------------------------------------------------- one step


class Forward(NamedTuple):
    net: Net
    p: jax.Array  # output neuron's prediction
    hidden: jax.Array  # [H] input logits of layers 2..L (the step's record)
    contexts: jax.Array  # [N] every neuron's context (the step's record)
    q: tuple  # per layer [S, M, N_i] member predictions


def forward(net: Net, sched: tree.Schedule, z, x, cfg: EngineConfig, learn: bool) -> Forward:
    """Every layer in order: member predictions, node mixtures ``nu``, neuron outputs
    ``p = sum_slots mass nu`` (§4.2), and, when learning, every trained row's update."""
    post = posterior(net, sched, cfg)
    if cfg.pool.bounded:
        lanes, since = assign_lanes(net, sched, cfg)
        net = net._replace(lanes=lanes, lane_since=since)
    ggm = isinstance(cfg.rows, GGMRows)
    contexts = gating.contexts(gating.Gates(net.normals, net.offsets), z)
    u = mixing.feature_logits(z, cfg.rows.prob_eps) if ggm else jnp.ones(1, jnp.float32)
    live = (jnp.arange(cfg.slots) < sched.size)[:, None]
    hidden, qs = [], []
    for index, shape in enumerate(cfg.layers):
        cols = slice(shape.offset, shape.offset + shape.neurons)
        if index:
            hidden.append(u[:-1])
        net, q = layer_pass(net, index, cfg, sched, contexts[cols], u, x, learn)
        nu = jnp.where(live, jnp.sum(post.alpha[:, :, cols] * q, axis=1), 0.0)
        p = jnp.sum(post.mass[:, cols] * nu, axis=0)
        qs.append(q)
        if ggm:
            u = mixing.input_logits(p, cfg.rows.prob_eps)
    hidden = jnp.concatenate(hidden) if hidden else jnp.zeros(0, jnp.float32)
    return Forward(net, p[0], hidden, contexts, tuple(qs))


def _learn_net(net: Net, sched: tree.Schedule, z, x, cfg: EngineConfig):
    out = forward(net, sched, z, x, cfg, learn=True)
    live = (jnp.arange(cfg.slots) < sched.size)[:, None, None]
    logq = [jnp.where(live, mixing.log_prob(q, x), 0.0) for q in out.q]

    def per_layer(loglik):  # on a CPU a concatenation kept XLA from vectorising the update
        for shape, layer_logq in zip(cfg.layers, logq):
            loglik = loglik.at[:, :, shape.offset:shape.offset + shape.neurons].add(layer_logq)
        return loglik

    # on a GPU the per-layer form let XLA fuse it so that a step's prediction and a later call's parted in
    # their last float32 bit (docs/algorithm.md §6.9); the same sums either way
    loglik = jax.lax.platform_dependent(out.net.loglik, cpu=per_layer,
                                        default=lambda loglik: loglik + jnp.concatenate(logq, axis=2))
    net = out.net._replace(loglik=loglik)
    return net, out.p, (out.hidden, out.contexts)


def step(state: State, z, y, cfg: EngineConfig):
    """Learn one example: predict, learn, record; returns the state (its boundary not yet processed)
    and the pre-update predictions [classes]."""
    sched = state.schedule
    x = (y == jnp.asarray(cfg.positives)).astype(jnp.float32)
    nets, p, (hidden, contexts) = per_net(lambda net, x: _learn_net(net, sched, z, x, cfg), state.nets, x,
                                          keep_axis=any(uses_kernel(cfg, shape) for shape in cfg.layers))
    return _record(state._replace(nets=nets), z, y, hidden, contexts, cfg), p


@jax.named_scope("record")
def _record(state: State, z, y, hidden, contexts, cfg: EngineConfig) -> State:
    """Store step ``t``'s inputs, label, hidden logits and contexts, and offer it to every live slot's
    reservoir."""
    sched, nets, records = state.schedule, state.nets, state.records
    row = records.free[(sched.t - 1) % cfg.chunk]
    nets = nets._replace(hidden=nets.hidden.at[:, row].set(hidden),
                         record_contexts=nets.record_contexts.at[:, row].set(contexts.astype(cfg.context_dtype)))
    keys = reservoir.event_key(state.key, reservoir.SEGMENT_TAG, sched.start, sched.t)
    positions, n, seen = jax.vmap(lambda n, s, k: reservoir.offer(n, s, cfg.pool.reservoir_size, k))(
        records.segment_n, records.segment_seen, keys)
    live = jnp.arange(cfg.slots) < sched.size
    keep = live & (positions >= 0)
    records = records._replace(
        z=records.z.at[row].set(jnp.asarray(z, jnp.float32)),
        y=records.y.at[row].set(y),
        segment=records.segment.at[unique_or_drop(jnp.arange(cfg.slots), keep, cfg.slots), jnp.maximum(positions, 0)].set(
            row, mode="drop", unique_indices=True),
        segment_n=jnp.where(live, n, records.segment_n),
        segment_seen=jnp.where(live, seen, records.segment_seen),
    )
    return state._replace(nets=nets, records=records)


# ----------------------------------------------------------------------------- boundary (end of a step)


@jax.named_scope("advance")
def advance(state: State, cfg: EngineConfig, pool_update: bool) -> State:
    """Process the boundary of the next step: tree weights, pool updates of the segments that close
    (when ``pool_update``; the record rows are then reserved by ``boundary``), pruning, popping the
    closed slots and pushing the new one (§3.2, §4.2-§4.7)."""
    from nctl.core import boundary

    old = state.schedule
    adv = tree.advance(old)
    nets = state.nets
    if pool_update and cfg.max_closes:  # a pool, and segments long enough to update it
        nets = boundary.update_pool(nets, state, adv, cfg)
    nets = per_net(lambda net: _restart(net, old, adv, cfg), nets)
    records = state.records._replace(
        segment_n=state.records.segment_n.at[adv.kept].set(0),
        segment_seen=state.records.segment_seen.at[adv.kept].set(0),
    )
    return state._replace(schedule=adv.new, nets=nets, records=records)


@jax.named_scope("restart")
def _restart(net: Net, old: tree.Schedule, adv: tree.Advance, cfg: EngineConfig) -> Net:
    """PTW weight of the completed node, free the popped slots' blocks, push the new slot (§3.2, §6.2)."""
    live = (jnp.arange(cfg.slots) < old.size)[:, None, None]
    log_r = mixture_posterior(jnp.where(live, net.logprior + net.loglik, 0.0), cfg.rows.dtype)[1]  # [S, N]
    log_r = log_r[tree.canonical_slots(old)][:, None]  # [S, 1, N]: the same for every split probability
    w_c = tree.node_log_weight(net.log_b, log_r, old.depth, adv.completed, tree.stacked(cfg.prior))  # [A, N] (§3.6)
    log_b = jnp.where(adv.grow, tree.shift_levels(net.log_b), net.log_b)
    i = adv.closing - 1
    log_b = jnp.where(jnp.arange(cfg.slots)[:, None, None] > i, 0.0, log_b).at[i].set(w_c)
    net = free_blocks(net, adv.kept, old.size, cfg)
    pushed = adv.kept
    count = jnp.sum(net.roster >= 0, axis=0)
    net = net._replace(
        log_b=log_b,
        loglik=net.loglik.at[pushed].set(0.0),
        logprior=net.logprior.at[pushed].set(member_log_prior(count, cfg.pool.capacity)),
        source=net.source.at[pushed].set(net.roster),
        detached=net.detached.at[pushed].set(False),
        block_of=net.block_of.at[pushed].set(-1),
    )
    if cfg.pool.bounded:
        net = net._replace(lanes=net.lanes.at[pushed].set(-1), lane_since=net.lane_since.at[pushed].set(0))
    return net


# ----------------------------------------------------------------------------- compiled programs


Observe = Callable[[State, EngineConfig], Any] | None  # a module-level function: it keys compiled programs


@partial(programs.jit, static_argnums=(4, 5), donate_argnums=(0,), compiler_options=COMPILER_OPTIONS)
def run_steps(state: State, Z, Y, n, cfg: EngineConfig, observe: Observe, z_next, predict_next):
    """Learn rows ``Z[:n]`` in order until one ends at a step whose boundary updates the pool (``t = 0
    mod P``; that boundary is left to ``boundary``) or the tree would outgrow ``max_depth``; then, if
    ``predict_next`` and every row is done with no boundary due, predict the row ``z_next`` [d] at the
    new state (the next step's frozen prediction, as ``predict``; one program whether asked or not).
    Returns ``(state, outcome, observations)``: ``outcome`` packs into one float64 array (one transfer
    to the host, §6.9) the predictions [B, classes], the prediction of ``z_next`` [classes] (NaN where
    not made), the rows done and whether a boundary is due; ``unpack`` splits it."""
    last_step = 2**cfg.max_depth

    def can_go(carry):
        i, state, _, _, due = carry
        return (i < n) & ~due & (state.schedule.t < last_step)

    def body(carry):
        i, state, preds, obs, _ = carry
        state, p = step(state, Z[i], Y[i], cfg)
        if observe is not None:
            obs = jax.tree.map(lambda o, v: o.at[i].set(v), obs, observe(state, cfg))
        due = state.schedule.t % cfg.chunk == 0
        state = when(~due, lambda s: advance(s, cfg, pool_update=False), state)
        return i + 1, state, preds.at[i].set(p), obs, due

    preds = jnp.zeros((Z.shape[0], cfg.n_nets), jnp.float64)
    obs = None
    if observe is not None:
        shapes = jax.eval_shape(lambda s: observe(s, cfg), state)
        obs = jax.tree.map(lambda s: jnp.zeros((Z.shape[0],) + s.shape, s.dtype), shapes)
    done, state, preds, obs, due = jax.lax.while_loop(can_go, body, (jnp.int32(0), state, preds, obs, jnp.bool_(False)))
    unmade = jax.eval_shape(lambda: predict_row(state, z_next, cfg))
    p_next = jax.lax.cond(predict_next & (done == n) & ~due, lambda: predict_row(state, z_next, cfg),
                          lambda: jnp.full(unmade.shape, jnp.nan, unmade.dtype))
    outcome = jnp.concatenate([preds.reshape(-1), p_next.astype(jnp.float64).reshape(-1),
                               jnp.stack([done, due]).astype(jnp.float64)])
    return state, outcome, obs


def unpack(outcome: np.ndarray, cfg: EngineConfig):
    """``run_steps``' outcome as ``(predictions [B, classes], prediction of z_next [classes], rows done,
    boundary due)``."""
    classes = cfg.n_nets
    preds, p_next = outcome[:-2 - classes].reshape(-1, classes), outcome[-2 - classes:-2]
    return preds, p_next, int(outcome[-2]), bool(outcome[-1])


@partial(programs.jit, static_argnums=(1,), donate_argnums=(0,), compiler_options=BOUNDARY_COMPILER_OPTIONS)
def boundary(state: State, cfg: EngineConfig):
    """The boundary after a step ``t = 0 mod P``: pool updates, the restart, the records of the next ``P``.
    Returns the state and the count of record rows no reservoir holds."""
    from nctl.core import boundary as pool_boundary

    return pool_boundary.reserve_records(advance(state, cfg, pool_update=True), cfg)


def predict_row(state: State, z, cfg: EngineConfig):
    """The frozen prediction [classes] of the next step for one row ``z`` [d]."""
    return per_net(lambda net: forward(net, state.schedule, z, jnp.float32(0), cfg, learn=False).p, state.nets)


@partial(programs.jit, static_argnums=(3,), compiler_options=COMPILER_OPTIONS)
def _predict(state: State, Z, n, cfg: EngineConfig):
    """Frozen predictions of the first ``n`` rows of ``Z`` [B, d] (the rest 0). ``predict`` calls it
    with ``B = 1`` (one row: the program compiled ahead for the river path, §6.8) or ``PREDICT_BLOCK``
    (any other number of rows), so a configuration compiles at most two prediction programs."""
    row = jax.eval_shape(lambda: predict_row(state, Z[0], cfg))
    out = jnp.zeros((Z.shape[0],) + row.shape, row.dtype)
    return jax.lax.fori_loop(0, n, lambda i, out: out.at[i].set(predict_row(state, Z[i], cfg)), out)


_resize = programs.jit(resize, static_argnums=(1, 2))


# ----------------------------------------------------------------------------- entry points


class _CompiledAhead:
    """A program compiled in a thread while the caller goes on. A process that ends while it compiles
    waits for it (XLA aborts a process that exits in the middle of a compilation)."""

    def __init__(self, lower: Callable[[], Any]):
        self._program, self._error = None, None
        self._thread = threading.Thread(target=self._compile, args=(lower,))
        self._thread.start()

    def _compile(self, lower):
        try:
            lowered = lower()
            self._program = None if lowered is None else lowered.compile()
        except Exception as error:  # raised where the program is wanted
            self._error = error

    def program(self):
        if self._program is None:  # compiling, failed, or lowered to nothing: wait for the thread
            self._thread.join()
            if self._error is not None:
                raise self._error
        return self._program

    def finish(self) -> None:
        self._thread.join()


PROGRAMS_AHEAD_KEPT = 4  # configurations whose programs compiled ahead stay at hand (a few: each holds memory)
_boundary_programs: OrderedDict = OrderedDict()  # EngineConfig -> _CompiledAhead, most recent last
_tables_lock = threading.Lock()  # the tables of programs compiled ahead; enlargement threads fill them too


def boundary_program(state: State, cfg: EngineConfig) -> _CompiledAhead:
    """The boundary program of ``cfg``, compiled in the background from the first call for ``cfg``:
    ``learn`` starts it with the step program's compilation and waits for it before returning, so that
    the first pool boundary (step ``P``) of a stream learned one row at a time does not stall (§6.8)."""
    return _ahead(_boundary_programs, state, cfg, boundary.lower)


_one_row_predictions: OrderedDict = OrderedDict()  # EngineConfig -> _CompiledAhead, most recent last


def one_row_prediction_ahead(state: State, cfg: EngineConfig) -> _CompiledAhead:
    """The one-row prediction of ``cfg``, compiled in the background into ``jit``'s own cache (with
    committed states the two agree) for a stream learned one row at a time, whose predictions after a
    pool boundary need it (§6.8, §6.9)."""
    return _ahead(_one_row_predictions, state, cfg, _lower_one_row_prediction)


def _lower_one_row_prediction(shapes, cfg: EngineConfig):
    return _predict.lower(shapes, jax.ShapeDtypeStruct((1, cfg.n_features), np.float32), 1, cfg)


def programs_ahead(state: State, cfg: EngineConfig, one_row: bool) -> list[_CompiledAhead]:
    """What ``learn`` has compiled in the background for ``cfg`` (§6.8): the boundary, and for a stream
    learned one row at a time (``one_row``) the one-row prediction."""
    return [boundary_program(state, cfg)] + ([one_row_prediction_ahead(state, cfg)] if one_row else [])


def _ahead(programs_of: OrderedDict, state: State, cfg: EngineConfig, lower: Callable[..., Any]) -> _CompiledAhead:
    """``programs_of[cfg]``, started with ``lower(shapes of state, cfg)`` when missing (the shapes are
    taken only then: the river path calls this for every row); the ``PROGRAMS_AHEAD_KEPT`` most
    recent."""
    with _tables_lock:
        ahead = programs_of.get(cfg)
        if ahead is None:
            ahead = programs_of[cfg] = _CompiledAhead(partial(lower, _shapes(state), cfg))
            while len(programs_of) > PROGRAMS_AHEAD_KEPT:
                programs_of.popitem(last=False)
        else:
            programs_of.move_to_end(cfg)
        return ahead


def _shapes(state):
    """The abstract state (shapes, dtypes, placement) that a program compiled ahead is compiled for."""
    return jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype, weak_type=a.weak_type, sharding=a.sharding),
                        state)


ENLARGEMENTS_KEPT = 2
_enlargements_ahead: OrderedDict = OrderedDict()  # (cfg, enlarged cfg) -> _CompiledAhead, most recent last
ENLARGE_AHEAD_DOUBLINGS = 2  # compile an arena enlargement's programs once the stream is this many doublings from it
RECORDS_LOW = 0.5  # compile a doubled record arena's programs once fewer than this share of its rows (+ 2P) is free


@lru_cache(maxsize=16)
def next_arena_enlargement(cfg: EngineConfig) -> EngineConfig | None:
    """The configuration that a growing tree's arenas will next be enlarged to (§6.2); None if never
    (kept: ``learn`` asks for it at every call within two doublings of it)."""
    if cfg.arena_depth >= cfg.max_depth:
        return None
    first_outgrown = 2**cfg.arena_depth - cfg.chunk + 1  # the first t whose next P steps outgrow the arenas
    return configured(cfg, arena_depth=lean_arena_depth(cfg, first_outgrown))


def doubled_records(cfg: EngineConfig, t: int | None) -> EngineConfig:
    """``cfg`` with twice the record rows; and, when the next block-arena enlargement is near (the stream
    at ``t`` steps), with it too: one new configuration, compiled once, instead of two. The one already
    compiling ahead, if any."""
    with _tables_lock:
        started = list(_enlargements_ahead)
    for old, new in started:
        if old == cfg and new.record_rows > cfg.record_rows:
            return new
    arenas = next_arena_enlargement(cfg) if t is not None and enlargement_near(cfg, t) else None
    return configured(cfg, record_rows=2 * cfg.record_rows, arena_depth=(arenas or cfg).arena_depth)


def _compile_enlargement(shapes, cfg: EngineConfig, new: EngineConfig, n_features: int, observe: Observe,
                         one_row: bool):
    """Compile the enlargement from ``cfg`` to ``new`` and ``new``'s programs: the steps (as ``learn``
    calls them), the boundary and, for a stream learned one row at a time, the one-row prediction."""
    grown = _resize.lower(shapes, cfg, new).compile().out_info
    Z, labels, n = _block(np.zeros((1, n_features), np.float32), np.zeros(1, np.int32), 0)
    run_steps.lower(grown, Z, labels, n, new, observe, Z[0], True).compile()
    for ahead in programs_ahead(grown, new, one_row):
        ahead.program()


def enlarge_ahead(state: State, cfg: EngineConfig, new: EngineConfig, n_features: int, observe: Observe,
                  one_row: bool) -> None:
    """Compile, in the background, the enlargement of ``state`` from ``cfg`` to ``new`` and ``new``'s
    programs (§6.8), so that the stream does not stop to compile them when it gets there."""
    with _tables_lock:
        if (cfg, new) not in _enlargements_ahead:
            _enlargements_ahead[cfg, new] = _CompiledAhead(
                partial(_compile_enlargement, _shapes(state), cfg, new, n_features, observe, one_row))
            while len(_enlargements_ahead) > ENLARGEMENTS_KEPT:
                _enlargements_ahead.popitem(last=False)


def finish_compiling() -> None:
    """Wait for every program being compiled ahead (§6.8)."""
    for programs_of in (_enlargements_ahead, _boundary_programs, _one_row_predictions):  # enlargements add programs
        with _tables_lock:
            started = list(programs_of.values())
        for ahead in started:
            ahead.finish()


def learn(state: State, cfg: EngineConfig, X, Y, observe: Observe = None):
    """Learn the rows of ``X`` [n, d], ``Y`` [n] in order. Returns ``(state, cfg, predictions [n, classes],
    observations)``; the configuration changes when the state had to grow (a longer stream than
    ``2^max_depth``, or more records held by reservoirs than the arena had room for)."""
    return _learn(state, cfg, X, Y, observe, None)[:4]


def learn_then_predict(state: State, cfg: EngineConfig, X, Y, z):
    """``learn(state, cfg, X, Y)`` followed by ``predict`` of the row ``z`` [d] at the new state, in the
    same compiled call as the last rows unless a pool boundary or a growth comes between them (the
    river path: learn the last example, predict the next one). Returns ``(state, cfg, predictions [n,
    classes], prediction of z [classes])``."""
    z = np.asarray(z, np.float32)
    state, cfg, probs, _, p_next = _learn(state, cfg, X, Y, None, z)
    return state, cfg, probs, p_next if p_next is not None else predict(state, cfg, z[None])[0]


def _learn(state: State, cfg: EngineConfig, X, Y, observe: Observe, z_next):
    """``learn``, and the prediction of ``z_next`` when the last call of ``run_steps`` made it (else None)."""
    if not state.schedule.t.committed:  # as the boundary program's outputs are: each program compiles once
        state = jax.device_put(state, jax.devices()[0])
    one_row = z_next is not None or X.shape[0] == 1  # a stream learned one row at a time (the river path)
    first_cfg, ahead = cfg, programs_ahead(state, cfg, one_row)
    probs, observations, a, p_next = [], [], 0, None
    t = int(state.schedule.t) if cfg.arena_depth < cfg.max_depth else None  # read once, then counted here
    while a < X.shape[0]:
        if t is not None and arenas_outgrown(cfg, t):
            state, cfg = _enlarge(state, cfg, cfg._replace(arena_depth=lean_arena_depth(cfg, t)))
            programs_ahead(state, cfg, one_row)
        if t is not None and enlargement_near(cfg, t):
            new = next_arena_enlargement(cfg)
            if new is not None:
                enlarge_ahead(state, cfg, new, X.shape[1], observe, one_row)
        Z, labels, n = _block(X, Y, a)
        ask = z_next is not None and a + n == X.shape[0]
        state, outcome, obs = run_steps(state, Z, labels, n, cfg, observe, z_next if ask else Z[0], ask)
        p, p_next, done, due = unpack(np.asarray(outcome), cfg)  # slicing on the host compiles nothing
        probs.append(p[:done])
        if observe is not None:
            observations.append(jax.tree.map(lambda o: np.asarray(o)[:done], obs))
        a += done
        t = None if t is None else t + done
        if not ask or due or done < n:  # the prediction of z_next was not made
            p_next = None
        if due:
            state, unheld = boundary_program(state, cfg).program()(state)
            ok, unheld = jax.device_get((state.records.ok, unheld))
            if not ok:  # the reservoirs hold more records than the arena has room for
                state, cfg = _enlarge(state, cfg, doubled_records(cfg, t))
            elif unheld < RECORDS_LOW * cfg.record_rows + 2 * cfg.chunk:  # it will be soon
                enlarge_ahead(state, cfg, doubled_records(cfg, t), X.shape[1], observe, one_row)
        elif done < n:  # the tree outgrew max_depth
            state, cfg = _enlarge(state, cfg, cfg._replace(max_depth=cfg.max_depth + 1, arena_depth=cfg.max_depth + 1))
    obs = jax.tree.map(lambda *parts: np.concatenate(pad_to_grown(parts)), *observations) if observations else None
    if cfg is not first_cfg:
        ahead = programs_ahead(state, cfg, one_row)
    for compiled in ahead:  # ready before the stream goes on: no stall at its first boundary, nor at the
        compiled.program()  # first prediction after it
    return state, cfg, np.concatenate(probs) if probs else np.zeros((0, cfg.n_nets)), obs, p_next


def arenas_outgrown(cfg: EngineConfig, t: int) -> bool:
    """Whether the block arenas of a growing tree are too small for the next ``P`` steps from step ``t``
    (§6.2): ``learn`` enlarges them first."""
    return cfg.arena_depth < min(cfg.max_depth, tree.depth_for(t + cfg.chunk))


def enlargement_near(cfg: EngineConfig, t: int) -> bool:
    """Whether the stream at step ``t`` is within ``ENLARGE_AHEAD_DOUBLINGS`` doublings of outgrowing
    the block arenas (§6.8): their enlargement is then compiled ahead."""
    return tree.depth_for(t + cfg.chunk) + ENLARGE_AHEAD_DOUBLINGS >= cfg.arena_depth


def _block(X, Y, start: int):
    """The next rows from ``start`` as ``run_steps`` takes them (arguments of the same kinds in every call,
    so that the program compiled ahead for a configuration is the one its calls find): ``(Z
    [LEARN_BLOCK, d] float32, labels [LEARN_BLOCK] int32, n)``, zero past the ``n`` rows."""
    n = min(LEARN_BLOCK, X.shape[0] - start)
    Z = np.zeros((LEARN_BLOCK, X.shape[1]), np.float32)
    Z[:n] = X[start:start + n]
    labels = np.zeros(LEARN_BLOCK, np.int32)
    labels[:n] = Y[start:start + n]
    return Z, labels, n


def pad_to_grown(parts) -> list:
    """Host arrays taken before and after the engine grew (more slots, more pool cells), zero-padded on
    every axis but the first to their largest sizes, so that they concatenate."""
    shape = np.max([part.shape[1:] for part in parts], axis=0)
    return [np.pad(part, [(0, 0)] + [(0, s - n) for s, n in zip(shape, part.shape[1:])]) for part in parts]


def configured(cfg: EngineConfig, **sizes) -> EngineConfig:
    """``cfg`` with other ``max_depth``, ``record_rows`` or ``arena_depth``, its layers sized for them."""
    wanted = cfg._replace(**sizes)
    return configure(cfg.n_features, cfg.layer_sizes, cfg.context_bits, cfg.rows, cfg.pool, cfg.prior, cfg.n_classes,
                     wanted.max_depth, wanted.record_rows, wanted.arena_depth, tuple(s.fixed for s in cfg.layers))


def _enlarge(state: State, cfg: EngineConfig, wanted: EngineConfig):
    new = configured(cfg, max_depth=wanted.max_depth, record_rows=wanted.record_rows, arena_depth=wanted.arena_depth)
    with _tables_lock:
        ahead = _enlargements_ahead.pop((cfg, new), None)
    if ahead is not None:  # compiling in the background: wait for it rather than compile it a second time
        ahead.finish()  # (had it failed, the calls below compile, and raise, on this thread)
    return _resize(state, cfg, new), new


def predict(state: State, cfg: EngineConfig, X) -> np.ndarray:
    """Frozen predictions [n, classes] of the next step for the rows of ``X`` [n, d]."""
    out = []
    for a in range(0, X.shape[0], PREDICT_BLOCK):
        rows = X[a:a + PREDICT_BLOCK]
        size = 1 if rows.shape[0] == 1 else PREDICT_BLOCK  # two compiled shapes for any number of rows
        Z = np.zeros((size, X.shape[1]), np.float32)
        Z[:rows.shape[0]] = rows
        out.append(np.asarray(_predict(state, Z, rows.shape[0], cfg))[:rows.shape[0]])
    return np.concatenate(out) if out else np.zeros((0, cfg.n_nets))


# ----------------------------------------------------------------------------- forks (§6.7)


class Journal(NamedTuple):
    """What learning a few rows overwrites, kept to undo it: the state but its block arenas (copies; also
    without the pool entries and the records' arrays where no pool boundary falls among the rows), and
    per layer the blocks those rows may overwrite: those they train in place, and those of the slots they
    close (``ids`` [nets, B], padded with the layer's block count; ``rows`` [nets, B, W, width])."""

    small: State
    ids: tuple
    rows: tuple


GATE_TOLERANCE = 1e-4  # a gate whose margin is within this share of sum_d |v_d z_d| may fall either way


def journal(state: State, cfg: EngineConfig, X) -> Journal | None:
    """The journal of ``learn(state, cfg, X, ...)`` (§6.7), so that ``undo`` can give ``state`` back
    after it; None where learning the rows must be done on a copy instead: where they would enlarge an
    arena."""
    from nctl.core import boundary

    T, n = int(state.schedule.t), X.shape[0]
    boundaries = (T + n - 1) // cfg.chunk - (T - 1) // cfg.chunk  # steps t = 0 mod P among the rows
    grows = T + n > 2**cfg.max_depth or arenas_outgrown(cfg, T + n)  # (monotone in t: the last step decides)
    # a boundary reserves P record rows that no reservoir holds, and its reservoirs hold no row but those
    # held now and those written since: with (boundaries + 1) P rows unheld now, none runs short (§6.5)
    if grows or (boundaries and int(boundary.unheld_records(state, cfg)) < (boundaries + 1) * cfg.chunk):
        return None
    nets = state.nets
    normals, offsets, block_of, size, popped = jax.device_get(
        (nets.normals, nets.offsets, nets.block_of, state.schedule.size, _lowest_popped(state.schedule, n)))
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
        rows.append(_gather_blocks(nets.blocks[layer], ids[-1]))
    return Journal(jax.tree.map(jnp.copy, _without_arenas(state, boundaries > 0)), tuple(ids), tuple(rows))


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
    rows) and, unless a pool ``boundary`` falls among the rows, the pool entries (written at boundaries
    only) and the records' arrays (written, until a boundary, in the rows it reserved, which no
    reservoir held)."""
    state = state._replace(nets=state.nets._replace(blocks=None))
    if boundary:
        return state
    nets = state.nets._replace(pool_rows=None, hidden=None, record_contexts=None)
    return state._replace(nets=nets, records=state.records._replace(z=None, y=None))


@partial(jax.jit, donate_argnums=(0,))
def undo(state: State, journal: Journal) -> State:
    """``state`` as it was when ``journal`` was taken, from the state after the rows were learned (§6.7)."""
    blocks = tuple(jax.vmap(lambda b, i, r: b.at[i].set(r, mode="drop"))(b, i, r)
                   for b, i, r in zip(state.nets.blocks, journal.ids, journal.rows))
    small = journal.small
    nets, records = small.nets._replace(blocks=blocks), small.records
    if nets.pool_rows is None:  # no pool boundary among the rows: what it alone writes was not copied
        nets = nets._replace(pool_rows=state.nets.pool_rows, hidden=state.nets.hidden,
                             record_contexts=state.nets.record_contexts)
        records = records._replace(z=state.records.z, y=state.records.y)
    return small._replace(nets=nets, records=records)
