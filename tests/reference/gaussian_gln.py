"""A literal, slow Gaussian GLN written from ``docs/algorithm.md`` §8 only (the GGLN paper's product of
Gaussians with the constraints and defaults stated there).

Only for tests. Imports nothing from ``nctl``: the caller passes in the gating hyperplanes (read from the
learner) and the settings. One neuron at a time, one input at a time, in Python floats (float64); the
gradient is the derivative of ``-log N(x; M(w), 1/L(w))`` written in its expanded form
``L/2 (x - M)^2 - log(L)/2``, with ``L(w) = sum_k w_k lam_k`` and ``M(w) = sum_k w_k lam_k mu_k / L(w)``.
"""

from __future__ import annotations

import numpy as np

FEATURE_BOUND = 5.0
BIAS = [(-1.0, 1.0), (0.0, 1.0), (1.0, 1.0)]  # (mean, precision) of the bias Gaussians of every layer


class Settings:
    def __init__(self, learning_rate, min_variance, max_variance, max_weight, max_mean):
        self.learning_rate = learning_rate
        self.min_variance = min_variance
        self.max_variance = max_variance
        self.max_weight = max_weight
        self.max_mean = max_mean


def clip(value, low, high):
    return min(max(value, low), high)


def effective_weights(weights, inputs, s: Settings):
    """Clip every weight to the box, then move the vector along the input precisions until the output
    precision lies in [1/var_max, 1/var_min] (the nearest point of that slab). Returns weights, precision."""
    w = [clip(float(v), -s.max_weight, s.max_weight) for v in weights]
    raw = 0.0
    for wk, (_, lam) in zip(w, inputs):
        raw += wk * lam
    precision = clip(raw, 1.0 / s.max_variance, 1.0 / s.min_variance)
    norm = 0.0
    for _, lam in inputs:
        norm += lam * lam
    return [wk + (precision - raw) * lam / norm for wk, (_, lam) in zip(w, inputs)], precision


def neuron_predict(weights, inputs, s: Settings):
    """(mean, precision) of the weighted product of the input Gaussians ``inputs`` [(mean, precision)]."""
    w, precision = effective_weights(weights, inputs, s)
    weighted = 0.0
    for wk, (mu, lam) in zip(w, inputs):
        weighted += wk * lam * mu
    return clip(weighted / precision, -s.max_mean, s.max_mean), precision


def neuron_update(weights, inputs, x, s: Settings):
    """One gradient step on the neuron's loss at its effective weights, then the clip to the box."""
    w, precision = effective_weights(weights, inputs, s)
    mean, _ = neuron_predict(weights, inputs, s)
    new = []
    for wk, (mu, lam) in zip(w, inputs):
        # d/dw_k of L (x - M)^2 / 2 - log(L) / 2, with dL/dw_k = lam and d(L M)/dw_k = lam mu
        grad = lam * (x * x - 2.0 * x * mu + 2.0 * mean * mu - mean * mean) / 2.0 - lam / (2.0 * precision)
        new.append(clip(wk - s.learning_rate * grad, -s.max_weight, s.max_weight))
    return new


def context(normals, offsets, z):
    """The neuron's context: bit h is 1 where its hyperplane h has z strictly on its positive side."""
    c = 0
    for h in range(len(offsets)):
        margin = 0.0
        for v, zj in zip(normals[h], z):
            margin += float(v) * float(zj)
        if margin > float(offsets[h]):
            c += 2**h
    return c


class GaussianGLN:
    """Layers of Gaussian neurons; ``planes[i] = (normals [N_i, s, d], offsets [N_i, s])``."""

    def __init__(self, planes, n_features, s: Settings):
        self.planes, self.s = planes, s
        self.weights = []  # per layer, per neuron, per context: a list of weights
        fan_in = n_features + len(BIAS)
        for normals, _ in planes:
            n_neurons, n_bits = normals.shape[0], normals.shape[1]
            self.weights.append([[[1.0 / fan_in] * fan_in for _ in range(2**n_bits)] for _ in range(n_neurons)])
            fan_in = n_neurons + len(BIAS)

    def base_inputs(self, z):
        return [(clip(float(v), -FEATURE_BOUND, FEATURE_BOUND), 1.0) for v in z] + BIAS

    def step(self, z, x):
        """Predict ``x`` from ``z`` (the output neuron's (mean, precision)), then every neuron learns."""
        inputs, seen = self.base_inputs(z), []
        for i, (normals, offsets) in enumerate(self.planes):
            out = []
            for n in range(normals.shape[0]):
                c = context(normals[n], offsets[n], z)
                out.append(neuron_predict(self.weights[i][n][c], inputs, self.s))
                seen.append((i, n, c, inputs))
            inputs = out + BIAS
        for i, n, c, neuron_inputs in seen:
            self.weights[i][n][c] = neuron_update(self.weights[i][n][c], neuron_inputs, float(x), self.s)
        return out[0]

    def run(self, Z, y):
        return np.array([self.step(z, x) for z, x in zip(Z, y)])
