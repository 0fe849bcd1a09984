"""The native engine's NCTL (``nctl.cc``): the state of ``nctl.core.engine`` (GGM or Gaussian rows, exact
mode), as numpy arrays in the JAX engine's layout, learned and predicted in place by C++ through ``ctypes``
(docs/algorithm.md §6.12).

``NCTLCalls`` is made once per state and holds the C structure that points at its arrays, so a call passes
only the rows. ``learn`` is the host side, as ``nctl.core.engine.driver.learn`` is the JAX engine's: rows
in blocks up to each pool boundary, and the state enlarged where the tree or an arena needs room (by the
JAX engine's ``resize``, rarely: no XLA program runs for a steady learner's rows).
"""

from __future__ import annotations

import ctypes

import numpy as np

from nctl import engines
from nctl.core import mixing, pool
from nctl.core.engine.config import LEARN_BLOCK, arenas_outgrown, configured, lean_arena_depth
from nctl.core.gaussian import GaussianRows
from nctl.core.rows import GGMRows
from nctl.native import gaussian_gln
from nctl.native.state import host_arrays

MAX_LAYERS, MAX_GRID, MAX_SLOTS = 8, 64, 64  # nctl_state.h's kMaxLayers, kMaxGrid, posterior.h's kMaxSlots


MAX_WEIGHTS = 2**14  # a member's weights over every class network (sum_i N_i K_i x nets) beyond which the JAX
# engine's kernels, on both cores, learn faster: the native engine computes a row on one core. The paper's Split
# MNIST learner (40,551 weights) learns 155 examples/s native and 405 on JAX (Intel Xeon, 2 cores)


def supports(n_layers: int, grid: int, bounded: bool, weights: int = 0) -> bool:
    """Whether the native engine runs NCTL (GGM or Gaussian rows) of ``n_layers`` layers with a grid of ``grid`` split
    probabilities, in bounded mode (§5.3) or not, with ``weights`` per member over its class networks (0:
    not known yet): exact mode only, and networks of at most ``MAX_WEIGHTS``, for now."""
    return not bounded and n_layers <= MAX_LAYERS and grid <= MAX_GRID and weights <= MAX_WEIGHTS


class _Layer(ctypes.Structure):
    _fields_ = [("neurons", ctypes.c_int64), ("offset", ctypes.c_int64), ("width", ctypes.c_int64),
                ("blocks", ctypes.c_int64), ("fixed", ctypes.c_int64), ("init_value", ctypes.c_double),
                ("pool_rows", ctypes.c_void_p),
                ("blocks_rows", ctypes.c_void_p), ("free", ctypes.c_void_p)]


_SIZES = ("nets", "n_layers", "features", "bits", "contexts", "slots", "capacity", "members", "entries", "max_closes",
          "lanes", "reservoir", "record_rows", "hidden_width", "chunk", "chunk_log2", "grid", "neurons", "max_depth",
          "context_bytes")
_ARRAYS = ("t", "depth", "size", "level", "start", "normals", "offsets", "loglik", "logprior", "source", "detached",
           "slot_ids", "slot_n", "slot_seen", "log_b", "block_of", "n_free", "in_pool", "age", "order", "born",
           "entry_ids", "entry_n", "entry_seen", "roster", "next_order", "events", "hidden", "record_contexts", "z",
           "y", "segment_ids", "segment_n", "segment_seen", "free_records", "records_ok", "key", "positive")


class _Engine(ctypes.Structure):
    _fields_ = ([(name, ctypes.c_int64) for name in _SIZES] + [("gaussian", ctypes.c_int64)]
                + [(name, ctypes.c_float) for name in ("learning_rate", "low", "high", "max_weight", "feature_bound",
                                                       "min_precision", "max_precision", "max_mean")]
                + [(name, ctypes.c_double) for name in ("prob_eps", "refine_threshold", "skip_threshold",
                                                        "tie_tolerance")]
                + [("joint_evidence", ctypes.c_int64), ("spacing", ctypes.c_int64),
                   ("log_stop", ctypes.c_double * MAX_GRID), ("log_split", ctypes.c_double * MAX_GRID),
                   ("layer", _Layer * MAX_LAYERS)]
                + [(name, ctypes.c_void_p) for name in _ARRAYS])


def _checked(array: np.ndarray, dtype) -> int:
    """The address of ``array``, a state array the C++ code writes in place: it must be a writable,
    C-ordered numpy array of ``dtype``."""
    if not (isinstance(array, np.ndarray) and array.dtype == dtype and array.flags.c_contiguous
            and array.flags.writeable):
        raise TypeError(f"a native NCTL state array must be a writable C-ordered {np.dtype(dtype)} numpy array")
    return array.ctypes.data


