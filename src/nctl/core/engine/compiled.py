"""The engine's compiled programs: a run of steps, the pool boundary, frozen predictions and the
enlargement of a state (docs/algorithm.md §6.8, §6.9).
"""

from __future__ import annotations

from functools import lru_cache, partial
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from nctl.core import programs
from nctl.core.engine.config import EngineConfig, LEARN_BLOCK, jaxlib_version
from nctl.core.engine.ops import per_net, when
from nctl.core.engine.records import reserve_records
from nctl.core.engine.resize import resize
from nctl.core.engine.state import State
from nctl.core.engine.step import advance, forward, step


COMPILER_OPTIONS = {"gpu": {"xla_gpu_deterministic_ops": True, "xla_gpu_enable_scatter_determinism_expander": False},
                    **({"cpu": {"xla_cpu_experimental_ynn_fusion_type": ""}} if jaxlib_version() >= (0, 9) else {})}
# The pool boundary, a configuration's largest program, runs once every P steps: XLA:CPU's older emitters
# compile it with about 40% less work, to the same bits, at a cost of under a millisecond per boundary
# (docs/algorithm.md §6.8).


BOUNDARY_COMPILER_OPTIONS = {**COMPILER_OPTIONS,
                             "cpu": {**COMPILER_OPTIONS.get("cpu", {}), "xla_cpu_use_fusion_emitters": False}}


Observe = Callable[[State, EngineConfig], Any] | None  # a module-level function: it keys compiled programs


@partial(programs.jit, static_argnums=(4, 5), donate_argnums=(0,), compiler_options=COMPILER_OPTIONS)
def run_steps(state: State, Z, Y, n, cfg: EngineConfig, observe: Observe, z_next, predict_next):
    """Learn rows ``Z[:n]`` in order until one ends at a step whose boundary updates the pool (``t = 0
    mod P``; that boundary is left to ``boundary``) or the tree would outgrow ``max_depth``; then, if
    ``predict_next`` and every row is done with no boundary due, predict the row ``z_next`` [d] at the
    new state (the next step's frozen prediction, as ``predict``; one program whether asked or not).
    Returns ``(state, outcome, observations)``: ``outcome`` packs into one float64 array (one transfer
    to the host, §6.9) the predictions [B, classes], the prediction of ``z_next`` [classes] (NaN where
    not made), the rows done and whether a boundary is due; ``unpack`` splits it. A prediction is
    ``rows.prediction_shape`` per class network."""
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

    preds = jnp.zeros((Z.shape[0], cfg.n_nets) + cfg.rows.prediction_shape, jnp.float64)
    obs = None
    if observe is not None:
        shapes = jax.eval_shape(lambda s: observe(s, cfg), state)
        obs = jax.tree.map(lambda s: jnp.zeros((Z.shape[0],) + s.shape, s.dtype), shapes)
    done, state, preds, obs, due = jax.lax.while_loop(can_go, body, (jnp.int32(0), state, preds, obs, jnp.bool_(False)))
    unmade = prediction_type(cfg)
    p_next = jax.lax.cond(predict_next & (done == n) & ~due, lambda: predict_row(state, z_next, cfg),
                          lambda: jnp.full(unmade.shape, jnp.nan, unmade.dtype))
    outcome = jnp.concatenate([preds.reshape(-1), p_next.astype(jnp.float64).reshape(-1),
                               jnp.stack([done, due]).astype(jnp.float64)])
    return state, outcome, obs


def unpack(outcome: np.ndarray, cfg: EngineConfig):
    """``run_steps``' outcome as ``(predictions [B, classes, *prediction_shape], prediction of z_next
    [classes, *prediction_shape], rows done, boundary due)``."""
    shape = (cfg.n_nets,) + cfg.rows.prediction_shape
    size = int(np.prod(shape))
    preds, p_next = outcome[:-2 - size].reshape((-1,) + shape), outcome[-2 - size:-2].reshape(shape)
    return preds, p_next, int(outcome[-2]), bool(outcome[-1])


@partial(programs.jit, static_argnums=(1,), donate_argnums=(0,), compiler_options=BOUNDARY_COMPILER_OPTIONS)
def pool_boundary(state: State, cfg: EngineConfig):
    """The boundary after a step ``t = 0 mod P``: pool updates, the restart, the records of the next ``P``.
    Returns the state and the count of record rows no reservoir holds."""
    return reserve_records(advance(state, cfg, pool_update=True), cfg)


def predict_row(state: State, z, cfg: EngineConfig):
    """The frozen prediction [classes] of the next step for one row ``z`` [d]."""
    return per_net(lambda net: forward(net, state.schedule, z, jnp.float32(0), cfg, learn=False).p, state.nets)


