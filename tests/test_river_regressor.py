"""The river regressors (nctl.river.GLNRegressor, NCTLRegressor): river's estimator checks, prequential MAE against the
running mean, parity with nctl.GLNRegressor, the predictive distribution, refused input and copies."""

import copy
import doctest
import hashlib
import inspect
import math
import re
from pathlib import Path

import jax
import numpy as np
import pytest
from river import base, datasets, dummy, evaluate, metrics, preprocessing, stats
from river.checks import yield_checks

import nctl
from nctl.river import GLNRegressor, NCTLRegressor, Normal

# One small network for every test (each new number of features compiles it again, about a second)
SMALL = dict(layer_sizes=(4, 1), context_bits=2)
DOCS = Path(__file__).resolve().parents[1] / "docs" / "api-regressor.md"
UNSCALED = "ignore:nctl.*not standardised:UserWarning"  # river's checks learn TrumpApproval unscaled


def regression_rows(n, seed=0, d=6):
    """Features [n, d] float32 and raw targets ``5 (sum of sin of three features + half a fourth) + 3`` plus
    noise (the stream of tests/test_regressor.py)."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)).astype(np.float32)
    y = 5.0 * (np.sin(X[:, :3]).sum(1) + 0.5 * X[:, 3]) + 3.0 + 0.2 * rng.standard_normal(n)
    return X, y


def as_dict(x) -> dict:
    """A row as river's dict, its keys in reverse order (the regressor sorts them: x0, x1, ...)."""
    return {f"x{i}": float(x[i]) for i in reversed(range(len(x)))}


def digest(model) -> str:
    leaves = jax.tree.leaves(model.learner.state_)
    return hashlib.sha256(b"".join(np.asarray(a).tobytes() for a in leaves)).hexdigest()


@pytest.mark.filterwarnings(UNSCALED)
@pytest.mark.parametrize("check", list(yield_checks(GLNRegressor(**SMALL))), ids=lambda check: check.__name__)
def test_river_estimator_checks(check):
    check(GLNRegressor(**SMALL))  # as river.checks.check_estimator runs them, one at a time


def test_progressive_mae_on_trump_approval_is_far_below_the_running_mean():
    model = preprocessing.StandardScaler() | GLNRegressor(**SMALL)
    mae = evaluate.progressive_val_score(datasets.TrumpApproval(), model, metrics.MAE()).get()
    mean = evaluate.progressive_val_score(datasets.TrumpApproval(), dummy.StatisticRegressor(stats.Mean()),
                                          metrics.MAE()).get()
    assert mae < 0.5 * mean  # measured 0.52 against 1.57


def test_predictions_equal_the_learners_bit_for_bit_and_beat_the_mean_on_a_nonlinear_stream():
    X, y = regression_rows(1500)
    model, learner = GLNRegressor(**SMALL), nctl.GLNRegressor(**SMALL)
    predictions = []
    for x, target in zip(X, y):
        features = as_dict(x)
        predictions.append(model.predict_one(features))
        if learner.t_:
            assert predictions[-1] == learner.predict_one(x)
        model.learn_one(features, target)
        learner.learn_one(x, target)
    assert predictions[0] == 0.0 and model.features == [f"x{i}" for i in range(6)]
    late = slice(1000, 1500)
    mae = np.abs(np.array(predictions[late]) - y[late]).mean()
    assert mae < 0.6 * np.abs(y[late] - y[:1000].mean()).mean()  # measured 0.38 of it
    means, variances = learner.predict_distribution_many(X[:5])
    for x, mean, variance in zip(X[:5], means, variances):
        dist = model.predict_one(as_dict(x), with_dist=True)
        assert isinstance(dist, Normal) and dist.mu == mean and dist.sigma == math.sqrt(variance)
    assert digest(model) == hashlib.sha256(
        b"".join(np.asarray(a).tobytes() for a in jax.tree.leaves(learner.state_))).hexdigest()


