"""The native engine's NCTL (``nctl.native.nctl``, docs/algorithm.md §6.12) against the JAX engine run on the
CPU and against the literal network of ``tests/reference/nctl_literal.py``.

Against the JAX engine, from the same fresh state on the same rows, for GGM rows (``nctl.NCTL``) and Gaussian
rows (``nctl.NCTLRegressor``, §8.6): every integer and boolean array of the state is equal (the schedule,
every pool decision and event count, the pool's entries, orders, ages and lineages, the slots' sources and
block tables, the records and their reservoirs, the free stacks), the predictions agree within
``PREDICTION_BOUND``, and with GGM rows the first layer's rows (which read only the features) are
bit-identical: the JAX engine computes them with the CPU kernel of §6.11, whose dot products the native
engine sums in the same order (Gaussian rows' dot products are XLA's, summed in an order of its own). They are not bit-identical beyond the first layer: XLA computes float32 ``exp`` and
``log`` and float64 ``exp`` and ``log1p`` with approximations of its own, which differ from the C library's
in the last bit for about one argument in ten (the members' posteriors, the level posterior, the hidden
layers' input logits), and a row that learned from such inputs carries the difference on (§6.12).

Against the literal network: the cases of ``tests/core/test_nctl_literal.py`` that the native engine runs
(exact mode), every prediction within 1e-7 and the pool event counts equal after half the stream and at
its end.
"""

from functools import lru_cache

import jax
import numpy as np
import pytest

import nctl
from nctl.core import engine
from nctl.learners.presets import SPLIT_GRID
from nctl.native import nctl as native_nctl
from nctl.native.state import host_arrays
from nctl.pool import with_pool
from tests.core.test_nctl_literal import CASES, STEPS, assert_same_events, recurring_stream, reference_run, settings

PREDICTION_BOUND = 1e-6  # the engines' predictions differ by float32 roundings (module docstring); seen: 3e-7


class NativeRun:
    """A state of the native engine and the ``calls_for`` that ``native_nctl.learn`` takes."""

    def __init__(self, state, cfg):
        self.state, self.cfg, self._calls = host_arrays(state), cfg, None

    def calls_for(self, state, cfg):
        if self._calls is None or self._calls.layers is not state:
            self._calls = native_nctl.NCTLCalls(state, cfg)
        return self._calls

    def learn(self, X, y):
        self.state, self.cfg, probs = native_nctl.learn(self.calls_for, self.state, self.cfg, X, y)
        return probs

    def predict(self, X):
        return self.calls_for(self.state, self.cfg).predict(X)

    def pool_events(self):
        events = np.asarray(self.state.nets.pool.events)
        return tuple(tuple(net[s.offset:s.offset + s.neurons] for s in self.cfg.layers) for net in events)


def drifting_stream(n, n_features, n_classes, seed=0):
    """``recurring_stream``'s two concepts taking turns every 40 rows, labels int32."""
    X, y = recurring_stream(n, n_features, n_classes, seed, period=40)
    return X, y.astype(np.int32)