def prediction_type(cfg: EngineConfig) -> jax.ShapeDtypeStruct:
    """What ``predict_row`` returns: float64 [classes, *rows.prediction_shape] (the mixture over
    segments is float64), known without tracing it a second time."""
    return jax.ShapeDtypeStruct((cfg.n_nets,) + cfg.rows.prediction_shape, jnp.float64)


@partial(programs.jit, static_argnums=(3,), compiler_options=COMPILER_OPTIONS)
def predict_rows(state: State, Z, n, cfg: EngineConfig):
    """Frozen predictions of the first ``n`` rows of ``Z`` [B, d] (the rest 0). ``predict`` calls it
    with ``B = 1`` (one row: the program compiled ahead for the river path, §6.8) or ``PREDICT_BLOCK``
    (any other number of rows), so a configuration compiles at most two prediction programs."""
    row = prediction_type(cfg)
    out = jnp.zeros((Z.shape[0],) + row.shape, row.dtype)
    return jax.lax.fori_loop(0, n, lambda i, out: out.at[i].set(predict_row(state, Z[i], cfg)), out)


def _resize_parts(kept: tuple, grown: tuple, layout: tuple, old: EngineConfig, new: EngineConfig) -> State:
    """``resize`` of the state whose leaves are ``kept`` (those that keep their shape) and ``grown``
    (the others), merged in the order of ``layout = (treedef, grows)``."""
    treedef, grows = layout
    kept_leaves, grown_leaves = iter(kept), iter(grown)
    state = jax.tree.unflatten(treedef, [next(grown_leaves) if g else next(kept_leaves) for g in grows])
    return resize(state, old, new)


# the leaves that keep their shape are donated: their buffers become the enlarged state's, so an
# enlargement holds the state once, plus the arrays it grows (and XLA is told of no donation it cannot use)
_resize_program = programs.jit(_resize_parts, static_argnums=(2, 3, 4), donate_argnums=(0,))


def _resize_arguments(state, old: EngineConfig, new: EngineConfig) -> tuple:
    """``_resize_program``'s arguments for ``state`` (arrays, or shapes to lower for)."""
    leaves, treedef = jax.tree.flatten(state)
    grows = _growing_leaves(old, new, treedef, tuple((a.shape, a.dtype) for a in leaves))
    return (tuple(a for a, g in zip(leaves, grows) if not g), tuple(a for a, g in zip(leaves, grows) if g),
            (treedef, grows), old, new)


@lru_cache(maxsize=16)
def _growing_leaves(old: EngineConfig, new: EngineConfig, treedef, kinds: tuple) -> tuple:
    """Which leaves of a state of ``treedef`` and ``kinds`` (shape, dtype) ``resize`` enlarges: traced
    once per enlargement, whether compiled ahead or not."""
    state = jax.tree.unflatten(treedef, [jax.ShapeDtypeStruct(shape, dtype) for shape, dtype in kinds])
    enlarged = jax.tree.leaves(jax.eval_shape(lambda s: resize(s, old, new), state))
    return tuple((shape, dtype) != (b.shape, b.dtype) for (shape, dtype), b in zip(kinds, enlarged))


def resize_state(state: State, old: EngineConfig, new: EngineConfig) -> State:
    """``resize`` as one compiled program that reuses the buffers of the arrays it does not enlarge;
    ``state`` is consumed (§6.2, §6.5)."""
    return _resize_program(*_resize_arguments(state, old, new))


def lower_resize(shapes, old: EngineConfig, new: EngineConfig):
    """``resize_state``'s program lowered for a state of ``shapes`` (compiled ahead, §6.8)."""
    return _resize_program.lower(*_resize_arguments(shapes, old, new))


def learn_block(X, Y, start: int, cfg: EngineConfig):
    """The next rows from ``start`` as ``run_steps`` takes them (arguments of the same kinds in every call,
    so that the program compiled ahead for a configuration is the one its calls find): ``(Z
    [LEARN_BLOCK, d] float32, labels [LEARN_BLOCK] (rows.label_dtype: int32 labels, or float32 targets), n)``,
    zero past the ``n`` rows."""
    n = min(LEARN_BLOCK, X.shape[0] - start)
    Z = np.zeros((LEARN_BLOCK, X.shape[1]), np.float32)
    Z[:n] = X[start:start + n]
    labels = np.zeros(LEARN_BLOCK, cfg.rows.label_dtype)
    labels[:n] = Y[start:start + n]
    return Z, labels, n
