"""Reference online learners from the river library, run prequentially on a task stream.

The models are configured as in river's published binary-classification benchmark (the source of
the Elec2 anchors in docs/protocols.md §4): logistic regression and ALMA behind a ``StandardScaler``
(logistic regression with SGD, lr 0.005), Hoeffding Adaptive Tree, Adaptive Random Forest,
Leveraging Bagging of Hoeffding Trees, and the no-change classifier. The random ones take ``seed``.
The regressors (``RIVER_REGRESSORS``) are river's defaults: Adaptive Random Forest, Hoeffding Adaptive
Tree and linear regression; the regression runner puts a ``StandardScaler`` in front of each.
river is imported only when a model is built, so ``nctl.baselines`` does not require it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from nctl.evaluate.prequential import PrequentialRun
from nctl.streams.base import TaskStream

RIVER_LOGISTIC_LEARNING_RATE = 0.005  # river benchmark's SGD learning rate for logistic regression
BINARY_ONLY = frozenset({"logistic_regression", "alma"})


def _builders() -> dict[str, Callable[[int], Any]]:
    from river import dummy, ensemble, forest, linear_model, optim, preprocessing, tree

    return {
        "logistic_regression": lambda seed: (
            preprocessing.StandardScaler()
            | linear_model.LogisticRegression(optimizer=optim.SGD(RIVER_LOGISTIC_LEARNING_RATE))
        ),
        "alma": lambda seed: preprocessing.StandardScaler() | linear_model.ALMAClassifier(),
        "hoeffding_adaptive_tree": lambda seed: tree.HoeffdingAdaptiveTreeClassifier(seed=seed),
        "adaptive_random_forest": lambda seed: forest.ARFClassifier(seed=seed),
        "leveraging_bagging": lambda seed: ensemble.LeveragingBaggingClassifier(
            tree.HoeffdingTreeClassifier(), seed=seed
        ),
        "no_change": lambda seed: dummy.NoChangeClassifier(),
    }


RIVER_MODELS = (
    "logistic_regression",
    "alma",
    "hoeffding_adaptive_tree",
    "adaptive_random_forest",
    "leveraging_bagging",
    "no_change",
)


def make_river_model(name: str, seed: int = 0) -> Any:
    """A fresh river classifier named in ``RIVER_MODELS``."""
    if name not in RIVER_MODELS:
        raise ValueError(f"unknown river model {name!r}; choose one of {RIVER_MODELS}")
    return _builders()[name](seed)


RIVER_REGRESSORS = ("adaptive_random_forest", "hoeffding_adaptive_tree", "linear_regression")


def make_river_regressor(name: str, seed: int = 0) -> Any:
    """A fresh river regressor named in ``RIVER_REGRESSORS``, with river's default settings (the random
    ones drawn by ``seed``)."""
    from river import forest, linear_model, tree

    builders = {
        "adaptive_random_forest": lambda: forest.ARFRegressor(seed=seed),
        "hoeffding_adaptive_tree": lambda: tree.HoeffdingAdaptiveTreeRegressor(seed=seed),
        "linear_regression": linear_model.LinearRegression,
    }
    if name not in builders:
        raise ValueError(f"unknown river regressor {name!r}; choose one of {RIVER_REGRESSORS}")
    return builders[name]()


def _probability_vector(proba: dict, n_classes: int) -> np.ndarray:
    """river's ``{label: probability}`` as ``[K]``: unseen classes 0, renormalised, or uniform."""
    vector = np.array([float(proba.get(k, 0.0)) for k in range(n_classes)])
    total = vector.sum()
    return vector / total if total > 0 else np.full(n_classes, 1.0 / n_classes)


def run_river(
    name: str,
    stream: TaskStream,
    *,
    seed: int = 0,
    feature_names: Sequence[str] | None = None,
) -> PrequentialRun:
    """Test-then-train a river model over ``stream``: ``predict_proba_one``, then ``learn_one``.

    Each row becomes a dict ``{feature_names[i]: x_i}`` (default names ``x0, x1, ...``). Returns the
    same per-step predictions as :func:`nctl.evaluate.prequential` (P(y=1) ``[T]`` or ``[T, K]``).
    """
    if name in BINARY_ONLY and stream.n_classes != 2:
        raise ValueError(
            f"river model {name!r} is binary; the stream has {stream.n_classes} classes"
        )
    names = (
        [f"x{i}" for i in range(stream.n_features)]
        if feature_names is None
        else list(feature_names)
    )
    if len(names) != stream.n_features:
        raise ValueError(f"need {stream.n_features} feature names, got {len(names)}")
    if len(stream) == 0:
        raise ValueError("the stream has no steps to evaluate")
    model = make_river_model(name, seed)
    probabilities = np.empty((len(stream), stream.n_classes))
    labels = np.empty(len(stream), np.int64)
    tasks = np.empty(len(stream), np.int32)
    for t, (x, y, task) in enumerate(stream):
        features = dict(zip(names, map(float, x)))
        probabilities[t] = _probability_vector(model.predict_proba_one(features), stream.n_classes)
        model.learn_one(features, y)
        labels[t], tasks[t] = y, task
    if stream.n_classes == 2:
        probabilities = probabilities[:, 1]
    return PrequentialRun(probabilities, labels, tasks)
