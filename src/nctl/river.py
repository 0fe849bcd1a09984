"""river estimators backed by the nctl learners: the classifiers ``NCTLClassifier`` and
``GLNClassifier``, and the regressors ``NCTLRegressor`` and ``GLNRegressor``.

They take river's feature dicts, so they fit in ``river.evaluate.progressive_val_score`` and in
pipelines (``StandardScaler() | NCTLClassifier()``). This module needs river (the ``full`` extra);
``import nctl`` does not load it, import it as ``nctl.river``.
"""

from __future__ import annotations

import copy
import math
import numbers
import sys
from collections.abc import Mapping

import numpy as np
from river import base
from river.proba import base as proba_base

from nctl import learners
from nctl.adapter_params import NO_DEFAULTS, adapter_init, learner_params
from nctl.learners import GLN, GLN_TABULAR, NCTL, TABULAR
from nctl.learners.regressor import MAX_TARGET

BINARY_LABELS = (False, True)
FLOAT32_MAX = float(np.finfo(np.float32).max)  # the learners keep features in float32


class _DictFeatures:
    """What every estimator here shares: an nctl learner (``_learner_class``, built from the parameters)
    that learns the vectors of river's feature dicts.

    Features: the first dict learned fixes them (its keys, sorted by name); later dicts fill a missing
    feature with 0.0 and any key not in that first dict is ignored. Values must be finite numbers.
    """

    _learner_class: type
    _learner_defaults: Mapping  # the adapter's defaults over the learner's own (``nctl.adapter_params``)

    def _start(self) -> None:
        """A fresh learner; no features known yet."""
        params = learner_params(self._learner_class, self._learner_defaults, self._get_params())
        self._learner = self._learner_class(**params)
        self._features: list | None = None  # feature names in vector order

    def __copy__(self):
        """``copy.copy`` is ``copy.deepcopy``: an estimator that learns apart from this one (a shallow copy
        would share, and go on training, this one's learner)."""
        return copy.deepcopy(self)

    @property
    def learner(self):
        """The nctl learner (``nctl.NCTL``, ``nctl.GLN``, ``nctl.GLNRegressor``, ``nctl.NCTLRegressor``) that
        learns the vectors (to save it or inspect its state)."""
        return self._learner

    @property
    def features(self) -> list | None:
        """The feature names in the order of the learner's inputs; ``None`` before the first ``learn_one``."""
        return self._features

    def _feature_names(self, x: dict) -> list:
        if not isinstance(x, dict):
            raise TypeError(f"x must be a dict of feature name -> number, river's kind of example; got "
                            f"{type(x).__module__}.{type(x).__qualname__}. For rows of a numpy array use the "
                            "learners themselves (nctl.NCTL, nctl.GLN, nctl.GLNRegressor) or nctl.sklearn")
        return self._features if self._features is not None else sorted(x, key=str)

    def _first_names(self, x: dict) -> list:
        """The feature names of ``x`` about to be learned (its own, sorted, when it is the first)."""
        names = self._feature_names(x)
        if not names:
            raise ValueError("x has no features: the first example learned fixes the features")
        return names

    def _vector(self, x: dict, names: list) -> np.ndarray:
        values = [x.get(name, 0.0) for name in names]
        # river's usual row, floats within float32's range (NaN fails the comparison), checked in one pass
        if values and all(type(value) is float and -FLOAT32_MAX <= value <= FLOAT32_MAX for value in values):
            return np.array(values, np.float32)
        return self._checked_vector(names, values)

    def _checked_vector(self, names: list, values: list) -> np.ndarray:
        """The values as float32, or the error that names the first feature that is not a finite number
        within float32's range."""
        checked = []
        for name, value in zip(names, values):
            if not isinstance(value, numbers.Real):
                raise ValueError(f"feature {name!r} must be a number, got {value!r}")
            value = _as_float(value, f"feature {name!r}")
            if not math.isfinite(value):
                raise ValueError(f"feature {name!r} is {value}; features must be finite")
            if abs(value) > FLOAT32_MAX:
                raise ValueError(f"feature {name!r} is {value}, beyond float32's range (+-{FLOAT32_MAX:.3g})")
            checked.append(value)
        return np.array(checked, np.float32)


def _as_float(value: numbers.Real, what: str) -> float:
    """``value`` as a float; ValueError naming ``what`` for one beyond float's range (an int such as
    10**400, whose digits are not shown: past 4300 of them Python refuses to write it)."""
    try:
        return float(value)
    except OverflowError:
        raise ValueError(f"{what} is a number too large for a float (beyond +-{sys.float_info.max:.3g})") from None


