"""Binary sequence predictors: KT, PTW and FMN over Krichevsky-Trofimov counts.

Prediction (and, through arithmetic coding, compression) of piecewise-stationary binary sources whose
segments may recur ([algorithm §3](algorithm.md#3-partition-tree-weighting),
[§4](algorithm.md#4-the-forget-me-not-process)). PTW and FMN run on the same engine as ``nctl.NCTL``
(``nctl.core.engine``), with KT counts as the row model: one layer of one neuron with one context.
Each predictor is a value object; ``log_probs(bits)`` runs a fresh predictor over the bits and returns
``log P(x_{1:t}) = sum_{s<=t} log P(x_s | x_<s)`` for every prefix ``t`` in float64: the code length of
sequential prediction. With a tree deep enough for the whole string this is the tree's evidence
``log PTW_D(x_{1:t})``; a growing tree (``depth=None``) pays about one extra bit per doubling of ``t``.

>>> import numpy as np
>>> from nctl.sequence import KT, PTW, FMN
>>> rates = np.repeat([0.05, 0.95] * 8, 128)  # two biased coins taking turns, 128 flips each
>>> bits = (np.random.default_rng(0).random(rates.size) < rates).astype(int)
>>> kt, ptw, fmn = (p.log_probs(bits)[-1] for p in (KT(), PTW(), FMN()))
>>> bool(fmn > ptw > kt)
True
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from nctl.core import engine, tree
from nctl.core.rows import KTRows
from nctl.pool import Pool, pool_keywords


def check_bits(bits) -> np.ndarray:
    """``bits`` as a 1-D int32 array of zeros and ones, or a ValueError saying what is wrong."""
    array = np.asarray(bits)
    if array.ndim != 1:
        raise ValueError(f"bits must be a 1-D array, got shape {array.shape}")
    if array.dtype.kind not in "biuf":
        raise ValueError(f"bits must be numeric or boolean, got dtype {array.dtype}")
    if array.dtype.kind == "f" and not np.all(np.isfinite(array)):
        raise ValueError("bits contain NaN or infinity")
    if not np.all((array == 0) | (array == 1)):
        bad = array[(array != 0) & (array != 1)][0]
        raise ValueError(f"bits must be 0 or 1, found {bad!r}")
    return array.astype(np.int32)


@dataclass(frozen=True)
class KT:
    """Krichevsky-Trofimov estimator: ``P(x_t = 1 | x_<t) = (n_1 + 1/2) / (t - 1 + 1)``."""

    def log_probs(self, bits) -> np.ndarray:
        return np.asarray(_kt_log_probs(jnp.asarray(check_bits(bits))))


@jax.jit
def _kt_log_probs(bits):
    rows = KTRows()

    def step(counts, x):
        q = rows.predict(counts, None)
        return rows.update(counts, None, q, x), jnp.log(jnp.where(x > 0, q, 1.0 - q))

    return jnp.cumsum(jax.lax.scan(step, jnp.zeros(2, jnp.float64), bits)[1])


class SequenceRun(NamedTuple):
    """What an FMN did on a string, step by step."""

    p1: np.ndarray  # [n] P(x_t = 1 | x_<t)
    log_px: np.ndarray  # [n] log P(x_t | x_<t)
    evidence: np.ndarray  # [n] log FMN(x_{1:t}) of the tree as it is at step t
    events: np.ndarray  # [n, 4] pool decisions so far: refine, skip, add, evict (boundary t included)
    pool: tuple  # the final pool in pool order: (n_0, n_1) counts of each stored state


MIN_MAX_DEPTH = 12  # strings of up to 2^12 - 1 bits share one engine, compiled once, per setting


@pool_keywords
@dataclass(frozen=True)
class FMN:
    """The Forget-Me-Not process over KT counts ([algorithm §4](algorithm.md#4-the-forget-me-not-process)):
    PTW whose segments mix a pool of remembered states with a fresh estimator. ``initial_pool`` pre-fills
    the pool with ``(n_0, n_1)`` counts; ``depth=None`` grows the tree with the string."""

    depth: int | None = None
    pool: Pool = Pool()
    initial_pool: tuple = ()
    split_prob: float = 0.5
    seed: int = 0

    def config(self, n_steps: int) -> engine.EngineConfig:
        max_depth = max(self.depth or 0, engine.max_depth_for(n_steps), MIN_MAX_DEPTH)
        return engine.configure(0, (1,), 0, KTRows(), self.pool.config(), tree.split_grid(self.split_prob), 2,
                                max_depth)

    def run(self, bits) -> SequenceRun:
        bits = check_bits(bits)
        cfg = self.config(len(bits))
        initial = np.asarray(self.initial_pool, np.float64).reshape(-1, 2)
        state = jax.device_put(engine.init(cfg, self.seed, self.depth or 0, initial))
        state, _, probs, (evidence, events) = engine.learn(state, cfg, np.zeros((len(bits), 0), np.float32), bits,
                                                            _observe)
        p1 = probs[:, 0]
        roster = np.asarray(state.nets.pool.roster[0, :, 0])
        stored = np.asarray(state.nets.arena.pool_rows[0][0, 0, 0])
        pool = tuple(tuple(float(v) for v in stored[e]) for e in roster if e >= 0)
        return SequenceRun(p1, np.log(np.where(bits == 1, p1, 1.0 - p1)), evidence, events, pool)

    def log_probs(self, bits) -> np.ndarray:
        return np.cumsum(self.run(bits).log_px)

    def probs(self, bits) -> np.ndarray:
        return self.run(bits).p1


def _observe(state: engine.State, cfg: engine.EngineConfig):
    """The neuron's evidence after a step and its event counts (which include the step's own boundary)."""
    net = jax.tree.map(lambda a: a[0], state.nets)
    return engine.posterior.posterior(net, state.schedule, cfg).log_evidence[0], net.pool.events[0]


@dataclass(frozen=True)
class PTW:
    """Partition Tree Weighting of depth ``depth`` (None: start at 0 and grow with the string) over KT:
    FMN without a pool ([algorithm §4.9](algorithm.md#49-pool-size-zero-and-fixed-pools))."""

    depth: int | None = None
    split_prob: float = 0.5
    fmn: FMN = field(init=False, repr=False)

    def __post_init__(self):
        object.__setattr__(self, "fmn", FMN(depth=self.depth, pool=Pool(size=0), split_prob=self.split_prob))

    def log_probs(self, bits) -> np.ndarray:
        return self.fmn.log_probs(bits)

    def probs(self, bits) -> np.ndarray:
        return self.fmn.probs(bits)

    def log_evidence(self, bits) -> np.ndarray:
        """``log PTW_D(x_{1:t})`` of the tree as it is at each step."""
        return self.fmn.run(bits).evidence
