"""nctl.GLNRegressor: what it learns, that learn_one and learn_many agree bit for bit, that save and load
continue exactly, and that bad input is refused with the learner unchanged."""

import hashlib

import jax
import numpy as np
import pytest

import nctl
from nctl.core.gaussian import GaussianRows

SMALL = dict(layer_sizes=(16, 1), context_bits=4)  # one compiled program for every test of this file


def regression_stream(n, seed=0, d=6):
    """``y = 5 (sum of sin of three features + half a fourth) + 3`` plus noise: raw, unstandardised targets."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)).astype(np.float32)
    y = 5.0 * (np.sin(X[:, :3]).sum(1) + 0.5 * X[:, 3]) + 3.0 + 0.2 * rng.standard_normal(n)
    return X, y


def digest(model) -> str:
    return hashlib.sha256(b"".join(np.asarray(a).tobytes() for a in jax.tree.leaves(model.state_))).hexdigest()


def test_learns_a_nonlinear_stream_far_better_than_its_mean():
    X, y = regression_stream(3000)
    model = nctl.GLNRegressor(**SMALL)
    p = model.learn_many(X, y)
    late = slice(2000, 3000)
    mae = np.abs(p[late] - y[late]).mean()
    assert mae < 0.5 * np.abs(y[late] - y[:2000].mean()).mean()
    means, variances = model.predict_distribution_many(X[late])
    np.testing.assert_array_equal(means, model.predict_many(X[late]))
    assert (variances > 0).all()
    scale = y.std()  # the running statistics over every target learned
    assert (variances >= model.min_variance * scale**2 * (1 - 1e-5)).all()
    assert (variances <= model.max_variance * scale**2 * (1 + 1e-5)).all()
    assert np.mean(np.abs(means - y[late]) < 2 * np.sqrt(variances)) > 0.8  # the spread it gives is a real one


def test_learn_one_and_learn_many_give_identical_predictions_and_states():
    X, y = regression_stream(300, seed=1)
    one, many = nctl.GLNRegressor(**SMALL), nctl.GLNRegressor(**SMALL)
    p_one = []
    for x, target in zip(X, y):
        p_one.append(one.predict_one(x))
        one.learn_one(x, target)
    p_many = many.learn_many(X, y)
    np.testing.assert_array_equal(np.array(p_one), p_many)
    assert digest(one) == digest(many) and one.t_ == many.t_ == 300
    np.testing.assert_array_equal(one.predict_many(X[:50]), many.predict_many(X[:50]))


def test_save_and_load_continue_exactly(tmp_path):
    X, y = regression_stream(400, seed=2)
    model = nctl.GLNRegressor(**SMALL, seed=5)
    model.learn_many(X[:250], y[:250])
    model.save(tmp_path / "model.npz")
    loaded = nctl.load(tmp_path / "model.npz")
    assert isinstance(loaded, nctl.GLNRegressor) and loaded.params() == model.params() and loaded.t_ == 250
    np.testing.assert_array_equal(loaded.predict_many(X[250:]), model.predict_many(X[250:]))
    np.testing.assert_array_equal(loaded.learn_many(X[250:], y[250:]), model.learn_many(X[250:], y[250:]))
    assert digest(loaded) == digest(model)
    means, variances = loaded.predict_distribution_many(X[:20])
    want = model.predict_distribution_many(X[:20])
    np.testing.assert_array_equal(means, want[0])
    np.testing.assert_array_equal(variances, want[1])


@pytest.mark.parametrize("call, args, message", [
    ("learn_many", lambda X, y: (X, np.where(np.arange(len(y)) == 3, np.nan, y)), "NaN or infinity"),
    ("learn_many", lambda X, y: (X, np.where(np.arange(len(y)) == 3, np.inf, y)), "NaN or infinity"),
    ("learn_many", lambda X, y: (np.where(np.arange(len(y))[:, None] == 3, np.inf, X), y), "X contains NaN"),
    ("learn_many", lambda X, y: (X, y[:-1]), "one target per row"),
    ("learn_many", lambda X, y: (X[:, :-1], y), "must have 6 features"),
    ("learn_many", lambda X, y: (X[0], y), "2-D"),
    ("learn_many", lambda X, y: (X, y.astype(str)), "real numbers"),
    ("learn_many", lambda X, y: (X, np.where(np.arange(len(y)) == 3, 2e154, y)), r"within \+-1e\+100"),
    ("learn_one", lambda X, y: (X[0], np.nan), "NaN or infinity"),
    ("learn_one", lambda X, y: (X[0], y[:2]), "a single target"),
    ("learn_one", lambda X, y: (X[:2], y[0]), "1-D"),
    ("learn_one", lambda X, y: (np.full(6, np.nan, np.float32), y[0]), "NaN or infinity"),
])
def test_bad_input_is_refused_naming_the_problem_and_the_learner_is_unchanged(call, args, message):
    X, y = regression_stream(20, seed=3)
    model = nctl.GLNRegressor(**SMALL)
    model.learn_many(X[:10], y[:10])
    before, t = digest(model), model.t_
    with pytest.raises(ValueError, match=message):
        getattr(model, call)(*args(X[10:], y[10:]))
    assert digest(model) == before and model.t_ == t
    model.learn_one(X[10], y[10])  # and it goes on learning
    assert model.t_ == t + 1


def test_settings_are_checked_and_probabilities_are_not_offered():
    assert nctl.GLNRegressor().rows == GaussianRows()  # the learner's defaults are the row model's
    with pytest.raises(ValueError, match="min_variance"):
        nctl.GLNRegressor(min_variance=2.0, max_variance=1.0)
    with pytest.raises(ValueError, match="learning_rate"):
        nctl.GLNRegressor(learning_rate=-1)
    assert not hasattr(nctl.GLNRegressor(), "predict_proba_one")
    assert not hasattr(nctl.GLNRegressor(), "predict_proba_many")