def regression_stream(n, n_features, seed=0):
    """Two concepts taking turns every 40 rows, ``y = +-(z_0 + z_1 / 2)`` plus noise of standard deviation 0.1:
    rows [n, d] and float32 targets (standardised in scale, as the engine of a regressor learns them)."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, n_features)).astype(np.float32)
    s = X[:, 0] + 0.5 * X[:, 1]
    s = np.where((np.arange(n) // 40) % 2 == 1, -s, s)
    return X, (s + 0.1 * rng.standard_normal(n)).astype(np.float32)


TINY = dict(layer_sizes=(2, 1), context_bits=2, learning_rate=0.1)
DIGEST_POOL = dict(pool_size=3, min_segment=8, reservoir_size=8, depth=9)  # tools/state_digests.py's networks
JAX_CASES = {  # id -> (learner settings, n_features, rows, engine sizes (max_depth, record_rows, arena_depth,
    # fixed_blocks) where not the learner's)
    "tabular-binary": (dict(nctl.learners.presets.TABULAR), 8, 1200, {}),
    "tabular-3class": (dict(nctl.learners.presets.TABULAR, n_classes=3), 8, 600, {}),
    "grow-3class-joint-spacing-sampled": (dict(TINY, pool_size=3, min_segment=4, n_classes=3, joint_evidence=True,
                                               eviction="spacing", reservoir_size=10, seed=17), 3, 600, {}),
    "grid-uniform-spacing-free-stacks": (dict(layer_sizes=(3, 1), context_bits=2, learning_rate=0.1, pool_size=2,
                                              min_segment=2, eviction="spacing", split_prob=SPLIT_GRID,
                                              weight_init="uniform", reservoir_size=8), 2, 500,
                                         dict(fixed_blocks=(False, False))),
    # the tree outgrows max_depth and the block arenas their depth twice, the records their arena once: enlarged on
    # the host (each enlargement compiles the JAX engine's programs again, so no more of them than that)
    "enlarged-fifo": (dict(TINY, pool_size=3, min_segment=2, reservoir_size=6), 3, 300,
                      dict(max_depth=7, record_rows=32, arena_depth=5, fixed_blocks=(False, False))),
    "digest-4-3-1-3class": (dict(DIGEST_POOL, layer_sizes=(4, 3, 1), context_bits=2, n_classes=3, seed=11), 6, 300, {}),
    "digest-1-3class": (dict(DIGEST_POOL, layer_sizes=(1,), context_bits=2, n_classes=3, seed=3), 2, 300, {}),
    "digest-6-3-1-10class-784": (dict(DIGEST_POOL, layer_sizes=(6, 3, 1), context_bits=1, n_classes=10, seed=3), 784,
                                 70, {}),
}
GAUSSIAN_CASES = {  # the same for nctl.NCTLRegressor: its defaults, and a grid, spacing and free stacks
    "gaussian-defaults": ({}, 8, 600, {}),
    "gaussian-grid-joint-spacing-free-stacks": (dict(layer_sizes=(3, 1), pool_size=2, min_segment=2, split_prob=SPLIT_GRID,
                                                     joint_evidence=True, reservoir_size=8, seed=5), 2, 500,
                                                dict(fixed_blocks=(False, False))),
}


@lru_cache(maxsize=None)
def both_engines(case):
    """The JAX engine's and the native engine's runs of ``case`` from the same fresh state: ``(JAX state, its
    configuration, its predictions, the NativeRun, its predictions)``; kept per case (the tests only read them)."""
    gaussian = case in GAUSSIAN_CASES
    kwargs, n_features, rows, sizes = GAUSSIAN_CASES[case] if gaussian else JAX_CASES[case]
    learner = (nctl.NCTLRegressor(**with_pool(kwargs, nctl.NCTLRegressor.pool)) if gaussian
               else nctl.NCTL(**with_pool(kwargs)))
    cfg = learner.engine_config(n_features, **sizes)
    if "arena_depth" in sizes:  # a growing tree's lean arenas: enlarged as the tree deepens
        cfg = engine.configured(cfg, arena_depth=sizes["arena_depth"])
    fresh = engine.init(cfg, learner.seed, learner.depth or 0)
    native = NativeRun(fresh, cfg)
    X, y = regression_stream(rows, n_features) if gaussian else drifting_stream(rows, n_features, learner.n_classes)
    state, jax_cfg, want, _ = engine.learn(jax.device_put(fresh), cfg, X, y)
    got = native.learn(X, y)
    return jax.device_get(state), jax_cfg, np.asarray(want), native, got


@pytest.mark.parametrize("case", list(JAX_CASES) + list(GAUSSIAN_CASES))
def test_native_nctl_matches_the_jax_engine(case):
    state, cfg, want, native, got = both_engines(case)
    assert native.cfg == cfg
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=0, atol=PREDICTION_BOUND)
    leaves = jax.tree_util.tree_leaves_with_path(state)
    assert len(leaves) == len(jax.tree.leaves(native.state))
    for (path, a), b in zip(leaves, jax.tree.leaves(native.state)):
        name, a, b = jax.tree_util.keystr(path), np.asarray(a), np.asarray(b)
        assert a.shape == b.shape and a.dtype == b.dtype, name
        if a.dtype.kind != "f":
            assert np.array_equal(a, b), f"{name} differs at {np.argwhere(a != b)[:8].tolist()}"
    if case not in GAUSSIAN_CASES:  # the first layer reads only the features: bit-identical with GGM rows
        for name in ("pool_rows", "blocks"):
            assert np.array_equal(getattr(state.nets.arena, name)[0], getattr(native.state.nets.arena, name)[0]), name
    assert np.asarray(state.nets.pool.events).sum() > 0


def test_the_jax_cases_cross_pool_boundaries_and_grow():
    """The cases exercise what they are there for: every pool event, states stored by a refine, enlargements."""
    state, cfg, _, native, _ = both_engines("enlarged-fifo")
    kwargs, n_features, _, sizes = JAX_CASES["enlarged-fifo"]
    assert cfg.max_depth > sizes["max_depth"] and cfg.record_rows > sizes["record_rows"]
    assert cfg.arena_depth > sizes["arena_depth"]
    totals = np.asarray(native.state.nets.pool.events).sum(axis=(0, 1))
    assert np.all(totals > 0), totals


def test_the_gaussian_cases_reach_every_pool_event():
    totals = sum(np.asarray(both_engines(case)[3].state.nets.pool.events).sum(axis=(0, 1)) for case in GAUSSIAN_CASES)
    assert np.all(totals > 0), totals


@pytest.mark.parametrize("case", ["tabular-3class", "grid-uniform-spacing-free-stacks", "gaussian-defaults"])
def test_native_frozen_predictions_match_and_change_nothing(case):
    state, cfg, _, native, _ = both_engines(case)
    X, _ = drifting_stream(40, cfg.n_features, 2, seed=5)
    before = [np.array(a) for a in jax.tree.leaves(native.state)]
    got = native.predict(X)
    np.testing.assert_allclose(got, engine.predict(jax.device_put(state), cfg, X), rtol=0, atol=PREDICTION_BOUND)
    assert all(np.array_equal(a, b) for a, b in zip(before, jax.tree.leaves(native.state)))
    np.testing.assert_array_equal(native.predict(X[:1]), got[:1])


EXACT_CASES = [case for case, (_, kwargs) in CASES.items() if not kwargs.get("trained_members")]


@pytest.mark.parametrize("case", EXACT_CASES)
def test_native_nctl_matches_the_literal_network(case):
    n_features, kwargs = settings(case)
    learner = nctl.NCTL(**with_pool(kwargs))
    cfg = learner.engine_config(n_features)
    native = NativeRun(engine.init(cfg, learner.seed, learner.depth or 0), cfg)
    X, y = recurring_stream(STEPS, n_features, kwargs.get("n_classes", 2))
    want, events_half, events_end, _ = reference_run(case, learner.hyperplanes(n_features))
    half = STEPS // 2
    first = native.learn(X[:half], y[:half])
    assert_same_events(native.pool_events(), events_half, f"after {half} steps")
    got = np.concatenate([first, native.learn(X[half:], y[half:])])
    got = got[:, 0] if learner.n_classes == 2 else got / got.sum(axis=1, keepdims=True)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-7)
    assert_same_events(native.pool_events(), events_end, f"after {STEPS} steps")


@pytest.mark.parametrize("regressor", [False, True])
def test_the_river_path_learns_what_learn_many_learns(regressor, monkeypatch):
    """``predict_proba_one`` (a regressor's ``predict_one``) then ``learn_one`` of the same row (the river path)
    on the native engine: learning takes the prediction's kept forward pass (nctl.cc), and the state and
    outputs are those of ``learn_many`` bit for bit."""
    monkeypatch.setenv("NCTL_ENGINE", "native")
    if regressor:
        X, y = regression_stream(300, 8)
        one, many = nctl.NCTLRegressor(), nctl.NCTLRegressor()
    else:
        X, y = drifting_stream(300, 8, 3)
        one, many = nctl.NCTL.tabular(n_classes=3), nctl.NCTL.tabular(n_classes=3)
    want = many.learn_many(X, y)
    got = []
    for x, label in zip(X, y):
        got.append(one.predict_one(x) if regressor else one.predict_proba_one(x))
        one.learn_one(x, label)
    assert one.engine_ == many.engine_ == "native"
    np.testing.assert_array_equal(np.array(got[1:]), want[1:])
    assert all(np.array_equal(a, b) for a, b in zip(jax.tree.leaves(one.state_), jax.tree.leaves(many.state_)))


@pytest.mark.parametrize("saved_by, loaded_by, make", [("native", "jax", nctl.NCTL.tabular),
                                                       ("jax", "native", nctl.NCTL.tabular),
                                                       ("native", "jax", nctl.NCTLRegressor)])
def test_a_save_of_one_engine_continues_in_the_other(saved_by, loaded_by, make, monkeypatch, tmp_path):
    """One state layout and one save format: a learner saved by one engine loads in the other and goes on
    learning as the saving engine would (predictions within PREDICTION_BOUND, the same pool events); for the
    regressor, its means in the targets' units (a spread of about 1 here)."""
    X, y = drifting_stream(400, 8, 2)
    monkeypatch.setenv("NCTL_ENGINE", saved_by)
    learner = make()
    learner.learn_many(X[:200], y[:200])
    learner.save(tmp_path / "model.npz")
    monkeypatch.setenv("NCTL_ENGINE", loaded_by)
    loaded = nctl.learners.load(tmp_path / "model.npz")
    assert (learner.engine_, loaded.engine_) == (saved_by, loaded_by)
    np.testing.assert_allclose(loaded.learn_many(X[200:], y[200:]), learner.learn_many(X[200:], y[200:]), rtol=0,
                               atol=PREDICTION_BOUND)
    assert all(np.array_equal(a, b) for a, b in zip(loaded.pool_events()[0], learner.pool_events()[0]))


@pytest.mark.parametrize("make", [nctl.NCTL, nctl.NCTLRegressor])
def test_bounded_mode_runs_on_jax(make, monkeypatch):
    """The one place that decides (``EngineLearner.native_engine_for``): exact NCTL, classifier or regressor,
    runs on the native engine where it is chosen, bounded mode (§5.3) on JAX."""
    monkeypatch.setenv("NCTL_ENGINE", "native")
    X, y = drifting_stream(10, 3, 2)
    exact, bounded = make(**TINY), make(**TINY, pool=nctl.Pool(size=2, trained_members=1))
    exact.learn_many(X, y), bounded.learn_many(X, y)
    assert (exact.engine_, bounded.engine_) == ("native", "jax")