class NCTLCalls:
    """Learn and predict on the NCTL engine state ``state`` (``nctl.core.engine.State`` of writable numpy
    arrays, ``nctl.native.state.host_arrays``) of configuration ``cfg``; ``layers`` is the state (what
    ``OnlineLearner.calls_for`` compares)."""

    def __init__(self, state, cfg):
        if not (isinstance(cfg.rows, (GGMRows, GaussianRows))
                and supports(len(cfg.layers), len(cfg.prior), cfg.pool.bounded) and cfg.slots <= MAX_SLOTS):
            raise ValueError("the native engine runs NCTL with GGM or Gaussian rows in exact mode only")
        library = engines.native_library()
        self.layers, self.cfg = state, cfg
        nets, slots, rows = state.nets, state.nets.slots, cfg.rows
        self._positive = np.ascontiguousarray(cfg.positives, np.int32)
        sizes = dict(nets=cfg.n_nets, n_layers=len(cfg.layers), features=cfg.n_features, bits=cfg.context_bits,
                     contexts=cfg.contexts, slots=cfg.slots, capacity=cfg.pool.capacity, members=cfg.pool.members,
                     entries=cfg.entries, max_closes=cfg.max_closes, lanes=cfg.pool.lanes,
                     reservoir=cfg.pool.reservoir_size, record_rows=cfg.record_rows, hidden_width=cfg.hidden_width,
                     chunk=cfg.chunk, chunk_log2=cfg.pool.min_segment_log2, grid=len(cfg.prior),
                     neurons=cfg.neurons, max_depth=cfg.max_depth, context_bytes=cfg.context_dtype.itemsize)
        engine = _Engine(**sizes, **_row_settings(rows), refine_threshold=cfg.pool.refine_threshold,
                         skip_threshold=cfg.pool.skip_threshold, tie_tolerance=pool.tie_tolerance(rows.dtype),
                         joint_evidence=cfg.pool.joint_evidence, spacing=cfg.pool.eviction == "spacing")
        for a, prior in enumerate(cfg.prior):
            engine.log_stop[a], engine.log_split[a] = prior.log_stop, prior.log_split
        arena = nets.arena
        for i, shape in enumerate(cfg.layers):
            engine.layer[i] = _Layer(shape.neurons, shape.offset, shape.width, shape.blocks, shape.fixed,
                                     np.float32(rows.init_value(shape.fan_in)),
                                     _checked(arena.pool_rows[i], np.float32), _checked(arena.blocks[i], np.float32),
                                     _checked(arena.free[i], np.int32))
        sched, records, pool_state = state.schedule, state.records, nets.pool
        i32, f64 = np.int32, np.float64
        arrays = dict(
            t=(sched.t, i32), depth=(sched.depth, i32), size=(sched.size, i32), level=(sched.level, i32),
            start=(sched.start, i32), normals=(nets.gates.normals, np.float32), offsets=(nets.gates.offsets, np.float32),
            loglik=(slots.loglik, f64), logprior=(slots.logprior, f64), source=(slots.source, i32),
            detached=(slots.detached, np.bool_), slot_ids=(slots.lineage.ids, i32), slot_n=(slots.lineage.n, i32),
            slot_seen=(slots.lineage.seen, i32), log_b=(slots.log_b, f64), block_of=(slots.block_of, i32),
            n_free=(arena.n_free, i32), in_pool=(pool_state.in_pool, np.bool_), age=(pool_state.age, i32),
            order=(pool_state.order, i32), born=(pool_state.born, i32), entry_ids=(pool_state.lineage.ids, i32),
            entry_n=(pool_state.lineage.n, i32), entry_seen=(pool_state.lineage.seen, i32),
            roster=(pool_state.roster, i32), next_order=(pool_state.next_order, i32), events=(pool_state.events, i32),
            hidden=(nets.hidden, np.float32), record_contexts=(nets.record_contexts, cfg.context_dtype),
            z=(records.z, np.float32), y=(records.y, rows.label_dtype), segment_ids=(records.segment.ids, i32),
            segment_n=(records.segment.n, i32), segment_seen=(records.segment.seen, i32),
            free_records=(records.free, i32), records_ok=(records.ok, np.bool_), key=(state.key, np.uint64),
            positive=(self._positive, i32))
        for name, (array, dtype) in arrays.items():
            setattr(engine, name, _checked(array, dtype))
        self._engine = engine
        self._status = np.zeros(2, np.int64)
        # a row, its label and its predictions [rows, nets, *prediction_shape]
        self._row, self._label = np.zeros((1, cfg.n_features), np.float32), np.zeros(1, rows.label_dtype)
        self._prediction_shape = (cfg.n_nets, *rows.prediction_shape)
        self._out = np.zeros((1, *self._prediction_shape), np.float64)
        self._learn, self._predict = library.nctl_nctl_learn, library.nctl_nctl_predict
        self._learn.restype, self._predict.restype = ctypes.c_int64, None
        self._learn.argtypes = [ctypes.c_void_p] * 4 + [ctypes.c_int64] + [ctypes.c_void_p] * 2
        self._predict.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_int64, ctypes.c_void_p]
        self._step, self._boundary = library.nctl_nctl_step, library.nctl_nctl_boundary
        self._step.restype = self._boundary.restype = None
        self._step.argtypes = [ctypes.c_void_p] * 5
        self._boundary.argtypes = [ctypes.c_void_p] * 2
        make, self._free = library.nctl_nctl_work, library.nctl_nctl_free_work
        make.restype, make.argtypes = ctypes.c_void_p, [ctypes.c_void_p]
        self._free.restype, self._free.argtypes = None, [ctypes.c_void_p]
        # the C++ work of the calls (nctl.cc's Work): scratch, and the last one-row prediction's passes
        self._work = make(ctypes.addressof(engine))
        self._addresses = (ctypes.addressof(engine), self._work, self._row.ctypes.data, self._label.ctypes.data,
                           self._out.ctypes.data, self._status.ctypes.data)
        # a row's arguments, made once: ctypes passes its own objects faster than it converts numbers
        engine, work, row, label, out, status = map(ctypes.c_void_p, self._addresses)
        self._row_learn_args = (engine, work, row, label, ctypes.c_int64(1), out, status)
        self._row_predict_args = (engine, work, row, ctypes.c_int64(1), out)

    def __del__(self):
        if getattr(self, "_work", None):
            self._free(self._work)

    def learn(self, Z: np.ndarray, Y: np.ndarray):
        """Learn the rows ``Z`` [n, d], labels ``Y`` [n] (classes, or a regressor's standardised targets), in
        order, up to and including the first whose boundary updates the pool, and not past ``2^max_depth``
        steps. Returns ``(predictions [done, nets, *rows.prediction_shape] float64, done, whether the last row's
        boundary updated the pool)``."""
        if len(Z) == 1:
            self._row[0], self._label[0] = Z[0], Y[0]
            done = self._learn(*self._row_learn_args)
            return self._out[:done].copy(), done, bool(self._status[0])
        engine, work, _, _, _, status = self._addresses
        Z, Y = np.ascontiguousarray(Z, np.float32), np.ascontiguousarray(Y, self._label.dtype)
        predictions = np.empty((len(Z), *self._prediction_shape), np.float64)
        done = self._learn(engine, work, Z.ctypes.data, Y.ctypes.data, len(Z), predictions.ctypes.data, status)
        return predictions[:done], done, bool(self._status[0])

    def step(self, z: np.ndarray, y) -> np.ndarray:
        """Learn the row ``z`` [d] with label ``y`` and leave its boundary to ``boundary``: the pre-update
        predictions [nets, *rows.prediction_shape] (float64). The tree must have room for the step
        (``2^max_depth`` steps)."""
        engine, work, row, label, out, _ = self._addresses
        self._row[0], self._label[0] = z, y
        self._step(engine, work, row, label, out)
        return self._out[0].copy()

    def boundary(self) -> bool:
        """Process the boundary after ``step``; whether it updated the pool (and reserved the records)."""
        engine, *_, status = self._addresses
        self._boundary(engine, status)
        return bool(self._status[0])

    def predict(self, Z: np.ndarray) -> np.ndarray:
        """Frozen predictions [n, nets, *rows.prediction_shape] (float64) of the next step for the rows ``Z``
        [n, d]."""
        if len(Z) == 1:
            self._row[0] = Z[0]
            self._predict(*self._row_predict_args)
            return self._out.copy()
        engine, work, *_ = self._addresses
        Z = np.ascontiguousarray(Z, np.float32)
        predictions = np.empty((len(Z), *self._prediction_shape), np.float64)
        self._predict(engine, work, Z.ctypes.data, len(Z), predictions.ctypes.data)
        return predictions


