"""The native engine's Gaussian Gated Linear Network (``gaussian_gln.cc``, docs/algorithm.md §8): the
``GLNRegressor``'s layers, as numpy arrays in the JAX engine's layout, learned and predicted in place by C++
through ``ctypes``."""

from __future__ import annotations

import ctypes

import numpy as np

from nctl import engines
from nctl.native.gln import LayerStruct, layer_structs


class _GaussianClips(ctypes.Structure):
    _fields_ = [(name, ctypes.c_float) for name in ("min_precision", "max_precision", "max_weight", "max_mean",
                                                     "feature_bound", "learning_rate")]


class _GaussianNetwork(ctypes.Structure):
    _fields_ = [("nets", ctypes.c_int64), ("n_layers", ctypes.c_int64), ("features", ctypes.c_int64),
                ("bits", ctypes.c_int64), ("layers", ctypes.POINTER(LayerStruct)), ("clips", _GaussianClips)]


def clips(rows) -> _GaussianClips:
    """The Gaussian rows' float32 constants as the JAX engine rounds them (``nctl.core.gaussian``)."""
    from nctl.core.gaussian import FEATURE_BOUND  # here: nctl.core imports JAX, which the native engine needs not

    return _GaussianClips(np.float32(1.0 / rows.max_variance), np.float32(1.0 / rows.min_variance),
                          np.float32(rows.max_weight), np.float32(rows.max_mean), np.float32(FEATURE_BOUND),
                          np.float32(rows.learning_rate))


class GaussianGLNCalls:
    """Learn and predict on the Gaussian GLN ``layers`` (``nctl.core.gln.Layer`` per layer, a leading axis of
    one network, numpy arrays from ``nctl.native.state.host_arrays``) with the row model ``rows``
    (``GaussianRows``)."""

    def __init__(self, layers, rows):
        library = engines.native_library()
        self.layers = layers
        normals = layers[0].gates.normals
        self._nets = normals.shape[0]
        self._layer_array = layer_structs(layers)
        self._network = _GaussianNetwork(self._nets, len(layers), normals.shape[-1], normals.shape[2],
                                         self._layer_array, clips(rows))
        self._learn, self._predict = library.nctl_gaussian_gln_learn, library.nctl_gaussian_gln_predict
        self._learn.restype = self._predict.restype = None
        self._learn.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_int64, ctypes.c_void_p]
        self._predict.argtypes = [ctypes.c_void_p] * 2 + [ctypes.c_int64, ctypes.c_void_p]
        # one row goes through buffers made here once: its arguments are made once too (ctypes passes its own
        # objects faster than it converts numbers)
        self._row, self._target = np.zeros((1, normals.shape[-1]), np.float32), np.zeros(1, np.float32)
        self._out = np.zeros((1, self._nets, 2), np.float32)
        network, row, target, out = (ctypes.c_void_p(a) for a in (
            ctypes.addressof(self._network), self._row.ctypes.data, self._target.ctypes.data, self._out.ctypes.data))
        self._row_learn_args = (network, row, target, ctypes.c_int64(1), out)
        self._row_predict_args = (network, row, ctypes.c_int64(1), out)

    def learn(self, Z: np.ndarray, targets: np.ndarray) -> np.ndarray:
        """Learn the rows ``Z`` [n, d] with the (standardised) targets [n] in order; their pre-update
        ``(mean, precision)`` [n, nets, 2] (float32)."""
        if len(Z) == 1:
            self._row[...], self._target[...] = Z, targets
            self._learn(*self._row_learn_args)
            return self._out.copy()
        Z, targets = np.ascontiguousarray(Z, np.float32), np.ascontiguousarray(targets, np.float32)
        out = np.empty((len(Z), self._nets, 2), np.float32)
        self._learn(ctypes.addressof(self._network), Z.ctypes.data, targets.ctypes.data, len(Z), out.ctypes.data)
        return out

    def predict(self, Z: np.ndarray) -> np.ndarray:
        """Frozen ``(mean, precision)`` [n, nets, 2] (float32) of the rows ``Z`` [n, d]."""
        if len(Z) == 1:
            self._row[...] = Z
            self._predict(*self._row_predict_args)
            return self._out.copy()
        Z = np.ascontiguousarray(Z, np.float32)
        out = np.empty((len(Z), self._nets, 2), np.float32)
        self._predict(ctypes.addressof(self._network), Z.ctypes.data, len(Z), out.ctypes.data)
        return out
