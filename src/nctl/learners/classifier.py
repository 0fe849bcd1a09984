"""The classifiers' front end (``Classifier``): what ``nctl.GLN`` and ``nctl.NCTL`` add to the shared
plumbing (``OnlineLearner``): labels in, probabilities out. The regressors' front end is
``nctl.learners.regressor.Regressor``."""

from __future__ import annotations

import numpy as np

from nctl.learners.inputs import check_labels


class Classifier:
    """Labels (0/1, or class indices below ``n_classes``) and predicted probabilities: ``P(y = 1)`` from the
    one network of a binary learner, the class outputs normalised to sum to one from ``K > 2`` one-vs-all
    networks. Mixed in before ``OnlineLearner``."""

    n_classes: int
    _target_kind = "label"  # what each y is, in error messages

    def _checked_targets(self, y) -> np.ndarray:
        """``y`` as int32 class indices (``check_labels``)."""
        return check_labels(y, self.n_classes)

    def _outputs(self, probs: np.ndarray) -> np.ndarray:
        """Binary: P(y = 1) [n]; one-vs-all: the class outputs normalised to sum to one [n, K]."""
        probs = np.asarray(probs, np.float64)
        if self.n_classes == 2:
            return probs[:, 0]
        return probs / probs.sum(axis=1, keepdims=True)

    def predict_proba_one(self, x):
        """P(y = 1 | x) (binary) or the class probabilities [K]; the learner does not change."""
        p = self._row_prediction(x)
        if self.n_classes == 2:  # the one network's output, as _outputs gives it, without its arrays
            return float(p[0])
        return self._outputs(p[None])[0]

    def predict_proba_many(self, X) -> np.ndarray:
        """Predictions for the rows of ``X`` [n, d], each as ``predict_proba_one`` would give it (P(y = 1)
        [n], or class probabilities [n, K]); the learner does not change."""
        return self._predict_rows(X)

    def predict_one(self, x) -> int:
        """The most probable label of ``x``: 0/1, or a class index; the learner does not change."""
        p = self.predict_proba_one(x)
        return int(p > 0.5) if self.n_classes == 2 else int(np.argmax(p))
