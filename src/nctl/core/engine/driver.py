"""The host side of ``learn`` and ``predict``: blocks of rows through the compiled programs, pool
boundaries when due, and the state enlarged when the tree or an arena needs room (docs/algorithm.md §6.8).
"""

from __future__ import annotations

import jax
import numpy as np

from nctl.core.engine.ahead import (
    RECORDS_LOW, boundary_program, claim_enlargement, doubled_records, enlarge_ahead, next_arena_enlargement,
    programs_ahead,
)
from nctl.core.engine.compiled import Observe, learn_block, predict_rows, resize_state, run_steps, unpack
from nctl.core.engine.config import (
    EngineConfig, PREDICT_BLOCK, arenas_outgrown, configured, enlargement_near, lean_arena_depth,
)
from nctl.core.engine.state import State


def learn(state: State, cfg: EngineConfig, X, Y, observe: Observe = None, stop=None):
    """Learn the rows of ``X`` [n, d], ``Y`` [n] in order. Returns ``(state, cfg, predictions [n, classes],
    observations)``; the configuration changes when the state had to grow (a longer stream than
    ``2^max_depth``, or more records held by reservoirs than the arena had room for). Where ``stop.asked``
    turns true (``nctl.interrupts``), it ends after the block of rows it is in, with the state prepared
    for the next row, and returns the predictions of the rows learned."""
    return _learn(state, cfg, X, Y, observe, None, stop)[:4]


def learn_then_predict(state: State, cfg: EngineConfig, X, Y, z, stop=None):
    """``learn(state, cfg, X, Y)`` followed by ``predict`` of the row ``z`` [d] at the new state, in the
    same compiled call as the last rows unless a pool boundary or a growth comes between them (the
    river path: learn the last example, predict the next one). Returns ``(state, cfg, predictions [n,
    classes], prediction of z [classes])``; ``stop`` as in ``learn``."""
    z = np.asarray(z, np.float32)
    state, cfg, probs, _, p_next = _learn(state, cfg, X, Y, None, z, stop)
    return state, cfg, probs, p_next if p_next is not None else predict(state, cfg, z[None])[0]


def _learn(state: State, cfg: EngineConfig, X, Y, observe: Observe, z_next, stop):
    """``learn``, and the prediction of ``z_next`` when the last call of ``run_steps`` made it (else None)."""
    if not state.schedule.t.committed:  # as the boundary program's outputs are: each program compiles once
        state = jax.device_put(state, jax.devices()[0])
    one_row = z_next is not None or X.shape[0] == 1  # a stream learned one row at a time (the river path)
    first_cfg, ahead = cfg, programs_ahead(state, cfg, one_row)
    probs, observations, a, p_next = [], [], 0, None
    t = int(state.schedule.t) if cfg.arena_depth < cfg.max_depth else None  # read once, then counted here
    while a < X.shape[0] and not (stop is not None and stop.asked):
        if t is not None and arenas_outgrown(cfg, t):
            state, cfg = enlarge(state, cfg, cfg._replace(arena_depth=lean_arena_depth(cfg, t)))
            programs_ahead(state, cfg, one_row)
        if t is not None and enlargement_near(cfg, t):
            new = next_arena_enlargement(cfg)
            if new is not None:
                enlarge_ahead(state, cfg, new, X.shape[1], observe, one_row)
        Z, labels, n = learn_block(X, Y, a, cfg)
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
                state, cfg = enlarge(state, cfg, doubled_records(cfg, t))
            elif unheld < RECORDS_LOW * cfg.record_rows + 2 * cfg.chunk:  # it will be soon
                enlarge_ahead(state, cfg, doubled_records(cfg, t), X.shape[1], observe, one_row)
        elif done < n:  # the tree outgrew max_depth
            state, cfg = enlarge(state, cfg, cfg._replace(max_depth=cfg.max_depth + 1, arena_depth=cfg.max_depth + 1))
    obs = jax.tree.map(lambda *parts: np.concatenate(pad_to_grown(parts)), *observations) if observations else None
    if cfg is not first_cfg:
        ahead = programs_ahead(state, cfg, one_row)
    for compiled in ahead:  # ready before the stream goes on: no stall at its first boundary, nor at the
        compiled.program()  # first prediction after it
    probs = np.concatenate(probs) if probs else np.zeros((0, cfg.n_nets) + cfg.rows.prediction_shape)
    return state, cfg, probs, obs, p_next


def pad_to_grown(parts) -> list:
    """Host arrays taken before and after the engine grew (more slots, more pool cells), zero-padded on
    every axis but the first to their largest sizes, so that they concatenate."""
    shape = np.max([part.shape[1:] for part in parts], axis=0)
    return [np.pad(part, [(0, 0)] + [(0, s - n) for s, n in zip(shape, part.shape[1:])]) for part in parts]


def enlarge(state: State, cfg: EngineConfig, wanted: EngineConfig):
    new = configured(cfg, max_depth=wanted.max_depth, record_rows=wanted.record_rows, arena_depth=wanted.arena_depth)
    ahead = claim_enlargement(cfg, new)
    if ahead is not None:  # compiling in the background: wait for it rather than compile it a second time
        ahead.finish()  # (had it failed, the calls below compile, and raise, on this thread)
    return resize_state(state, cfg, new), new


def reserve(state: State, cfg: EngineConfig, n_steps: int):
    """``(state, cfg)`` with block arenas that hold a growing tree's first ``n_steps`` steps (§6.2): enlarged
    now where they are smaller, instead of when the stream gets there. Nothing the learner computes
    changes."""
    depth = lean_arena_depth(cfg, n_steps)
    if depth <= cfg.arena_depth:
        return state, cfg
    return enlarge(state, cfg, cfg._replace(arena_depth=depth))


def predict(state: State, cfg: EngineConfig, X) -> np.ndarray:
    """Frozen predictions [n, classes] of the next step for the rows of ``X`` [n, d]."""
    out = []
    for a in range(0, X.shape[0], PREDICT_BLOCK):
        rows = X[a:a + PREDICT_BLOCK]
        size = 1 if rows.shape[0] == 1 else PREDICT_BLOCK  # two compiled shapes for any number of rows
        Z = np.zeros((size, X.shape[1]), np.float32)
        Z[:rows.shape[0]] = rows
        out.append(np.asarray(predict_rows(state, Z, rows.shape[0], cfg))[:rows.shape[0]])
    return np.concatenate(out) if out else np.zeros((0, cfg.n_nets) + cfg.rows.prediction_shape)
