"""Checks of what a learner is given: features (``check_features``) and labels (``check_labels``), with
errors that say what is wrong and how to fix it; and ``unscaled``, which tells features that are plainly not
standardised."""

import math
from collections.abc import Mapping

import numpy as np

SCALE_ROWS = 100  # the first rows a learner learns are the ones ``unscaled`` judges
# A feature whose median absolute value is above this is plainly not standardised: a standardised one lies
# beyond +-3 at most a ninth of the time (Chebyshev), so its first rows reach it only where the stream begins
# with its extremes; features within [-3, 3] (0/1 ones, say) never reach it
UNSCALED_MEDIAN = 3.0
SHORT_ROW = 32  # check_features sums a row of at most this many features in Python (numpy's call costs more)
FLOAT32 = np.dtype(np.float32)


def check_features(x, n_features: int | None, what: str = "x") -> np.ndarray:
    array = np.asarray(x)
    if array.dtype.kind not in "iuf":
        if array.dtype == object and array.size and isinstance(array.flat[0], Mapping):
            raise TypeError(f"{what} holds dicts, but the learners take arrays of numbers; for examples as dicts of "
                            "feature name -> number (river's kind), use nctl.river.NCTLClassifier or GLNClassifier")
        raise ValueError(f"{what} must hold real numbers, got dtype {array.dtype}")
    if array.ndim and array.shape[-1] == 0:
        raise ValueError(f"{what} has no features (shape {array.shape}); a learner needs at least one")
    if n_features is not None and array.shape[-1:] != (n_features,):
        raise ValueError(f"{what} must have {n_features} features, got shape {array.shape}")
    if array.dtype is FLOAT32:  # (an equal dtype that is another object is converted: the same numbers)
        single = array.copy()  # a copy: rows kept back by learn_one do not change with x
    else:
        with np.errstate(over="ignore"):
            single = array.astype(np.float32)
    # one check on the usual path: a finite sum means no NaN and no infinity, in float32 or before (a short
    # row summed in Python floats, which costs a third of numpy's call; they cannot overflow)
    total = sum(single.tolist()) if single.ndim == 1 and single.size <= SHORT_ROW else single.sum()
    if not math.isfinite(total) and not np.isfinite(single).all():
        if not np.isfinite(array).all():
            raise ValueError(f"{what} contains NaN or infinity")
        raise ValueError(f"{what} has values beyond float32's range (+-{np.finfo(np.float32).max:.3g}), "
                         "which would become infinity")
    return single


def check_labels(y, n_classes: int) -> np.ndarray:
    array = np.asarray(y)
    if array.ndim == 0 and array.dtype.kind in "biu" and 0 <= array.item() < n_classes:  # one label, the usual kind
        return array.astype(np.int32)
    if array.dtype.kind not in "biuf":
        raise ValueError(f"labels must be integers, got dtype {array.dtype}")
    if array.dtype.kind == "f" and not np.isfinite(array).all():
        raise ValueError("labels contain NaN or infinity")
    valid = (array >= 0) & (array < n_classes)
    if array.dtype.kind == "f":
        valid &= array == np.round(array)
    if not valid.all():
        bad = array[~valid].ravel()[0]
        allowed = "0 or 1" if n_classes == 2 else f"a class index in 0..{n_classes - 1}"
        hint = f"; for more classes, set n_classes (e.g. n_classes={int(bad) + 1})" if bad > 0 and bad == int(bad) else ""
        raise ValueError(f"labels must be {allowed}, found {bad!r}{hint}")
    return array.astype(np.int32)


ADAPTER_OF = {"NCTL": "NCTLClassifier", "GLN": "GLNClassifier"}  # a learner's river adapter, where its name differs


def unscaled(X: np.ndarray, learner: str) -> str | None:
    """The warning for rows ``X`` [n, d] with a feature whose median absolute value is above
    ``UNSCALED_MEDIAN``, else None."""
    typical = np.median(np.abs(X), axis=0)
    far = np.flatnonzero(typical > UNSCALED_MEDIAN)
    if not len(far):
        return None
    worst = far[np.argmax(typical[far])]
    return (f"nctl: {len(far)} of {X.shape[1]} features given to {learner} are not standardised: over the first "
            f"{len(X)} rows learned, feature {worst} (counting from 0) has a median absolute value of "
            f"{typical[worst]:.3g}, where standardised features have about 0.7; the learners gate on the features and "
            "learn much worse without zero mean and unit variance, so standardise them, e.g. with river's "
            f"preprocessing.StandardScaler() | {ADAPTER_OF.get(learner, learner)}() or scikit-learn's StandardScaler in a "
            "Pipeline "
            "(NCTL_QUIET=1 hides this warning)")