def _row_settings(rows) -> dict:
    """The row model's fields of the C structure, float32 as the JAX engine rounds them."""
    if isinstance(rows, GaussianRows):
        clips = gaussian_gln.clips(rows)
        return dict(gaussian=1, learning_rate=clips.learning_rate, max_weight=clips.max_weight,
                    feature_bound=clips.feature_bound, min_precision=clips.min_precision,
                    max_precision=clips.max_precision, max_mean=clips.max_mean)
    low = np.float32(rows.prob_eps)
    return dict(learning_rate=np.float32(rows.learning_rate), low=low, high=np.float32(1) - low,
                max_weight=np.float32(rows.max_weight), feature_bound=np.float32(mixing.logit_bound(rows.prob_eps)),
                prob_eps=rows.prob_eps)


def learn(calls_for, state, cfg, X, Y, stop=None):
    """Learn the rows of ``X`` [n, d], ``Y`` [n] in order on the host state ``state`` of ``cfg``, as
    ``nctl.core.engine.learn`` learns them (the same blocks, boundaries and enlargements). ``calls_for(state,
    cfg)`` gives the ``NCTLCalls`` of a state. Returns ``(state, cfg, predictions [done, nets,
    *rows.prediction_shape])``; where ``stop.asked`` turns true (``nctl.interrupts``), it ends after the block of rows it is in."""
    probs, a = [], 0
    t = int(state.schedule.t)
    while a < len(X) and not (stop is not None and stop.asked):
        if cfg.arena_depth < cfg.max_depth and arenas_outgrown(cfg, t):
            state, cfg = enlarge(state, cfg, cfg._replace(arena_depth=lean_arena_depth(cfg, t)))
        n = min(LEARN_BLOCK, len(X) - a)
        p, done, due = calls_for(state, cfg).learn(X[a:a + n], Y[a:a + n])
        probs.append(p)
        a, t = a + done, t + done
        if due and not state.records.ok:  # the reservoirs hold more records than the arena has room for
            state, cfg = enlarge(state, cfg, records_doubled(cfg, t))
        elif not due and done < n:  # the tree outgrew max_depth
            state, cfg = enlarge(state, cfg, cfg._replace(max_depth=cfg.max_depth + 1, arena_depth=cfg.max_depth + 1))
    probs = probs[0] if len(probs) == 1 else np.concatenate(probs) if probs else np.zeros((0, cfg.n_nets, *cfg.rows.prediction_shape))
    return state, cfg, probs