def test_the_predictive_distribution():
    model = GLNRegressor(**SMALL)
    assert isinstance(model, base.Regressor)
    before = model.predict_one({"a": 1.0}, with_dist=True)  # nothing learned: a standard normal
    assert (before.mu, before.sigma) == (0.0, 1.0) and model.predict_one({"a": 1.0}) == 0.0
    X, y = regression_rows(200, seed=1)
    for x, target in zip(X, y):
        model.learn_one(as_dict(x), target)
    dist = model.predict_one(as_dict(X[0]), with_dist=True)
    assert dist.mu == dist.mode == model.predict_one(as_dict(X[0])) and dist.sigma > 0
    assert dist.cdf(dist.mu) == pytest.approx(0.5)
    assert dist.cdf(dist.mu + dist.sigma) == pytest.approx(0.841345, abs=1e-6)
    assert dist(dist.mu) == pytest.approx(1 / (dist.sigma * math.sqrt(2 * math.pi)))
    draws = [Normal(2.0, 3.0, seed=4).sample() for _ in range(2)]
    assert draws[0] == draws[1] and repr(Normal(2.0, 3.0)) == "𝒩(μ=2.000, σ=3.000)"
    with pytest.raises(NotImplementedError, match="learns nothing"):
        dist.update(1.0)


def test_constructor_mirrors_the_learner():
    defaults = {name: p.default for name, p in inspect.signature(GLNRegressor).parameters.items()}
    assert defaults == nctl.GLNRegressor().params()
    assert GLNRegressor()._get_params() == defaults
    model = GLNRegressor(**SMALL, seed=3)
    assert isinstance(model.learner, nctl.GLNRegressor) and model.learner.params() == {**defaults, **SMALL, "seed": 3}
    with pytest.raises(ValueError, match="min_variance"):
        GLNRegressor(min_variance=2.0, max_variance=1.0)


def test_missing_features_are_zero_and_new_ones_ignored():
    model = GLNRegressor(**SMALL)
    X, y = regression_rows(30, seed=2)
    for x, target in zip(X, y):
        model.learn_one(as_dict(x), target)
    model.learn_one({"x0": 0.5}, 1.0)  # missing features are fine when learning too
    full = model.predict_one({"x0": 1.0, "x1": 0.0, "x2": 0.0, "x3": 0.0, "x4": 0.0, "x5": 0.0})
    assert model.predict_one({"x0": 1.0}) == full
    assert model.predict_one({"x0": 1.0, "new": 7.0, "other": "text"}) == full
    assert model.predict_one({"x0": 1, "x1": False, "x2": np.float32(0.0)}) == full  # any number type


@pytest.mark.parametrize("x, y, error, message", [
    (lambda row: row, float("nan"), ValueError, "target y is nan; targets must be finite"),
    (lambda row: row, math.inf, ValueError, "target y is inf"),
    (lambda row: row, "3.5", ValueError, "target y must be a real number, got '3.5'"),
    (lambda row: row, True, ValueError, "target y must be a real number, got True"),
    (lambda row: {**row, "x2": "1.0"}, 1.0, ValueError, "feature 'x2' must be a number, got '1.0'"),
    (lambda row: {**row, "x4": float("nan")}, 1.0, ValueError, "feature 'x4' is nan"),
    (lambda row: {**row, "x1": -1e39}, 1.0, ValueError, "feature 'x1' is -1e[+]?39, beyond float32's range"),
    (lambda row: list(row.values()), 1.0, TypeError, "x must be a dict of feature name -> number"),
])
def test_bad_input_is_refused_naming_the_problem_and_the_model_is_unchanged(x, y, error, message):
    X, targets = regression_rows(11, seed=3)
    fresh = GLNRegressor(**SMALL)
    with pytest.raises(error, match=message):  # a refused first example fixes no features
        fresh.learn_one(x(as_dict(X[0])), y)
    assert fresh.features is None and fresh.learner.t_ == 0
    with pytest.raises(ValueError, match="x has no features"):  # later, every feature may be missing
        fresh.learn_one({}, 1.0)
    model = GLNRegressor(**SMALL)
    for row, target in zip(X[:10], targets[:10]):
        model.learn_one(as_dict(row), target)
    before, prediction = digest(model), model.predict_one(as_dict(X[10]))
    with pytest.raises(error, match=message):
        model.learn_one(x(as_dict(X[10])), y)
    assert digest(model) == before and model.learner.t_ == 10
    assert model.predict_one(as_dict(X[10])) == prediction
    model.learn_one(as_dict(X[10]), targets[10])  # and it goes on learning
    assert model.learner.t_ == 11


