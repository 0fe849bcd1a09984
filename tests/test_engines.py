"""The two engines (``nctl.engines``) on the learners the native engine runs (the GLN and the Gaussian GLN):
each against the literal float64 networks of tests/reference, the two against each other, a save of one
continued by the other, and the choice of engine.

The engines round differently in float32: the native engine sums every dot product in one fixed order
with the C library's exp and log, XLA in its own order with its own exp and log (docs/algorithm.md,
"Two engines"); a prediction differs by a few float32 ulps, and that difference compounds over the steps a
weight row learns, so the two engines are compared within 1e-5 over a few hundred rows."""

import os
import subprocess
import sys

import numpy as np
import pytest

import nctl
from nctl import engines
from nctl.core.gaussian import GaussianRows
from nctl.native.gaussian_gln import GaussianGLNCalls
from tests.core.test_gaussian_rows import stream
from tests.core.test_nctl_literal import recurring_stream
from tests.reference.gaussian_gln import GaussianGLN, Settings
from tests.reference.nctl_literal import LiteralNCTL

ENGINES = ["native", "jax"]
CASES = {  # id -> (n_features, GLN settings)
    "binary-2-layers": (3, dict(layer_sizes=(3, 2, 1), context_bits=2, learning_rate=0.1)),
    "3-classes-uniform": (2, dict(layer_sizes=(2, 1), context_bits=3, learning_rate=0.1, n_classes=3,
                                  weight_init="uniform")),
    "binary-1-layer-wide-eps": (4, dict(layer_sizes=(1,), context_bits=1, learning_rate=0.3, prob_eps=0.1,
                                        max_weight=2.0)),
}


def hyperplanes(learner):
    """``(normals, offsets)`` per class network and layer, as the learner drew them."""
    layers = learner.state_
    return tuple(tuple((np.asarray(layer.gates.normals[g]), np.asarray(layer.gates.offsets[g])) for layer in layers)
                 for g in range(layers[0].weights.shape[0]))


@pytest.fixture(params=ENGINES)
def engine(request, monkeypatch):
    monkeypatch.setenv(engines.ENGINE_ENV, request.param)
    return request.param


@pytest.mark.parametrize("case", CASES)
def test_each_engine_is_the_literal_gln(case, engine):
    """A GLN is NCTL with no pool and all prior mass on the root (§5.1): the literal network so configured
    bounds each engine's predictions within 1e-6."""
    n_features, settings = CASES[case]
    X, y = recurring_stream(100, n_features, settings.get("n_classes", 2))
    learner = nctl.GLN(**settings)
    learned = learner.learn_many(X[:100], y[:100])
    assert learner.engine_ == engine
    literal = LiteralNCTL(hyperplanes(learner), n_features=n_features, pool_size=0, split_prob=0.0, depth=7,
                          min_segment=1, **{k: v for k, v in settings.items()})
    np.testing.assert_allclose(learned, literal.run(X[:100], y[:100]), rtol=0, atol=1e-6)


@pytest.mark.parametrize("n_features, settings", [
    (8, dict(nctl.GLN.tabular().params())),
    (784, dict(layer_sizes=(10, 5, 1), context_bits=4, learning_rate=0.01, n_classes=10)),
    # a neuron's hyperplanes summed four together, then the last two one by one (arithmetic.h's Context)
    (8, dict(layer_sizes=(6, 3, 1), context_bits=6, learning_rate=0.1, n_classes=2)),
], ids=["tabular", "mnist-width-10-classes", "six-hyperplanes"])
def test_the_engines_agree(n_features, settings, monkeypatch):
    rng = np.random.default_rng(n_features)
    X = rng.standard_normal((400, n_features)).astype(np.float32)
    y = np.digitize(X[:, 0] + X[:, 1], np.linspace(-1, 1, settings["n_classes"] - 1))
    out = {}
    for name in ENGINES:
        monkeypatch.setenv(engines.ENGINE_ENV, name)
        learner = nctl.GLN(**settings)
        out[name] = learner.learn_many(X[:300], y[:300]), learner.predict_proba_many(X[300:])
        assert learner.engine_ == name
    np.testing.assert_allclose(out["native"][0], out["jax"][0], rtol=0, atol=1e-5)
    np.testing.assert_allclose(out["native"][1], out["jax"][1], rtol=0, atol=1e-5)