def learn_observed(calls_for, state, cfg, X, Y, observe, stop=None):
    """``learn`` one row at a time, with ``observe(state, cfg)`` (a module-level JAX function, compiled once
    per configuration) taken after each step is learned and before its boundary is processed, as
    ``nctl.core.engine.learn`` takes it. Returns ``(state, cfg, predictions [done, nets, ...], observations
    stacked per step)``."""
    import jax

    from nctl.core.engine import pad_to_grown

    observed = jax.jit(observe, static_argnums=1)
    probs, observations = [], []
    t = int(state.schedule.t)
    for z, y in zip(X, Y):
        if stop is not None and stop.asked:
            break
        if cfg.arena_depth < cfg.max_depth and arenas_outgrown(cfg, t):
            state, cfg = enlarge(state, cfg, cfg._replace(arena_depth=lean_arena_depth(cfg, t)))
        if t >= 2**cfg.max_depth:  # the tree outgrows max_depth
            state, cfg = enlarge(state, cfg, cfg._replace(max_depth=cfg.max_depth + 1, arena_depth=cfg.max_depth + 1))
        calls = calls_for(state, cfg)
        probs.append(calls.step(z, y))
        observations.append(jax.tree.map(lambda o: np.asarray(o)[None], observed(state, cfg)))
        t += 1
        if calls.boundary() and not state.records.ok:
            state, cfg = enlarge(state, cfg, records_doubled(cfg, t))
    if not probs:
        return state, cfg, np.zeros((0, cfg.n_nets, *cfg.rows.prediction_shape)), None
    return state, cfg, np.array(probs), jax.tree.map(lambda *parts: np.concatenate(pad_to_grown(parts)), *observations)


def records_doubled(cfg, t: int):
    """The engine with twice the record rows (and the next arena enlargement where it is near), as the JAX
    engine's ``doubled_records`` gives it; that module imports JAX, which a steady learner never needs."""
    from nctl.core.engine.ahead import doubled_records

    return doubled_records(cfg, t)


def enlarge(state, cfg, wanted):
    """The host state in the larger engine ``wanted`` (``nctl.core.engine.resize``, one XLA program run on
    the state once) and that engine."""
    import jax

    from nctl.core.engine.resize import resize

    new = configured(cfg, jax_programs=False, max_depth=wanted.max_depth, record_rows=wanted.record_rows,
                     arena_depth=wanted.arena_depth)
    return host_arrays(jax.jit(resize, static_argnums=(1, 2))(state, cfg, new)), new
