"""river classifiers backed by the nctl learners: ``NCTLClassifier`` and ``GLNClassifier``.

They take river's feature dicts and labels, so they fit in ``river.evaluate.progressive_val_score``
and in pipelines (``StandardScaler() | NCTLClassifier()``). This module needs river (the ``full``
extra); ``import nctl`` does not load it, import it as ``nctl.river``.
"""

from __future__ import annotations

import copy
import math
import numbers

import numpy as np
from river import base

from nctl.learners import GLN, NCTL

BINARY_LABELS = (False, True)
FLOAT32_MAX = float(np.finfo(np.float32).max)  # the learners keep features in float32


class _Classifier(base.Classifier):
    """A river classifier around an nctl learner (``_learner_class``, built from the parameters).

    Features: the first dict learned fixes them (its keys, sorted by name); later dicts fill a
    missing feature with 0.0 and any key not in that first dict is ignored. Values must be finite
    numbers. Labels: binary learners take bools or 0/1, and predict with the kind of the first label
    learned; with ``n_classes = K > 2`` the first K distinct labels (any hashable) are the classes.
    """

    _learner_class: type

    def _start(self) -> None:
        """A fresh learner; no features or labels known yet."""
        self._learner = self._learner_class(**self._get_params())
        self._features: list | None = None  # feature names in vector order
        self._labels: list = []  # class index -> label; binary: [False, True] or [0, 1]

    def __copy__(self):
        """``copy.copy`` is ``copy.deepcopy``: a classifier that learns apart from this one (a shallow copy
        would share, and go on training, this one's learner)."""
        return copy.deepcopy(self)

    @property
    def learner(self):
        """The ``nctl.NCTL`` or ``nctl.GLN`` that learns the vectors (to save it or inspect its state)."""
        return self._learner

    @property
    def features(self) -> list | None:
        """The feature names in the order of the learner's inputs; ``None`` before the first ``learn_one``."""
        return self._features

    @property
    def _multiclass(self) -> bool:
        return self.n_classes > 2

    def _feature_names(self, x: dict) -> list:
        if not isinstance(x, dict):
            raise TypeError(f"x must be a dict of feature name -> number, river's kind of example; got "
                            f"{type(x).__module__}.{type(x).__qualname__}. For rows of a numpy array use the "
                            "learners themselves (nctl.NCTL, nctl.GLN) or nctl.sklearn")
        return self._features if self._features is not None else sorted(x, key=str)

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
            if not math.isfinite(value):
                raise ValueError(f"feature {name!r} is {value}; features must be finite")
            if abs(value) > FLOAT32_MAX:
                raise ValueError(f"feature {name!r} is {value}, beyond float32's range (+-{FLOAT32_MAX:.3g})")
            checked.append(float(value))
        return np.array(checked, np.float32)

    def _class_index(self, y) -> int:
        if self._multiclass:
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
        names = self._feature_names(x)
        if not names:
            raise ValueError("x has no features: the first example learned fixes the features")
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
    defaults but five: ``learning_rate``, ``layer_sizes``, ``context_bits``, ``pool_size`` and
    ``min_segment`` are ``nctl.NCTL.tabular()``'s (``nctl.learners.TABULAR``, chosen on six tabular streams
    against river's learners: [the river guide, "Defaults"](guide-river.md#defaults)). ``nctl.NCTL``'s own
    defaults are the paper's Split MNIST network.

    With ``depth=None`` the tree grows with the stream, so the stream may have any length; for a stream
    of known length ``n``, ``depth = ceil(log2(n))`` fixes the tree from the start.

    >>> from river import datasets, evaluate, metrics, preprocessing
    >>> from nctl.river import NCTLClassifier
    >>> model = preprocessing.StandardScaler() | NCTLClassifier()
    >>> evaluate.progressive_val_score(datasets.Phishing(), model, metrics.Accuracy())  # doctest: +SKIP
    """

    _learner_class = NCTL

    # the defaults are written out for the API reference to show; tests/test_river.py checks them against
    # NCTL.tabular()
    def __init__(
        self,
        layer_sizes: tuple = (16, 8, 1),
        context_bits: int = 2,
        learning_rate: float = 0.1,
        pool_size: int = 7,
        depth: int | None = None,
        min_segment: int = 64,
        reservoir_size: int = 100,
        refine_threshold: float = 0.0,
        skip_threshold: float = 0.0,
        joint_evidence: bool = False,
        eviction: str = "fifo",
        trained_members: int | None = None,
        split_prob: float | tuple = 0.5,
        n_classes: int = 2,
        weight_init: str = "zeros",
        prob_eps: float = 0.01,
        max_weight: float = 200.0,
        seed: int = 0,
    ):
        self.layer_sizes = layer_sizes
        self.context_bits = context_bits
        self.learning_rate = learning_rate
        self.pool_size = pool_size
        self.depth = depth
        self.min_segment = min_segment
        self.reservoir_size = reservoir_size
        self.refine_threshold = refine_threshold
        self.skip_threshold = skip_threshold
        self.joint_evidence = joint_evidence
        self.eviction = eviction
        self.trained_members = trained_members
        self.split_prob = split_prob
        self.n_classes = n_classes
        self.weight_init = weight_init
        self.prob_eps = prob_eps
        self.max_weight = max_weight
        self.seed = seed
        self._start()


class GLNClassifier(_Classifier):
    """A Gated Linear Network (``nctl.GLN``) as a river classifier; the parameters and defaults are
    the learner's but ``learning_rate=0.1`` (``nctl.GLN.tabular()``, ``nctl.learners.GLN_TABULAR``;
    [the river guide, "Defaults"](guide-river.md#defaults)).

    >>> from river import datasets, evaluate, metrics, preprocessing
    >>> from nctl.river import GLNClassifier
    >>> model = preprocessing.StandardScaler() | GLNClassifier()
    >>> evaluate.progressive_val_score(datasets.Phishing(), model, metrics.Accuracy())  # doctest: +SKIP
    """

    _learner_class = GLN

    # the defaults are written out for the API reference to show; tests/test_river.py checks them against
    # GLN.tabular()
    def __init__(
        self,
        layer_sizes: tuple = (50, 25, 1),
        context_bits: int = 4,
        learning_rate: float = 0.1,
        n_classes: int = 2,
        weight_init: str = "zeros",
        prob_eps: float = 0.01,
        max_weight: float = 200.0,
        seed: int = 0,
    ):
        self.layer_sizes = layer_sizes
        self.context_bits = context_bits
        self.learning_rate = learning_rate
        self.n_classes = n_classes
        self.weight_init = weight_init
        self.prob_eps = prob_eps
        self.max_weight = max_weight
        self.seed = seed
        self._start()
