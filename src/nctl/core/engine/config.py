"""An engine's static configuration: layer shapes, sizes of the tree, pool, arenas and record arena,
and which code path each layer takes (docs/algorithm.md §6.1, §6.2, §6.5, §6.11).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from nctl.core import gln, native, tree
from nctl.core.pool import PoolConfig
from nctl.core.rows import RowModel
from nctl.deferred import jax


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
    rows: RowModel  # a neuron's model: GGMRows, KTRows or GaussianRows (nctl.core.gaussian)
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
        """Values a record keeps of the inputs of layers 2..L (``rows.input_values``)."""
        return self.rows.values_per_input * sum(self.layer_sizes[:-1])

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
FIXED_PLACES_SHARE = 1 / 64  # or, sized at once or not, when its places add less than this share to the rows of
# every layer's arena at full depth: the small layers behind a large first layer (§6.2)


def configure(n_features: int, layer_sizes, context_bits: int, rows, pool: PoolConfig, prior: tuple,
              n_classes: int, max_depth: int, record_rows: int | None = None,
              arena_depth: int | None = None, fixed_blocks: tuple | None = None,
              jax_programs: bool = True) -> EngineConfig:
    """An engine for trees up to ``max_depth`` whose block arenas hold trees up to ``arena_depth``
    (default ``max_depth``; ``learn`` enlarges them as a growing tree deepens) (§6.2, §6.5). Which
    layers keep their blocks at fixed places: ``fixed_blocks`` (one bool per layer), by default those
    where that costs at most ``FIXED_BLOCKS_SLACK`` times the arena's blocks at full depth, and that
    arena is small enough to be sized at once, and those whose places add less than
    ``FIXED_PLACES_SHARE`` to the rows of all the layers' arenas at full depth. ``jax_programs``: the JAX
    engine runs it, whose programs compute each layer as ``vectorised`` says (chosen for JAX's platform);
    the native engine computes every layer alike, and its configurations have ``vectorised`` False."""
    arena_depth = max_depth if arena_depth is None else min(arena_depth, max_depth)
    contexts = 2**context_bits
    shapes, offset = [], 0
    for n, fan_in in zip(layer_sizes, gln.fan_ins(n_features, layer_sizes)):
        width = rows.width(fan_in)
        blocks = block_bound(arena_depth, contexts, pool.min_segment, n)
        one_slot_bytes = slot_rows_bytes(n, pool.lanes, width)
        vectorised = jax_programs and _vectorised((max_depth + 1) * one_slot_bytes, rows)
        chunk = _slot_chunk(max_depth + 1, one_slot_bytes)
        shapes.append(LayerShape(offset, n, fan_in, width, blocks, vectorised, chunk, False))
        offset += n
    cfg = EngineConfig(n_features, tuple(layer_sizes), context_bits, rows, pool, prior, n_classes, max_depth,
                       record_rows or 0, arena_depth, tuple(shapes))
    if fixed_blocks is None:
        eager = lean_arena_depth(cfg, 0) == max_depth
        bounds = [block_bound(max_depth, contexts, pool.min_segment, s.neurons) for s in shapes]
        all_rows = sum(bound * s.width for bound, s in zip(bounds, shapes))
        places = [cfg.slots * s.neurons * contexts for s in shapes]
        fixed_blocks = [(eager and n <= FIXED_BLOCKS_SLACK * bound)
                        or (n - bound) * s.width < FIXED_PLACES_SHARE * all_rows
                        for s, n, bound in zip(shapes, places, bounds)]
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
    return rows.kernel and native.enabled()


def uses_kernel(cfg: EngineConfig, shape: LayerShape) -> bool:
    """Whether a layer's rows go through the CPU kernel (§6.11) when the engine runs on a CPU: GGM rows
    of a layer computed slot by slot, where the kernel is built."""
    return not shape.vectorised and kernel_trains(cfg.rows)


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


def configured(cfg: EngineConfig, jax_programs: bool = True, **sizes) -> EngineConfig:
    """``cfg`` with other ``max_depth``, ``record_rows`` or ``arena_depth``, its layers sized for them (for the
    JAX engine's programs or not: ``configure``)."""
    wanted = cfg._replace(**sizes)
    return configure(cfg.n_features, cfg.layer_sizes, cfg.context_bits, cfg.rows, cfg.pool, cfg.prior, cfg.n_classes,
                     wanted.max_depth, wanted.record_rows, wanted.arena_depth, tuple(s.fixed for s in cfg.layers),
                     jax_programs)


def arenas_outgrown(cfg: EngineConfig, t: int) -> bool:
    """Whether the block arenas of a growing tree are too small for the next ``P`` steps from step ``t``
    (§6.2): ``learn`` enlarges them first."""
    return cfg.arena_depth < min(cfg.max_depth, tree.depth_for(t + cfg.chunk))


ENLARGE_AHEAD_DOUBLINGS = 2  # compile an arena enlargement's programs once the stream is this many doublings from it


def enlargement_near(cfg: EngineConfig, t: int) -> bool:
    """Whether the stream at step ``t`` is within ``ENLARGE_AHEAD_DOUBLINGS`` doublings of outgrowing
    the block arenas (§6.8): their enlargement is then compiled ahead."""
    return tree.depth_for(t + cfg.chunk) + ENLARGE_AHEAD_DOUBLINGS >= cfg.arena_depth
