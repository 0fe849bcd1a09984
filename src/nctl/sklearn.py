"""scikit-learn estimators backed by the nctl learners: the classifiers ``GLNClassifier`` and
``NCTLClassifier``, and the regressors ``GLNRegressor`` and ``NCTLRegressor``.

``fit(X, y)`` learns the rows of ``X`` once, in order, starting from a fresh learner; ``partial_fit``
continues the same stream (its first call needs ``classes``, as in scikit-learn's other online
estimators; a regressor's needs nothing). Labels may be any values: ``classes_`` holds them sorted,
two classes train one network and ``K > 2`` classes train ``K`` one-vs-all networks. The features are
not standardised here: the learners expect standardised side information, so put a ``StandardScaler``
in front of them in a ``Pipeline``. A regressor's targets are given raw: its learner standardises them
itself. This module needs scikit-learn (the ``sklearn`` extra); ``import nctl`` does not load it.

>>> import numpy as np
>>> from sklearn.pipeline import make_pipeline
>>> from sklearn.preprocessing import StandardScaler
>>> from nctl.sklearn import GLNClassifier
>>> X = np.random.default_rng(0).normal(3.0, 2.0, size=(400, 3))
>>> y = np.array(["low", "mid", "high"])[np.digitize(X[:, 0] - X[:, 1], [-1.0, 1.0])]
>>> model = make_pipeline(StandardScaler(), GLNClassifier(layer_sizes=(8, 1), learning_rate=0.1))
>>> bool(model.fit(X[:300], y[:300]).score(X[300:], y[300:]) > 0.8)
True
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Mapping

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.utils.multiclass import check_classification_targets, unique_labels
from sklearn.utils.validation import check_is_fitted, validate_data

from nctl import learners
from nctl.adapter_params import NO_DEFAULTS, adapter_init, learner_params
from nctl.learners import GLN, GLN_TABULAR, NCTL, TABULAR

FEATURE_DTYPES = (np.float32, np.float64)  # other numeric inputs become float32, the learners' dtype


class _Estimator(BaseEstimator):
    """What every estimator here shares: an nctl learner (``_learner_class``, built from the parameters)
    fitted as ``learner_`` (for ``save`` and ``nctl.inspect``), copies that learn apart, and refused
    calls that change nothing."""

    _learner_class: type
    _learner_defaults: Mapping  # the adapter's defaults over the learner's own (``nctl.adapter_params``)

    def _new_learner(self, **extra):
        """A fresh learner of this estimator's parameters (``pool=None``: the adapter's pool) and ``extra``."""
        params = learner_params(self._learner_class, self._learner_defaults, self.get_params())
        return self._learner_class(**params, **extra)

    def __copy__(self):
        """``copy.copy`` is ``copy.deepcopy``: an estimator that learns apart from this one (a shallow copy
        would share, and go on training, this one's learner)."""
        return copy.deepcopy(self)

    @contextlib.contextmanager
    def _unchanged_if_refused(self):
        """Put every attribute back as it was when the block raises: a refused ``fit`` or ``partial_fit``
        leaves the estimator as it was (its checks set ``n_features_in_`` and ``classes_`` as they go;
        the learner refuses a bad row before it changes)."""
        kept = dict(vars(self))
        try:
            yield
        except BaseException:
            vars(self).clear()
            vars(self).update(kept)
            raise


class _Classifier(ClassifierMixin, _Estimator):
    """A scikit-learn classifier around an nctl learner (``_learner_class``, built from the parameters
    and the number of classes). Fitted attributes: ``classes_``, ``n_features_in_`` and ``learner_``
    (the nctl learner, for ``save`` and ``nctl.inspect``)."""

    def fit(self, X, y):
        """Learn the rows of ``X`` [n, d] in order, once, from a fresh learner."""
        with self._unchanged_if_refused():
            X, y = validate_data(self, X, y, dtype=FEATURE_DTYPES)
            check_classification_targets(y)
            self._start(unique_labels(y))
            return self._learn(X, y)

    def partial_fit(self, X, y, classes=None):
        """Learn the rows of ``X`` [n, d] in order, continuing from the rows learned before.

        ``classes``: every label the stream may hold; required on the first call (the first call
        after ``fit`` continues ``fit``'s learner), optional and unchanged afterwards.
        """
        first = not hasattr(self, "classes_")
        if first and classes is None:
            raise ValueError("classes must be given on the first call to partial_fit")
        with self._unchanged_if_refused():
            X, y = validate_data(self, X, y, dtype=FEATURE_DTYPES, reset=first)
            check_classification_targets(y)
            if first:
                self._start(unique_labels(classes))
            elif classes is not None and not np.array_equal(unique_labels(classes), self.classes_):
                raise ValueError(f"classes={classes!r} differs from the classes of earlier calls: "
                                 f"{self.classes_.tolist()}")
            return self._learn(X, y)

    def _start(self, classes: np.ndarray) -> None:
        if len(classes) < 2:
            raise ValueError(f"a classifier needs at least 2 classes, got 1 class: {classes.tolist()}")
        self.classes_ = classes
        self.learner_ = self._new_learner(n_classes=len(classes))

    def _learn(self, X: np.ndarray, y: np.ndarray):
        unknown = ~np.isin(y, self.classes_)
        if unknown.any():
            raise ValueError(f"label {y[unknown].tolist()[0]!r} is not one of classes_ {self.classes_.tolist()}")
        self.learner_.learn_many(X, np.searchsorted(self.classes_, y))
        return self

    def predict_proba(self, X) -> np.ndarray:
        """Class probabilities [n, classes] (columns in the order of ``classes_``); learns nothing."""
        check_is_fitted(self)
        X = validate_data(self, X, dtype=FEATURE_DTYPES, reset=False)
        p = self.learner_.predict_proba_many(X)
        return np.column_stack([1.0 - p, p]) if p.ndim == 1 else p

    def predict(self, X) -> np.ndarray:
        """The most probable label of every row [n]."""
        proba = self.predict_proba(X)
        return self.classes_[np.argmax(proba, axis=1)]


class GLNClassifier(_Classifier):
    """A Gated Linear Network (``nctl.GLN``) as a scikit-learn classifier; the parameters and their
    defaults are the learner's, except ``n_classes``, which comes from the labels, and
    ``layer_sizes=(4, 1)`` and ``learning_rate=0.1``, ``NCTLClassifier``'s network (``nctl.GLN.tabular()``,
    ``nctl.learners.GLN_TABULAR``; [the river guide, "Defaults"](guide-river.md#defaults)).

    ``partial_fit`` on consecutive chunks of a stream learns exactly what ``fit`` on the whole stream
    learns:

    >>> import numpy as np
    >>> from nctl.sklearn import GLNClassifier
    >>> X = np.random.default_rng(1).standard_normal((300, 3))
    >>> y = np.array(["low", "mid", "high"])[np.digitize(X[:, 0], [-0.5, 0.5])]
    >>> model = GLNClassifier(layer_sizes=(8, 1), learning_rate=0.1)
    >>> for rows in np.array_split(np.arange(300), 3):
    ...     model = model.partial_fit(X[rows], y[rows], classes=["low", "mid", "high"])
    >>> whole = GLNClassifier(layer_sizes=(8, 1), learning_rate=0.1).fit(X, y)
    >>> model.classes_.tolist(), bool(np.array_equal(model.predict_proba(X[:100]), whole.predict_proba(X[:100])))
    (['high', 'low', 'mid'], True)
    """

    _learner_class, _learner_defaults = GLN, GLN_TABULAR
    __init__ = adapter_init(GLN, GLN_TABULAR, without=("n_classes",))


class NCTLClassifier(_Classifier):
    """NCTL (``nctl.NCTL``) as a scikit-learn classifier; the parameters and their defaults are the
    learner's, except ``n_classes``, which comes from the labels, and the tabular defaults of
    ``learning_rate``, ``layer_sizes`` and the pool (``nctl.NCTL.tabular()``, ``nctl.learners.TABULAR``;
    [the river guide, "Defaults"](guide-river.md#defaults)): ``pool=None`` is ``nctl.Pool(size=7,
    min_segment=128)``.

    It is used like ``GLNClassifier``; on the JAX engine (bounded mode, or ``NCTL_ENGINE=jax``) each new
    number of features or classes compiles the network again, which takes seconds. With ``depth=None``
    the tree grows with the stream; a stream of known length ``n`` is best served by
    ``depth = ceil(log2 n)``:

    >>> import nctl
    >>> from sklearn.pipeline import make_pipeline
    >>> from sklearn.preprocessing import StandardScaler
    >>> from nctl.sklearn import NCTLClassifier
    >>> model = make_pipeline(StandardScaler(), NCTLClassifier(depth=12, pool=nctl.Pool(size=3)))  # 4,096 rows
    >>> model[-1].get_params()["pool"].size
    3
    """

    _learner_class, _learner_defaults = NCTL, TABULAR
    __init__ = adapter_init(NCTL, TABULAR, without=("n_classes",))


class _Regressor(RegressorMixin, _Estimator):
    """A scikit-learn regressor around an nctl learner of real targets (``_learner_class``, built from the
    parameters); the learner needs ``learn_many``, ``predict_many`` and ``predict_distribution_many``.
    Targets are given raw: the learner standardises them itself. Fitted attributes: ``n_features_in_`` and
    ``learner_`` (the nctl learner, for ``save`` and ``nctl.inspect``)."""

    def fit(self, X, y):
        """Learn the rows of ``X`` [n, d] and their targets ``y`` [n] in order, once, from a fresh learner."""
        with self._unchanged_if_refused():
            X, y = validate_data(self, X, y, dtype=FEATURE_DTYPES, y_numeric=True)
            self.learner_ = self._new_learner()
            self.learner_.learn_many(X, y)
            return self

    def partial_fit(self, X, y):
        """Learn the rows of ``X`` [n, d] and their targets ``y`` [n] in order, continuing from the rows
        learned before (the first call after ``fit`` continues ``fit``'s learner)."""
        first = not hasattr(self, "learner_")
        with self._unchanged_if_refused():
            X, y = validate_data(self, X, y, dtype=FEATURE_DTYPES, y_numeric=True, reset=first)
            if first:
                self.learner_ = self._new_learner()
            self.learner_.learn_many(X, y)
            return self

    def predict(self, X, return_std: bool = False):
        """The predicted means [n] of the targets of the rows of ``X`` [n, d]; learns nothing.

        ``return_std=True`` (as in scikit-learn's ``BayesianRidge`` and ``GaussianProcessRegressor``)
        returns ``(means, stds)``: the predictive Gaussian of every row, its standard deviation in the
        targets' units.
        """
        check_is_fitted(self)
        X = validate_data(self, X, dtype=FEATURE_DTYPES, reset=False)
        if not return_std:
            return self.learner_.predict_many(X)
        means, variances = self.learner_.predict_distribution_many(X)
        return means, np.sqrt(variances)


class GLNRegressor(_Regressor):
    """A Gaussian Gated Linear Network (``nctl.GLNRegressor``) as a scikit-learn regressor; the parameters
    and their defaults are the learner's. Standardise the features (a ``StandardScaler`` in front, in a
    ``Pipeline``); the targets are given raw. ``predict(X, return_std=True)`` gives the predictive
    standard deviations too. ``partial_fit`` on consecutive chunks of a stream learns exactly what ``fit``
    on the whole stream learns:

    >>> import numpy as np
    >>> from nctl.sklearn import GLNRegressor
    >>> X = np.random.default_rng(1).standard_normal((300, 3))
    >>> y = 4.0 * np.sin(X[:, 0]) + X[:, 1] + 10.0
    >>> model = GLNRegressor(layer_sizes=(4, 1), context_bits=2)
    >>> for rows in np.array_split(np.arange(300), 3):
    ...     model = model.partial_fit(X[rows], y[rows])
    >>> whole = GLNRegressor(layer_sizes=(4, 1), context_bits=2).fit(X, y)
    >>> bool(np.array_equal(model.predict(X[:100]), whole.predict(X[:100])))
    True
    >>> means, stds = model.predict(X[:100], return_std=True)
    >>> means.shape, stds.shape, bool((stds > 0).all())
    ((100,), (100,), True)
    """

    _learner_class, _learner_defaults = learners.GLNRegressor, NO_DEFAULTS
    __init__ = adapter_init(learners.GLNRegressor, NO_DEFAULTS)


class NCTLRegressor(_Regressor):
    """NCTL for regression (``nctl.NCTLRegressor``) as a scikit-learn regressor; the parameters and their
    defaults are the learner's (``pool=None`` is its pool, ``nctl.Pool(eviction="spacing")``). Standardise the
    features (a ``StandardScaler`` in front, in a ``Pipeline``); the targets are given raw. ``predict(X, return_std=True)`` gives the predictive standard deviations too.

    >>> import numpy as np
    >>> from nctl.sklearn import NCTLRegressor
    >>> X = np.random.default_rng(1).standard_normal((300, 3))
    >>> y = 4.0 * np.sin(X[:, 0]) + X[:, 1] + 10.0
    >>> model = NCTLRegressor(layer_sizes=(4, 1), context_bits=2).fit(X, y)
    >>> means, stds = model.predict(X[:100], return_std=True)
    >>> bool(np.abs(means - y[:100]).mean() < np.abs(y[:100] - y.mean()).mean()), bool((stds > 0).all())
    (True, True)
    """

    _learner_class, _learner_defaults = learners.NCTLRegressor, NO_DEFAULTS
    __init__ = adapter_init(learners.NCTLRegressor, NO_DEFAULTS)