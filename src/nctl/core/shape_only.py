"""Arrays that are only shapes: the numpy constructors a fresh state is made with, each giving a read-only
view of one zero of its dtype broadcast to its shape, which holds no memory of its own. A state made with
``xp=shape_only`` (``engine.init``, a learner's ``_fresh_state``) has every array's shape and dtype, so its
bytes are known before it is made, without allocating it or importing JAX."""

from __future__ import annotations

import numpy as np


def _shaped(shape, dtype) -> np.ndarray:
    return np.broadcast_to(np.zeros((), dtype), shape)


def zeros(shape, dtype=float) -> np.ndarray:
    return _shaped(shape, dtype)


def ones(shape, dtype=float) -> np.ndarray:
    return _shaped(shape, dtype)


def full(shape, value, dtype=None) -> np.ndarray:
    return _shaped(shape, np.asarray(value).dtype if dtype is None else dtype)


def arange(n: int, dtype=None) -> np.ndarray:
    return _shaped((n,), np.asarray(n).dtype if dtype is None else dtype)


def asarray(values, dtype=None) -> np.ndarray:
    values = np.asarray(values)  # what a state is made from: small arrays, made already
    return _shaped(values.shape, values.dtype if dtype is None else dtype)


def array(values, dtype=None) -> np.ndarray:
    return asarray(values, dtype)


def broadcast_to(values, shape) -> np.ndarray:
    return _shaped(shape, np.asarray(values).dtype)