@pytest.mark.parametrize("saved_by, loaded_by", [("native", "jax"), ("jax", "native")])
def test_a_save_of_one_engine_continues_in_the_other(saved_by, loaded_by, monkeypatch, tmp_path):
    """One state layout, one save format: the other engine loads the file, predicts what the saving engine
    predicts (to its rounding) and goes on learning."""
    X, y = recurring_stream(200, 3, 3)
    settings = CASES["3-classes-uniform"][1]
    monkeypatch.setenv(engines.ENGINE_ENV, saved_by)
    learner = nctl.GLN(**settings)
    learner.learn_many(X[:150], y[:150])
    learner.save(tmp_path / "m.npz")
    monkeypatch.setenv(engines.ENGINE_ENV, loaded_by)
    loaded = nctl.load(tmp_path / "m.npz")
    assert loaded.engine_ == loaded_by and loaded.t_ == 150
    for name, leaf in zip(("normals", "offsets", "weights"), (loaded.state_[0].gates.normals,
                                                                loaded.state_[0].gates.offsets,
                                                                loaded.state_[0].weights)):
        np.testing.assert_array_equal(np.asarray(leaf), np.asarray(getattr(
            learner.state_[0].gates, name) if name != "weights" else learner.state_[0].weights))
    np.testing.assert_allclose(loaded.predict_proba_many(X[150:]), learner.predict_proba_many(X[150:]), rtol=0,
                               atol=1e-6)
    np.testing.assert_allclose(loaded.learn_many(X[150:], y[150:]), learner.learn_many(X[150:], y[150:]), rtol=0,
                               atol=1e-5)


def test_a_copy_keeps_its_engine_and_its_own_arrays(engine):
    X, y = recurring_stream(60, 3, 2)
    learner = nctl.GLN(layer_sizes=(2, 1))
    learner.learn_many(X[:30], y[:30])
    twin = learner.copy()
    assert twin.engine_ == learner.engine_ == engine
    before = learner.predict_proba_many(X)
    twin.learn_many(X[30:], y[30:])
    np.testing.assert_array_equal(learner.predict_proba_many(X), before)


def test_a_state_adopted_from_another_learner_is_copied_unless_handed_over(engine):
    """``adopt`` copies what the caller may still hold; ``handed_over`` (a fresh or loaded state) takes the
    arrays as they are: the native engine then learns in the very arrays it was given."""
    X, y = recurring_stream(60, 3, 2)
    learner = nctl.GLN(layer_sizes=(2, 1))
    learner.learn_many(X[:30], y[:30])
    before = learner.predict_proba_many(X)
    for handed_over in (False, True) if engine == "native" else (False,):
        other = nctl.GLN(layer_sizes=(2, 1))
        other.choose_engine(3)
        other.adopt(learner.state_, handed_over=handed_over)
        other.learn_many(X[30:], y[30:])
        assert np.array_equal(learner.predict_proba_many(X), before) != handed_over


@pytest.mark.parametrize("make", [nctl.GLN.tabular, nctl.NCTL.tabular], ids=["GLN", "NCTL"])
def test_a_kept_forward_pass_is_never_stale(make, monkeypatch):
    """A one-row prediction keeps its forward pass for learning that row next (gln.cc, nctl.cc). Learning
    rows after predictions of other rows, of several rows at once, of the same row before a change of the
    state, and in a learner whose copy learned in between, learns what ``learn_many`` learns, bit for bit:
    no kept pass is ever taken for a row or a state it was not computed on."""
    import jax

    monkeypatch.setenv(engines.ENGINE_ENV, "native")
    X, y = recurring_stream(240, 8, 3)
    one, twin = make(n_classes=3), None
    learned = []  # the rows ``one`` learns, in order
    for i, (x, label) in enumerate(zip(X, y)):
        case = i % 6
        if case == 0:  # the same row: the kept pass is taken
            one.predict_proba_one(x)
        elif case == 1:  # another row predicted
            one.predict_proba_one(X[(i + 1) % len(X)])
        elif case == 2:  # the row predicted, then several rows at once
            one.predict_proba_one(x)
            one.predict_proba_many(X[i:i + 3])
        elif case == 3:  # the row predicted, then the state changed by another row, then the row
            one.predict_proba_one(x)
            one.learn_one(X[i - 1], (y[i - 1] + 1) % 3)
            learned.append((X[i - 1], (y[i - 1] + 1) % 3))
        elif case == 4:  # the row predicted, then a copy that learns another row
            one.predict_proba_one(x)
            twin = one.copy()
            twin.learn_one(X[i - 1], y[i - 1])
        else:  # the row predicted twice, learned with the other label than the stream's
            one.predict_proba_one(x)
            one.predict_proba_one(x)
            label = (label + 1) % 3
        one.learn_one(x, label)
        learned.append((x, label))
    assert one.engine_ == twin.engine_ == "native"
    many = make(n_classes=3)
    many.learn_many(np.array([x for x, _ in learned]), np.array([label for _, label in learned]))
    np.testing.assert_array_equal(one.predict_proba_many(X), many.predict_proba_many(X))
    assert all(np.array_equal(a, b) for a, b in zip(jax.tree.leaves(one.state_), jax.tree.leaves(many.state_)))


def test_an_engine_is_named_or_refused(monkeypatch):
    monkeypatch.setenv(engines.ENGINE_ENV, "gpu")
    with pytest.raises(ValueError, match=r"\$NCTL_ENGINE must be 'native', 'jax' or 'auto', got 'gpu'"):
        engines.choose()
    monkeypatch.setenv(engines.ENGINE_ENV, "JAX")  # any case
    assert engines.choose() == "jax"
    monkeypatch.delenv(engines.ENGINE_ENV)
    with pytest.raises(ValueError, match=r"use\(engine\) must be"):
        engines.use("xla")