class _Classifier(_DictFeatures, base.Classifier):
    """A river classifier around an nctl learner (features: ``_DictFeatures``).

    Labels: binary learners take bools or 0/1, and predict with the kind of the first label learned; with
    ``n_classes = K > 2`` the first K distinct labels (any hashable) are the classes.
    """

    def _start(self) -> None:
        """A fresh learner; no features or labels known yet."""
        super()._start()
        self._labels: list = []  # class index -> label; binary: [False, True] or [0, 1]

    @property
    def _multiclass(self) -> bool:
        return self.n_classes > 2

    def _class_index(self, y) -> int:
        if self._multiclass:
            if y != y:  # NaN: equal to no label, not even itself, so each would be a new class
                raise ValueError(f"label {y!r} is NaN; a label must equal itself")
            if y not in self._labels:
                if len(self._labels) == self.n_classes:
                    raise ValueError(f"label {y!r} would be class {self.n_classes + 1}, but n_classes is "
                                     f"{self.n_classes} (classes seen: {self._labels})")
                self._labels.append(y)
            return self._labels.index(y)
        is_bool = isinstance(y, (bool, np.bool_))
        if not (is_bool or (isinstance(y, numbers.Integral) and y in (0, 1))):
            raise ValueError(f"binary labels must be bool or 0/1, got {y!r}; "
                             "for other labels or more than two classes, set n_classes")
        if not self._labels:
            self._labels = list(BINARY_LABELS) if is_bool else [0, 1]
        return int(y)

    def learn_one(self, x: dict, y) -> None:
        names = self._first_names(x)
        vector = self._vector(x, names)
        index = self._class_index(y)
        self._features = names
        self._learner.learn_one(vector, index)

    def predict_proba_one(self, x: dict) -> dict:
        """``{label: probability}``. Before any learning it is uniform over the known labels:
        ``{False: 0.5, True: 0.5}`` when binary, ``{}`` when multiclass (no label known yet).
        Multiclass: over the labels seen so far, renormalised."""
        vector = self._vector(x, self._feature_names(x))
        if self._learner.t_ == 0:
            return {} if self._multiclass else dict.fromkeys(BINARY_LABELS, 0.5)
        proba = self._learner.predict_proba_one(vector)
        if not self._multiclass:
            return {self._labels[0]: 1.0 - proba, self._labels[1]: proba}
        known = proba[:len(self._labels)] / proba[:len(self._labels)].sum()
        return {label: float(p) for label, p in zip(self._labels, known)}


class NCTLClassifier(_Classifier):
    """NCTL (``nctl.NCTL``) as a river classifier; the parameters are the learner's, and so are the
    defaults but three: ``learning_rate``, ``layer_sizes`` and the pool are ``nctl.NCTL.tabular()``'s
    (``nctl.learners.TABULAR``, chosen on river's streams against river's classifiers: [the river guide,
    "Defaults"](guide-river.md#defaults)); ``pool=None`` is ``nctl.Pool(size=7, min_segment=128)``.
    ``nctl.NCTL``'s own defaults are the paper's Split MNIST network.

    With ``depth=None`` the tree grows with the stream, so the stream may have any length; for a stream
    of known length ``n``, ``depth = ceil(log2(n))`` fixes the tree from the start.

    >>> from river import datasets, evaluate, metrics, preprocessing
    >>> from nctl.river import NCTLClassifier
    >>> model = preprocessing.StandardScaler() | NCTLClassifier()
    >>> evaluate.progressive_val_score(datasets.Phishing(), model, metrics.Accuracy())  # doctest: +SKIP
    """

    _learner_class, _learner_defaults = NCTL, TABULAR
    __init__ = adapter_init(NCTL, TABULAR, then="_start")


class GLNClassifier(_Classifier):
    """A Gated Linear Network (``nctl.GLN``) as a river classifier; the parameters and defaults are
    the learner's but ``layer_sizes=(4, 1)`` and ``learning_rate=0.1``: ``NCTLClassifier``'s network
    (``nctl.GLN.tabular()``, ``nctl.learners.GLN_TABULAR``; [the river guide, "Defaults"](guide-river.md#defaults)).

    >>> from river import datasets, evaluate, metrics, preprocessing
    >>> from nctl.river import GLNClassifier
    >>> model = preprocessing.StandardScaler() | GLNClassifier()
    >>> evaluate.progressive_val_score(datasets.Phishing(), model, metrics.Accuracy())  # doctest: +SKIP
    """

    _learner_class, _learner_defaults = GLN, GLN_TABULAR
    __init__ = adapter_init(GLN, GLN_TABULAR, then="_start")


