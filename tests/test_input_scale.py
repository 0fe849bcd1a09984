"""A learner warns once when its features are plainly not standardised (``nctl.learners.inputs.unscaled``),
never when they are, not under ``NCTL_QUIET=1``, and learns the same either way."""

import warnings

import numpy as np
import pytest
from river import preprocessing
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

import nctl
from nctl import compilation
from nctl.learners import base
from nctl.learners.inputs import SCALE_ROWS, unscaled

SMALL_GLN = dict(layer_sizes=(4, 1), context_bits=2, learning_rate=0.1)
SMALL_NCTL = dict(SMALL_GLN, pool=nctl.Pool(size=2, min_segment=8), depth=9)  # one compiled NCTL for the tests below


@pytest.fixture(autouse=True)
def loud(monkeypatch):
    monkeypatch.delenv(compilation.QUIET_ENV, raising=False)


def raw_stream(seed: int, n: int = 300) -> tuple[np.ndarray, np.ndarray]:
    """Features with mean 5 and scale 3 (not standardised) and labels of a half-space through their mean."""
    X = np.random.default_rng(seed).normal(5.0, 3.0, size=(n, 4)).astype(np.float32)
    return X, (X[:, 0] - X[:, 1] > 0).astype(np.int32)


def standardised(X: np.ndarray) -> np.ndarray:
    return ((X - X.mean(axis=0)) / X.std(axis=0)).astype(np.float32)


def scale_warnings(run) -> list[str]:
    """The messages of the UserWarnings ``run()`` gives, every one of them (none hidden as a repeat)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run()
    return [str(w.message) for w in caught if issubclass(w.category, UserWarning)]


def test_raw_features_warn_once_naming_the_feature_and_the_fix():
    X, y = raw_stream(0)
    X[:, [0, 1, 3]] = standardised(X[:, [0, 1, 3]])  # only feature 2 is raw
    model = nctl.GLN(**SMALL_GLN)

    def learn():
        model.learn_many(X[:40], y[:40])  # fewer rows than SCALE_ROWS: nothing judged yet
        for x, label in zip(X[40:150], y[40:150]):
            model.learn_one(x, label)
        model.learn_many(X[150:], y[150:])
        model.copy().learn_many(X, y)  # a copy of a learner that warned does not warn again

    messages = scale_warnings(learn)
    assert len(messages) == 1
    assert messages[0].startswith("nctl: 1 of 4 features given to GLN are not standardised")
    assert f"first {SCALE_ROWS} rows learned, feature 2 (counting from 0)" in messages[0]
    assert "StandardScaler() | GLNClassifier()" in messages[0] and "NCTL_QUIET=1" in messages[0]  # its adapter


@pytest.mark.parametrize("seed", range(5))
def test_standardised_features_never_warn(seed):
    rng = np.random.default_rng(seed)
    n = 2000
    columns = [
        rng.normal(5.0, 3.0, n),
        np.linspace(0.0, 1e4, n) + rng.normal(0, 10, n),  # a trend: the first rows lie far below the mean
        rng.lognormal(0.0, 2.0, n),  # heavy tails
        rng.random(n) < 0.02,  # a rare 0/1 feature
    ]
    X = standardised(np.column_stack(columns))
    assert unscaled(X[:SCALE_ROWS], "GLN") is None
    raw = np.column_stack([rng.random(n) < 0.5, np.ones(n), np.zeros(n), rng.random(n)])  # 0/1, constant, [0, 1)
    assert unscaled(raw[:SCALE_ROWS], "GLN") is None
    assert scale_warnings(lambda: nctl.GLN(**SMALL_GLN).learn_many(X, X[:, 0] > 0)) == []


def test_a_river_pipeline_with_a_scaler_does_not_warn_and_one_without_does():
    from nctl.river import NCTLClassifier

    X, y = raw_stream(1, n=SCALE_ROWS + 20)
    rows = [({f"x{i}": float(v) for i, v in enumerate(x)}, bool(label)) for x, label in zip(X, y)]

    def learn(model):
        for x, label in rows:
            model.predict_proba_one(x)
            model.learn_one(x, label)

    assert scale_warnings(lambda: learn(preprocessing.StandardScaler() | NCTLClassifier(**SMALL_NCTL))) == []
    assert len(scale_warnings(lambda: learn(NCTLClassifier(**SMALL_NCTL)))) == 1


def test_a_sklearn_pipeline_with_a_scaler_does_not_warn_and_one_without_does():
    from nctl.sklearn import GLNClassifier

    X, y = raw_stream(2)
    assert scale_warnings(lambda: make_pipeline(StandardScaler(), GLNClassifier(**SMALL_GLN)).fit(X, y)) == []
    assert len(scale_warnings(lambda: GLNClassifier(**SMALL_GLN).fit(X, y))) == 1


@pytest.mark.parametrize("quiet", ["1", "yes"])
def test_nctl_quiet_silences_the_warning(monkeypatch, quiet):
    monkeypatch.setenv(compilation.QUIET_ENV, quiet)
    X, y = raw_stream(3)
    assert scale_warnings(lambda: nctl.GLN(**SMALL_GLN).learn_many(X, y)) == []


@pytest.mark.parametrize("make", [lambda: nctl.GLN(**SMALL_GLN),
                                  lambda: nctl.NCTL(**SMALL_NCTL)])
def test_the_check_changes_nothing_learned(make, monkeypatch):
    X, y = raw_stream(4)
    outputs, warned = [], []
    for rows_judged in (SCALE_ROWS, len(X) + 1):  # the second learner never has the rows to judge
        monkeypatch.setattr(base, "SCALE_ROWS", rows_judged)
        model = make()

        def learn():
            before = model.learn_many(X[:60], y[:60])
            for x, label in zip(X[60:200], y[60:200]):
                model.learn_one(x, label)
            outputs.append((before, model.learn_many(X[200:], y[200:]), model.predict_proba_many(X)))

        warned.append(len(scale_warnings(learn)))
    assert warned == [1, 0]
    for a, b in zip(*outputs):
        np.testing.assert_array_equal(a, b)
