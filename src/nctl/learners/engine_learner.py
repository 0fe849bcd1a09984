"""What every learner run by the NCTL engine (``nctl.core.engine``) shares: ``EngineLearner``, the
engine's configuration, state, learning, forks, inspection and save shapes, for ``nctl.NCTL`` (GGM
neurons) and ``nctl.NCTLRegressor`` (Gaussian neurons)."""

from __future__ import annotations

import weakref
from contextlib import contextmanager

import numpy as np

from nctl import engines, interrupts, memory
from nctl.core import engine, gln, shape_only, tree
from nctl.deferred import jax
from nctl.learners.base import bytes_of
from nctl.native import nctl as native_nctl
from nctl.native.state import host_arrays

DEFAULT_MAX_DEPTH = 20  # depth=None: room for 2^20 steps; a longer stream enlarges the engine once
POOL_COPY_SHARE = 0.5  # a fork's copy of the pool entries stays in host memory while it takes at most this share
# of the host's free memory, else it goes to a temporary file (docs/algorithm.md §6.7)


class EngineLearner:
    """A learner whose every neuron is a Forget-Me-Not process run by ``nctl.core.engine``; mixed into a
    dataclass with ``OnlineLearner`` that has the fields ``layer_sizes``, ``context_bits``, ``pool``
    (``nctl.Pool``), ``depth``, ``split_prob``, ``seed`` and ``n_classes``, and a ``rows`` property: the row model
    of its neurons."""

    _memory_remedy = "lower context_bits, layer_sizes or the pool's size, or give the process more memory"
    cfg_ = None  # the engine configuration of ``state_`` (it changes as the state grows); None before it
    _reserved_steps = 0  # a growing tree's arenas hold at least this many steps (``reserve``)
    _pool_file = None  # (a fork's pool copy in a temporary file, weak references to the pool rows it copies)

    def engine_config(self, n_features: int, max_depth: int | None = None, record_rows: int | None = None,
                      arena_depth: int | None = None, full: bool = False,
                      fixed_blocks: tuple | None = None) -> engine.EngineConfig:
        """The engine of this learner for ``n_features`` inputs (sizes: docs/algorithm.md §6): room for
        a tree of ``depth`` (``DEFAULT_MAX_DEPTH`` when growing); a growing tree's block arenas start
        small, or sized for the steps ``reserve`` asked for, and grow with it (``engine.lean_arena_depth``)
        unless ``full``; the layers with fixed blocks are ``fixed_blocks``, by default the engine's choice
        (``engine.configure``); for the JAX engine's programs unless the native engine was chosen."""
        rows, jax_programs = self.rows, self.engine_ != engines.NATIVE
        if max_depth is None:
            max_depth = DEFAULT_MAX_DEPTH if self.depth is None else self.depth
        cfg = engine.configure(n_features, self.layer_sizes, int(self.context_bits), rows, self.pool.config(),
                               tree.split_grid(self.split_prob), self.n_classes, max_depth, record_rows, arena_depth,
                               fixed_blocks, jax_programs)
        if self.depth is None and arena_depth is None and not full:
            cfg = engine.configured(cfg, jax_programs, arena_depth=engine.lean_arena_depth(cfg, self._reserved_steps))
        return cfg

    def native_engine_for(self, n_features: int) -> bool:
        """Whether the native engine may run this learner with ``n_features`` inputs (``nctl.engines``
        chooses): exact mode does, up to ``native_nctl.MAX_WEIGHTS`` weights per member over its class
        networks; bounded mode (``trained_members``, §5.3) and larger networks run on JAX for now
        (docs/algorithm.md §6.12)."""
        rows, nets = self.rows, self.n_classes if self.n_classes > 2 else 1
        weights = nets * sum(n * rows.width(fan_in)
                             for n, fan_in in zip(self.layer_sizes, gln.fan_ins(n_features, self.layer_sizes)))
        return native_nctl.supports(len(self.layer_sizes), len(tree.split_grid(self.split_prob)),
                                    self.pool.trained_members is not None, weights)

    def _first_state_bytes(self, n_features: int) -> int:
        return self.state_bytes(n_features, n_steps=self._reserved_steps)  # a growing tree's arenas grow later

    def state_bytes(self, n_features: int, n_steps: int | None = None) -> int:
        """Bytes of the largest state this learner reaches for ``n_features`` inputs on a stream of
        ``n_steps`` steps (default ``2^depth``, or ``2^DEFAULT_MAX_DEPTH`` when growing), from shapes
        alone (nothing is allocated): an upper bound to plan with."""
        cfg = self.engine_config(n_features, full=True)
        if n_steps is not None and self.depth is None:  # the arenas a growing tree has after n_steps
            cfg = self.engine_config(n_features, arena_depth=engine.lean_arena_depth(cfg, n_steps))
        return bytes_of(self._fresh_state(n_features, cfg, shape_only))

    def fork_bytes(self, n_features: int) -> int:
        """Bytes a ``fork`` may hold beyond the state, at most: where the tree grows, a copy of the state;
        else the journal's, the state but its pool entries (§6.7: a journal copies those to a temporary
        file where memory is short)."""
        if self.depth is None:
            return self.state_bytes(n_features)
        pool = self._fresh_state(n_features, self.engine_config(n_features, full=True), shape_only).nets.arena.pool_rows
        return self.state_bytes(n_features) - bytes_of(pool)

    def working_bytes(self, n_features: int) -> int:
        """Bytes a learning step may hold beside the state, at most: at a pool boundary the compiled
        update's new arrays stand beside the ones they replace until it returns: counted as a copy of
        the state (the compiler's own memory is counted apart, ``nctl.memory.RUNTIME_ADDRESS_SPACE``)."""
        return self.state_bytes(n_features)

    def _fresh_state(self, n_features: int, cfg: engine.EngineConfig | None = None, xp=np):
        """A fresh state as numpy arrays (``xp``: ``nctl.core.shape_only``, for its shapes alone)."""
        cfg = cfg or self.engine_config(n_features)
        return engine.init(cfg, self.seed, self.depth or 0, xp=xp)

    def _init_state(self, n_features: int):
        self.cfg_ = self.engine_config(n_features)
        return self._fresh_state(n_features, self.cfg_)

    def _copy_extra(self, twin) -> None:
        twin._reserved_steps = self._reserved_steps
        if self.state_ is not None:
            twin.cfg_ = self.cfg_

    def reserve(self, n_steps: int) -> None:
        """Room for a stream of ``n_steps`` steps in all (those learned included), made now, or with the
        state at the first example, rather than as the stream gets there (docs/algorithm.md §6.2): a
        growing tree's block arenas are enlarged by copies, each holding the old and the new arenas at
        once, so a caller that knows its stream's length sizes them once and its memory peaks at the
        state itself. Predictions do not change. A fixed ``depth`` sizes the arenas for ``2^depth`` steps
        at once already; a growing tree's room stops at ``2^20`` steps (``DEFAULT_MAX_DEPTH``)."""
        if isinstance(n_steps, bool) or not isinstance(n_steps, (int, np.integer)) or n_steps < 0:
            raise ValueError(f"reserve: n_steps must be an integer >= 0, got {n_steps!r}")
        if self._forked:
            raise RuntimeError("reserve inside fork(): a fork gives the state back as it was; reserve after the "
                               "with block")
        wanted = max(self._reserved_steps, int(n_steps))
        self.flush()
        if self.state_ is not None and self.depth is None:
            grown = engine.lean_arena_depth(self.cfg_, wanted)
            if grown > self.cfg_.arena_depth:
                what = f"{type(self).__name__} reserving {wanted} steps"
                needed = self.state_bytes(self.n_features_, n_steps=wanted)
                memory.check_fits(what, needed, self._memory_remedy)
                with interrupts.held() as stop, memory.allocation(what, needed, self._memory_remedy):
                    if self.engine_ == engines.NATIVE:
                        self.state_, self.cfg_ = native_nctl.enlarge(self.state_, self.cfg_,
                                                                     self.cfg_._replace(arena_depth=grown))
                    else:
                        state, cfg = engine.reserve(self.state_, self.cfg_, wanted)
                        self.state_, self.cfg_ = jax.block_until_ready(state), cfg
                interrupts.raise_if_asked(stop, f"reserve interrupted after it reserved {wanted} steps")
        self._reserved_steps = wanted

    # -- learning and predicting

    def _learn(self, X, y, stop):
        return self._run(X, y, None, stop)[0]

    def learn_observed(self, X, y, observe):
        """``learn_many`` that also returns ``observe(state, cfg)`` after every step (stacked), taken once
        the step is learned and before the next boundary is processed; ``observe`` is a module-level pure
        function of the engine state and configuration (``nctl.core.engine``), e.g.
        ``nctl.inspect.boundaries.segment_posterior``."""
        X, y = self._checked_batch(X, y)
        self.flush()
        with interrupts.held() as stop:
            probs, observations = self._run(X, y, observe, stop)
            self.t_ += len(probs)
        interrupts.raise_if_asked(stop, f"learn_observed interrupted: {type(self).__name__} learned the first "
                                  f"{len(probs)} of the {len(X)} rows, and is whole, usable and savable")
        return self._outputs(probs), observations

    def _run(self, X, y, observe, stop):
        """Learn the rows (all unless ``stop`` ends it early: ``engine.learn``, or the native engine's
        ``nctl.native.nctl.learn`` and ``learn_observed``); returns the predictions and observations of the
        rows learned."""
        if self.engine_ == engines.NATIVE and observe is None:
            self.state_, self.cfg_, probs = native_nctl.learn(self._native_calls, self.state_, self.cfg_, X, y, stop)
            return probs, None
        if self.engine_ == engines.NATIVE:
            self.state_, self.cfg_, probs, observations = native_nctl.learn_observed(
                self._native_calls, self.state_, self.cfg_, X, y, observe, stop)
            return probs, observations
        self.state_, self.cfg_, probs, observations = engine.learn(self.state_, self.cfg_, X, y, observe, stop)
        return probs, observations

    def _native_calls(self, state, cfg) -> native_nctl.NCTLCalls:
        """The native engine's calls on ``state`` of ``cfg`` (made again when the state is other arrays)."""
        return self.calls_for(state, lambda state: native_nctl.NCTLCalls(state, cfg))

    def _learn_then_predict(self, X, y, x, stop):
        if self.engine_ == engines.NATIVE:
            return super()._learn_then_predict(X, y, x, stop)
        self.state_, self.cfg_, probs, p = engine.learn_then_predict(self.state_, self.cfg_, X, y, x, stop)
        return len(probs), p

    @contextmanager
    def fork(self, X, y):
        """``OnlineLearner.fork``: the rows are learned by this learner itself, and what they overwrite
        is kept in a journal and put back on leaving the block (docs/algorithm.md §6.7), so a fork costs
        what its rows touch, not a copy of the learner; where a journal cannot serve (the rows would
        deepen the tree or enlarge a block arena), the fork is a copy. A journal's copy of the pool
        entries (where a pool boundary falls among the rows) goes to a temporary file where it would
        take more than ``POOL_COPY_SHARE`` of the free memory. On the native engine the learner learns the
        rows too, and is put back from a copy of its arrays taken first (no journal yet)."""
        X, y = self._checked_batch(X, y)
        self.flush()
        native = self.engine_ == engines.NATIVE
        if native:
            kept = host_arrays(self.state_) if len(X) else None
        else:
            kept = engine.journal(self.state_, self.cfg_, X, on_disk=self._pool_copy_on_disk(),
                                  pool=self._pool_file_of_state()) if len(X) else None
        if kept is None:
            with super().fork(X, y) as twin:
                yield twin
            return
        t, cfg = self.t_, self.cfg_
        try:
            with interrupts.held() as stop:  # the journal undoes these rows, however many were learned
                self._learn(X, y, stop)
            interrupts.raise_if_asked(stop, "fork interrupted: the learner is as it was before the fork")
            self._forked, self.t_ = True, t + len(X)
            yield self
        finally:
            with interrupts.held():  # the undo hands the state over too; whatever interrupted was raised already
                self._forked = False
                self.state_, self.cfg_, self.t_ = kept if native else engine.undo(self.state_, kept), cfg, t
            if not native and kept.pool is not None and isinstance(kept.pool[0], np.memmap):  # for the next fork
                self._pool_file = kept.pool, tuple(weakref.ref(rows) for rows in self.state_.nets.arena.pool_rows)

    def _pool_file_of_state(self):
        """The pool copy in a file that an earlier fork took of the pool rows the state holds now, or
        None: JAX arrays are immutable, so the same array objects hold the same rows; learning donates
        them and holds new ones. A copy in memory is not kept, to leave the memory to learning."""
        if self._pool_file is None:
            return None
        copy, refs = self._pool_file
        if all(ref() is rows for ref, rows in zip(refs, self.state_.nets.arena.pool_rows)):
            return copy
        self._pool_file = None  # the file goes with its last map
        return None

    def _pool_copy_on_disk(self) -> bool:
        free = memory.available_host_memory()  # the copy is held on the host, also beside an accelerator
        pool = sum(rows.nbytes for rows in self.state_.nets.arena.pool_rows)
        return free is not None and pool > POOL_COPY_SHARE * free

    def _predict(self, X):
        if self.engine_ == engines.NATIVE:
            return self._native_calls(self.state_, self.cfg_).predict(X)
        return engine.predict(self.state_, self.cfg_, X)

    # -- looking inside

    def hyperplanes(self, n_features: int) -> tuple:
        """The gating hyperplanes ``(normals [N, s, d], offsets [N, s])`` of every class network (one
        when binary, or for regression) and layer, as the learner draws them for ``n_features`` inputs."""
        gates = engine.gates(self.engine_config(n_features), self.seed)
        return tuple(tuple((np.asarray(g.normals[net]), np.asarray(g.offsets[net])) for g in gates)
                     for net in range(gates[0].normals.shape[0]))

    def pool_events(self) -> tuple:
        """Per class network, per layer: ``[N_i, 4]`` counts of refine, skip, add and evict (§4.5)."""
        self.flush()
        if self.state_ is None:
            raise ValueError("the learner has not seen any example yet")
        events = np.asarray(self.state_.nets.pool.events)
        return tuple(tuple(net[s.offset:s.offset + s.neurons] for s in self.cfg_.layers) for net in events)

    # -- save / load

    def _shape_meta(self) -> dict:
        return {"max_depth": self.cfg_.max_depth, "record_rows": self.cfg_.record_rows,
                "arena_depth": self.cfg_.arena_depth, "fixed_blocks": [s.fixed for s in self.cfg_.layers]}

    def restore_template(self, n_features: int, shapes: dict, xp=np):
        """The state a save of this learner with ``n_features`` inputs and ``shapes`` (its engine's sizes)
        holds, made by ``xp``, and that engine as ``cfg_`` (``nctl.learners.load`` reads only the state's
        shapes)."""
        fixed = shapes.get("fixed_blocks", [False] * len(self.layer_sizes))  # saves before format 7: free stacks
        self.cfg_ = self.engine_config(n_features, shapes["max_depth"], shapes["record_rows"], shapes["arena_depth"],
                                       fixed_blocks=tuple(fixed))
        return self._fresh_state(n_features, self.cfg_, xp)