class Normal(proba_base.ContinuousDistribution):
    """A normal distribution with mean ``mu`` and standard deviation ``sigma``: the predictive
    distribution ``predict_one(x, with_dist=True)`` gives, as river's regressors with a distribution give
    theirs. It has river's distribution interface (called on ``y``: the density; ``cdf``, ``sample``,
    ``mode``); being a prediction, it learns nothing, so ``update`` and ``revert`` raise.
    """

    def __init__(self, mu: float = 0.0, sigma: float = 1.0, seed: int | None = None):
        super().__init__(seed)
        self.mu = mu
        self.sigma = sigma

    def __repr__(self) -> str:
        return f"𝒩(μ={self.mu:.3f}, σ={self.sigma:.3f})"

    def __call__(self, y: float) -> float:
        z = (y - self.mu) / self.sigma
        return math.exp(-0.5 * z * z) / (self.sigma * math.sqrt(math.tau))

    def cdf(self, y: float) -> float:
        return 0.5 * math.erfc((self.mu - y) / (self.sigma * math.sqrt(2.0)))

    def sample(self) -> float:
        return self._rng.gauss(self.mu, self.sigma)

    @property
    def mode(self) -> float:
        return self.mu

    @property
    def n_samples(self) -> int:
        return 0  # a prediction, not an estimate from observed samples

    def update(self, y: float) -> None:
        raise NotImplementedError("a predictive distribution learns nothing: learn with the regressor")

    def revert(self, y: float) -> None:
        raise NotImplementedError("a predictive distribution learns nothing: learn with the regressor")


class _Regressor(_DictFeatures, base.Regressor):
    """A river regressor around an nctl learner of real targets (features: ``_DictFeatures``); the learner
    needs ``learn_one``, ``predict_one`` and ``predict_distribution_many``. Targets are real, finite
    numbers, given raw: the learner standardises them itself."""

    def learn_one(self, x: dict, y) -> None:
        """Learn the example ``x`` with its real target ``y``; a refused example changes nothing."""
        names = self._first_names(x)
        vector = self._vector(x, names)
        # checked here too, so that a bad first target does not fix the features
        if isinstance(y, (bool, np.bool_)) or not isinstance(y, numbers.Real):
            raise ValueError(f"target y must be a real number, got {y!r}")
        y = _as_float(y, "target y")
        if not math.isfinite(y):
            raise ValueError(f"target y is {y}; targets must be finite")
        if abs(y) > MAX_TARGET:
            raise ValueError(f"target y is {y:g}; targets must lie within +-{MAX_TARGET:g} (rescale them)")
        self._features = names
        self._learner.learn_one(vector, y)

    def predict_one(self, x: dict, with_dist: bool = False):
        """The predicted mean of the target of ``x``; with ``with_dist=True`` the predictive distribution,
        a ``Normal`` (``.mu``, ``.sigma``; as ``river.linear_model.BayesianLinearRegression`` gives its
        own). Before any learning: 0.0, and a standard normal (nothing is known about the targets yet)."""
        vector = self._vector(x, self._feature_names(x))
        if self._learner.t_ == 0:
            return Normal(0.0, 1.0) if with_dist else 0.0
        if not with_dist:
            return self._learner.predict_one(vector)
        mean, variance = self._learner.predict_distribution_one(vector)
        return Normal(mean, math.sqrt(variance))


class GLNRegressor(_Regressor):
    """A Gaussian Gated Linear Network (``nctl.GLNRegressor``) as a river regressor; the parameters and
    their defaults are the learner's. Targets are given raw (the learner standardises them by their
    running mean and standard deviation); the features should be standardised, so put a
    ``preprocessing.StandardScaler`` in front of it.

    >>> from river import datasets, evaluate, metrics, preprocessing
    >>> from nctl.river import GLNRegressor
    >>> model = preprocessing.StandardScaler() | GLNRegressor(layer_sizes=(4, 1), context_bits=2)
    >>> mae = evaluate.progressive_val_score(datasets.TrumpApproval(), model, metrics.MAE())
    >>> bool(mae.get() < 1.0)  # predicting the running mean: 1.57
    True
    >>> x, y = next(iter(datasets.TrumpApproval()))
    >>> model.predict_one(x, with_dist=True)  # doctest: +ELLIPSIS
    𝒩(μ=..., σ=...)
    """

    _learner_class, _learner_defaults = learners.GLNRegressor, NO_DEFAULTS
    __init__ = adapter_init(learners.GLNRegressor, NO_DEFAULTS, then="_start")


class NCTLRegressor(_Regressor):
    """NCTL for regression (``nctl.NCTLRegressor``) as a river regressor; the parameters and their defaults
    are the learner's (``pool=None`` is its pool, ``nctl.Pool(eviction="spacing")``). Targets are given raw
    (the learner standardises them by their running mean and standard deviation); the features should be standardised, so put a ``preprocessing.StandardScaler``
    in front of it. A concept that comes back is recalled from each neuron's pool of remembered states.

    >>> from river import datasets, evaluate, metrics, preprocessing
    >>> from nctl.river import NCTLRegressor
    >>> model = preprocessing.StandardScaler() | NCTLRegressor(layer_sizes=(4, 1), context_bits=2)
    >>> mae = evaluate.progressive_val_score(datasets.TrumpApproval(), model, metrics.MAE())
    >>> bool(mae.get() < 1.0)  # predicting the running mean: 1.57
    True
    """

    _learner_class, _learner_defaults = learners.NCTLRegressor, NO_DEFAULTS
    __init__ = adapter_init(learners.NCTLRegressor, NO_DEFAULTS, then="_start")
