"""Programs compiled in background threads before the stream needs them: the boundary, the one-row
prediction and the next enlargement's programs (docs/algorithm.md §6.8).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from functools import lru_cache, partial
from typing import Any, Callable

import jax
import numpy as np

from nctl.core.engine.compiled import Observe, learn_block, lower_resize, pool_boundary, predict_rows, run_steps
from nctl.core.engine.config import EngineConfig, configured, enlargement_near, lean_arena_depth
from nctl.core.engine.state import State


class CompiledAhead:
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


_boundary_programs: OrderedDict = OrderedDict()  # EngineConfig -> CompiledAhead, most recent last


_tables_lock = threading.Lock()  # the tables of programs compiled ahead; enlargement threads fill them too


def boundary_program(state: State, cfg: EngineConfig) -> CompiledAhead:
    """The boundary program of ``cfg``, compiled in the background from the first call for ``cfg``:
    ``learn`` starts it with the step program's compilation and waits for it before returning, so that
    the first pool boundary (step ``P``) of a stream learned one row at a time does not stall (§6.8)."""
    return _ahead(_boundary_programs, state, cfg, pool_boundary.lower)


_one_row_predictions: OrderedDict = OrderedDict()  # EngineConfig -> CompiledAhead, most recent last


def one_row_prediction_ahead(state: State, cfg: EngineConfig) -> CompiledAhead:
    """The one-row prediction of ``cfg``, compiled in the background into ``jit``'s own cache (with
    committed states the two agree) for a stream learned one row at a time, whose predictions after a
    pool boundary need it (§6.8, §6.9)."""
    return _ahead(_one_row_predictions, state, cfg, _lower_one_row_prediction)


def _lower_one_row_prediction(shapes, cfg: EngineConfig):
    return predict_rows.lower(shapes, jax.ShapeDtypeStruct((1, cfg.n_features), np.float32), 1, cfg)


def programs_ahead(state: State, cfg: EngineConfig, one_row: bool) -> list[CompiledAhead]:
    """What ``learn`` has compiled in the background for ``cfg`` (§6.8): the boundary, and for a stream
    learned one row at a time (``one_row``) the one-row prediction."""
    return [boundary_program(state, cfg)] + ([one_row_prediction_ahead(state, cfg)] if one_row else [])


def _ahead(programs_of: OrderedDict, state: State, cfg: EngineConfig, lower: Callable[..., Any]) -> CompiledAhead:
    """``programs_of[cfg]``, started with ``lower(shapes of state, cfg)`` when missing (the shapes are
    taken only then: the river path calls this for every row); the ``PROGRAMS_AHEAD_KEPT`` most
    recent."""
    with _tables_lock:
        ahead = programs_of.get(cfg)
        if ahead is None:
            ahead = programs_of[cfg] = CompiledAhead(partial(lower, _shapes(state), cfg))
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


_enlargements_ahead: OrderedDict = OrderedDict()  # (cfg, enlarged cfg) -> CompiledAhead, most recent last


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
    grown = lower_resize(shapes, cfg, new).compile().out_info
    Z, labels, n = learn_block(np.zeros((1, n_features), np.float32), np.zeros(1), 0, new)
    run_steps.lower(grown, Z, labels, n, new, observe, Z[0], True).compile()
    for ahead in programs_ahead(grown, new, one_row):
        ahead.program()


def enlarge_ahead(state: State, cfg: EngineConfig, new: EngineConfig, n_features: int, observe: Observe,
                  one_row: bool) -> None:
    """Compile, in the background, the enlargement of ``state`` from ``cfg`` to ``new`` and ``new``'s
    programs (§6.8), so that the stream does not stop to compile them when it gets there."""
    with _tables_lock:
        if (cfg, new) not in _enlargements_ahead:
            _enlargements_ahead[cfg, new] = CompiledAhead(
                partial(_compile_enlargement, _shapes(state), cfg, new, n_features, observe, one_row))
            while len(_enlargements_ahead) > ENLARGEMENTS_KEPT:
                _enlargements_ahead.popitem(last=False)


def claim_enlargement(cfg: EngineConfig, new: EngineConfig) -> CompiledAhead | None:
    """The enlargement from ``cfg`` to ``new`` if it was started ahead (taken from the table: the caller
    waits for it rather than compile it a second time)."""
    with _tables_lock:
        return _enlargements_ahead.pop((cfg, new), None)


def finish_compiling() -> None:
    """Wait for every program being compiled ahead (§6.8)."""
    for programs_of in (_enlargements_ahead, _boundary_programs, _one_row_predictions):  # enlargements add programs
        with _tables_lock:
            started = list(programs_of.values())
        for ahead in started:
            ahead.finish()
