"""The native engine's Gated Linear Network (``gln.cc``): the GLN learner's state, as numpy arrays in the
JAX engine's layout, learned and predicted in place by C++ through ``ctypes``.

A ``GLNCalls`` is made once per state and holds the C structure that points at its arrays, so a call
passes only the rows: its overhead is a few microseconds (``benchmarks/per_row.py``).
"""

from __future__ import annotations

import ctypes

import numpy as np

from nctl import engines


class LayerStruct(ctypes.Structure):
    """``nctl::Layer`` (layer.h): one layer's arrays of every class network, by address."""
    _fields_ = [("normals", ctypes.c_void_p), ("offsets", ctypes.c_void_p), ("weights", ctypes.c_void_p),
                ("neurons", ctypes.c_int64)]


def layer_structs(layers) -> ctypes.Array:
    """The ``LayerStruct`` of each layer of ``layers`` (``nctl.core.gln.Layer``, numpy arrays)."""
    return (LayerStruct * len(layers))(*[
        LayerStruct(layer.gates.normals.ctypes.data, layer.gates.offsets.ctypes.data, layer.weights.ctypes.data,
                    layer.weights.shape[1]) for layer in layers])


class _Clips(ctypes.Structure):
    _fields_ = [("low", ctypes.c_float), ("high", ctypes.c_float), ("max_weight", ctypes.c_float),
                ("feature_bound", ctypes.c_float)]


class _Forward(ctypes.Structure):
    _fields_ = [("row", ctypes.c_void_p), ("contexts", ctypes.c_void_p), ("predictions", ctypes.c_void_p),
                ("inputs", ctypes.c_void_p), ("neurons", ctypes.c_int64), ("width", ctypes.c_int64),
                ("kept", ctypes.c_int64)]


class _Network(ctypes.Structure):
    _fields_ = [("nets", ctypes.c_int64), ("n_layers", ctypes.c_int64), ("features", ctypes.c_int64),
                ("bits", ctypes.c_int64), ("layers", ctypes.POINTER(LayerStruct)), ("clips", _Clips),
                ("learning_rate", ctypes.c_float), ("forward", ctypes.POINTER(_Forward))]


def clips(rows) -> _Clips:
    """The GGM's float32 clips as the JAX engine rounds them (``nctl.core.rows.GGMRows``, ``mixing``)."""
    from nctl.core import mixing  # here: nctl.core imports JAX, which the native engine needs not

    return _Clips(np.float32(rows.prob_eps), np.float32(1.0 - rows.prob_eps), np.float32(rows.max_weight),
                  np.float32(mixing.logit_bound(rows.prob_eps)))


class GLNCalls:
    """Learn and predict on the GLN state ``layers`` (``nctl.core.gln.Layer`` per layer, a leading class
    axis, numpy arrays from ``nctl.native.state.host_arrays``), with the row model ``rows`` (``GGMRows``);
    class network ``g`` learns the label ``positive[g]`` as 1. One row goes through buffers made here once,
    whose addresses are known: its call converts no array."""

    def __init__(self, layers, rows, positive: np.ndarray):
        library = engines.native_library()
        self.layers = layers
        normals = layers[0].gates.normals
        self._nets, features = normals.shape[0], normals.shape[-1]
        self._layer_array = layer_structs(layers)
        # the last one-row prediction's forward pass (gln.cc): a row, each neuron's context and prediction,
        # each layer's inputs, per class network
        neurons, width = sum(layer.weights.shape[1] for layer in layers), sum(layer.weights.shape[3] for layer in layers)
        self._kept = (np.zeros(features, np.float32), np.zeros(self._nets * neurons, np.int64),
                      np.zeros(self._nets * neurons, np.float32), np.zeros(self._nets * width, np.float32))
        self._forward = _Forward(*(a.ctypes.data for a in self._kept), neurons, width, 0)
        self._network = _Network(self._nets, len(layers), features, normals.shape[2], self._layer_array,
                                 clips(rows), np.float32(rows.learning_rate), ctypes.pointer(self._forward))
        self._positive = np.ascontiguousarray(positive, np.int32)
        self._row, self._label = np.zeros((1, features), np.float32), np.zeros(1, np.int32)
        self._out = np.zeros((1, self._nets), np.float32)
        self._learn, self._predict = library.nctl_gln_learn, library.nctl_gln_predict
        self._learn.restype = self._predict.restype = None
        self._learn.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_int64] + [ctypes.c_void_p] * 2
        self._predict.argtypes = [ctypes.c_void_p] * 2 + [ctypes.c_int64, ctypes.c_void_p]
        self._addresses = (ctypes.addressof(self._network), self._row.ctypes.data, self._label.ctypes.data,
                           self._positive.ctypes.data, self._out.ctypes.data)
        # a row's arguments, made once: ctypes passes its own objects faster than it converts numbers
        network, row, label, positive, out = map(ctypes.c_void_p, self._addresses)
        self._row_learn_args = (network, row, label, ctypes.c_int64(1), positive, out)
        self._row_predict_args = (network, row, ctypes.c_int64(1), out)

    def learn(self, Z: np.ndarray, Y: np.ndarray) -> np.ndarray:
        """Learn the rows ``Z`` [n, d] with labels ``Y`` [n] in order; their pre-update predictions [n, nets]
        (float32)."""
        if len(Z) == 1:
            self._row[...], self._label[...] = Z, Y
            self._learn(*self._row_learn_args)
            return self._out.copy()
        network, _, _, positive, _ = self._addresses
        Z, Y = np.ascontiguousarray(Z, np.float32), np.ascontiguousarray(Y, np.int32)
        predictions = np.empty((len(Z), self._nets), np.float32)
        self._learn(network, Z.ctypes.data, Y.ctypes.data, len(Z), positive, predictions.ctypes.data)
        return predictions

    def predict(self, Z: np.ndarray) -> np.ndarray:
        """Frozen predictions [n, nets] (float32) of the rows ``Z`` [n, d]."""
        if len(Z) == 1:
            self._row[...] = Z
            self._predict(*self._row_predict_args)
            return self._out.copy()
        Z = np.ascontiguousarray(Z, np.float32)
        predictions = np.empty((len(Z), self._nets), np.float32)
        self._predict(self._addresses[0], Z.ctypes.data, len(Z), predictions.ctypes.data)
        return predictions