CHOICE = """
import warnings, numpy as np, nctl
warnings.simplefilter("always")
model = nctl.GLN(layer_sizes=(2, 1))
model.learn_many(np.ones((3, 2), np.float32), np.array([0, 1, 1]))
print(model.engine_)
"""


@pytest.mark.parametrize("wanted, runs_on", [("auto", "jax"), ("native", None)])
def test_without_a_compiler_auto_runs_on_jax_and_native_is_refused(wanted, runs_on, tmp_path):
    """A compiler that is not there (and no library built for it): ``auto`` warns once and runs JAX;
    asking for the native engine names why it cannot load."""
    env = {**os.environ, "CXX": str(tmp_path / "no-such-compiler"), "NCTL_NATIVE_CACHE": str(tmp_path / "cache"),
           engines.ENGINE_ENV: wanted, "NCTL_QUIET": "1"}
    run = subprocess.run([sys.executable, "-c", CHOICE], capture_output=True, text=True, env=env, timeout=300)
    if runs_on:
        assert run.returncode == 0, run.stderr
        assert run.stdout.split() == [runs_on]
        assert run.stderr.count("the native engine could not be built or loaded") == 1
    else:
        assert run.returncode != 0
        assert "RuntimeError: the native engine cannot load" in run.stderr and "no-such-compiler" in run.stderr


def test_a_pickled_learner_continues_on_its_engine(engine):
    import pickle

    X, y = recurring_stream(80, 3, 2)
    learner = nctl.GLN(layer_sizes=(2, 1))
    learner.learn_many(X[:40], y[:40])
    twin = pickle.loads(pickle.dumps(learner))
    assert twin.engine_ == engine
    np.testing.assert_array_equal(twin.learn_many(X[40:], y[40:]), learner.learn_many(X[40:], y[40:]))


@pytest.mark.parametrize("settings", [dict(learning_rate=0.05, min_variance=0.5, max_variance=4.0, max_weight=1.0,
                                           max_mean=2.0), {}], ids=["tight", "defaults"])
def test_the_native_gaussian_gln_is_the_literal_gaussian_gln(settings, monkeypatch):
    """The native engine's Gaussian GLN (§8) against the literal float64 reference, as the JAX engine's is
    checked (tests/core/test_gaussian_rows.py, the same stream and tolerances): predictions and weights."""
    monkeypatch.setenv(engines.ENGINE_ENV, "native")
    rows, layer_sizes, d = GaussianRows(**settings), (3, 2, 1), 3
    learner = nctl.GLNRegressor(layer_sizes=layer_sizes, context_bits=2, **settings)
    learner.allocate(d)  # a fresh state, as the native engine holds it
    layers = learner.state_.layers
    calls = GaussianGLNCalls(layers, rows)
    Z, y = stream(200, d, seed=1)
    reference = GaussianGLN([(layer.gates.normals[0], layer.gates.offsets[0]) for layer in layers], d, Settings(*rows))
    np.testing.assert_allclose(calls.learn(Z, y)[:, 0], reference.run(Z, y), rtol=1e-4, atol=1e-5)
    for layer, ref_weights in zip(layers, reference.weights):
        np.testing.assert_allclose(layer.weights[0], np.array(ref_weights), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("saved_by, loaded_by", [("native", "jax"), ("jax", "native")])
def test_the_engines_agree_on_the_gaussian_gln_and_continue_each_others_saves(saved_by, loaded_by, monkeypatch,
                                                                             tmp_path):
    rng = np.random.default_rng(4)
    X = rng.standard_normal((400, 5)).astype(np.float32)
    y = 3.0 * X[:, 0] + X[:, 1] ** 2 + 0.1 * rng.standard_normal(400) + 20.0
    out = {}
    for name in ENGINES:
        monkeypatch.setenv(engines.ENGINE_ENV, name)
        learner = nctl.GLNRegressor()
        out[name] = learner.learn_many(X[:300], y[:300]), learner.predict_distribution_many(X[300:])
        assert learner.engine_ == name
        if name == saved_by:
            learner.save(tmp_path / "m.npz")
    np.testing.assert_allclose(out["native"][0], out["jax"][0], rtol=0, atol=1e-4)  # targets around 20
    np.testing.assert_allclose(out["native"][1], out["jax"][1], rtol=1e-5, atol=0)
    monkeypatch.setenv(engines.ENGINE_ENV, loaded_by)
    loaded = nctl.load(tmp_path / "m.npz")
    assert loaded.engine_ == loaded_by and loaded.t_ == 300
    np.testing.assert_allclose(loaded.predict_distribution_many(X[300:]), out[saved_by][1], rtol=1e-5, atol=0)
    assert np.isfinite(loaded.learn_many(X[300:], y[300:])).all() and loaded.t_ == 400