def test_copies_and_clones_learn_apart():
    X, y = regression_rows(60, seed=4)
    model = GLNRegressor(**SMALL)
    for x, target in zip(X[:40], y[:40]):
        model.learn_one(as_dict(x), target)
    probe, kept = as_dict(X[50]), model.predict_one(as_dict(X[50]))
    shallow, deep = copy.copy(model), copy.deepcopy(model)
    assert shallow.learner is not model.learner and shallow.predict_one(probe) == kept
    for x, target in zip(X[40:], y[40:]):
        shallow.learn_one(as_dict(x), target)
        deep.learn_one(as_dict(x), target)
    assert model.predict_one(probe) == kept and model.learner.t_ == 40
    assert shallow.predict_one(probe) == deep.predict_one(probe) != kept
    clone = model.clone()
    assert clone._get_params() == model._get_params() and clone.learner.t_ == 0 and clone.predict_one(probe) == 0.0


def doc_section(heading: str) -> doctest.DocTest:
    """The ``pycon`` examples of a section of docs/api-regressor.md, as one doctest."""
    section = re.search(rf"^## {heading}\n(.*?)(?=^## |\Z)", DOCS.read_text(), re.M | re.S).group(1)
    blocks = re.findall(r"```pycon\n(.*?)```", section, re.S)
    return doctest.DocTestParser().get_doctest("\n".join(blocks), {}, heading, str(DOCS), 0)


def test_the_docs_river_example_runs():
    test = doc_section("With river")
    runner = doctest.DocTestRunner()
    runner.run(test)
    assert test.examples and runner.failures == 0


# NCTLRegressor: the adapter is the same class with another learner; its checks, and that it predicts as its
# learner does, row by row, on a stream whose concept flips (its pool then holds states)
NCTL_SMALL = dict(layer_sizes=(4, 1), context_bits=2, pool=nctl.Pool(size=3, min_segment=16, eviction="spacing"),
                  depth=10)


@pytest.mark.filterwarnings(UNSCALED)
@pytest.mark.parametrize("check", list(yield_checks(NCTLRegressor(**NCTL_SMALL))), ids=lambda check: check.__name__)
def test_river_estimator_checks_nctl(check):
    check(NCTLRegressor(**NCTL_SMALL))


def test_nctl_regressor_mirrors_its_learner_and_predicts_as_it_does():
    defaults = {name: p.default for name, p in inspect.signature(NCTLRegressor).parameters.items()}
    assert defaults == {**nctl.NCTLRegressor().params(), "pool": None} and NCTLRegressor()._get_params() == defaults
    assert NCTLRegressor().learner.params() == nctl.NCTLRegressor().params()  # None: the learner's own pool
    X, y = regression_rows(300, seed=8)
    y = np.where((np.arange(300) // 50) % 2 == 1, -y, y)
    model, learner = NCTLRegressor(**NCTL_SMALL), nctl.NCTLRegressor(**NCTL_SMALL)
    for x, target in zip(X, y):
        features = as_dict(x)
        prediction = model.predict_one(features)
        if learner.t_:
            assert prediction == learner.predict_one(x)
        model.learn_one(features, target)
        learner.learn_one(x, target)
    assert isinstance(model.learner, nctl.NCTLRegressor) and digest(model) == hashlib.sha256(
        b"".join(np.asarray(a).tobytes() for a in jax.tree.leaves(learner.state_))).hexdigest()
    assert sum(layer[:, 2].sum() for layer in learner.pool_events()[0]) > 0  # states were added to the pools
