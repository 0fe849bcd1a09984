"""A literal, slow NCTL for regression: the NCTL of ``docs/algorithm.md`` §1-§5 whose neurons are the
Gaussian GLN neurons of §8.

Only for tests. Imports nothing from ``nctl``: the caller passes in the gating hyperplanes (read from the
learner). Every neuron is one FMN process (``tests.reference.fmn_reference.LiteralFMN``) over a Gaussian
neuron (``GaussianNeuron`` below), whose maths (effective weights, prediction, gradient step, gating) is
``tests/reference/gaussian_gln.py``'s. What changes from the Bernoulli NCTL (``nctl_literal.py``):

* a member's state is a ``[C, K]`` weight matrix, every weight fresh at ``1/K``; at its context ``c`` it
  predicts ``(mu, lambda)`` from its inputs ``u`` ([K] Gaussians (mean, precision)) and learns by the
  projected gradient step of §8.2;
* members are scored by ``log N(x; mu, 1/lambda)`` wherever the Bernoulli version uses ``log q(x)``: the
  members' log likelihoods, the tree weights and the pool tests of §4.5 (tie tolerance 1e-6, §4.8, as
  for float32 predictions: the engine's predictions are float32);
* a neuron's output is the FMN mixture over levels ``j`` and members ``m`` with weights
  ``w = pi_j alpha_m``, moment matched to one Gaussian: ``mean = sum w mu``,
  ``variance = sum w (1/lambda + (mu - mean)^2)``, output ``(mean, 1/variance)``;
* layer 0's inputs are ``N(clip(z_j, +-5), 1)`` then the bias Gaussians ``N(-1, 1), N(0, 1), N(1, 1)``;
  a higher layer's are the outputs of the layer below, then the bias Gaussians;
* one network; raw targets are standardised by their running mean and population standard deviation
  (Welford, float64; the scale is 1 while all targets are equal): the network learns
  ``(y_t - mean_t) / scale_t`` (statistics including ``y_t``), and the reported prediction of ``y_t`` is
  ``mean_{t-1} + scale_{t-1} * network mean`` with variance ``scale_{t-1}^2 / network precision``.

Precision: features arrive as float32 (as the learner casts them) and the standardised target is rounded
to float32 (the engine's targets are float32); everything else (weights, inputs of every layer,
predictions, the mixture, every log likelihood, posterior and tree weight) is Python floats (float64).
The engine keeps weights, inputs and predictions in float32, so the two agree to a tolerance.

Records (§4.3) keep, for every step, ``z``, every neuron's context, every layer's inputs as they were at
that step and the standardised target. Reservoirs are assumed at least as long as the stream.
``max_depth`` is ``D_max`` of §6.3 (the learner's ``depth``, or 20 when it grows; bounded mode only).
"""

from __future__ import annotations

import math

import numpy as np

from tests.reference.fmn_reference import EVENT_KINDS, LiteralFMN
from tests.reference.gaussian_gln import BIAS, FEATURE_BOUND, Settings, clip, context, neuron_predict, neuron_update


def gaussian_log_density(x, mean, precision):
    """``log N(x; mean, 1/precision)``, float64."""
    return 0.5 * (math.log(precision / (2.0 * math.pi)) - precision * (x - mean) ** 2)


class GaussianNeuron:
    """The Gaussian neuron of §8 as a base model of ``LiteralFMN``: the state is a ``[C, K]`` weight matrix
    (a list of C lists of K floats), the input of a step is ``(context, u)`` with ``u`` the K input
    Gaussians ``(mean, precision)`` (bias last)."""

    tie_tolerance = 1e-6  # §4.8, for float32 predictions (the engine's)

    def __init__(self, n_contexts, n_inputs, settings: Settings):
        self.shape = (n_contexts, n_inputs)
        self.settings = settings

    def fresh(self):
        n_contexts, n_inputs = self.shape
        return [[1.0 / n_inputs] * n_inputs for _ in range(n_contexts)]

    def copy(self, weights):
        return [list(row) for row in weights]

    def p1(self, weights, inp):
        """The member's prediction ``(mean, precision)`` (the name is LiteralFMN's)."""
        c, u = inp
        return neuron_predict(weights[c], u, self.settings)

    def logp(self, weights, inp, x):
        mean, precision = self.p1(weights, inp)
        return gaussian_log_density(x, mean, precision)

    def learn(self, weights, inp, x):
        """The gradient step of the row of the context, in place."""
        c, u = inp
        weights[c] = neuron_update(weights[c], u, x, self.settings)
        return weights

    def mix(self, weighted):
        """The moment-matched mixture ``(mean, 1/variance)`` of the members' Gaussians, weighted
        ``pi_j alpha_m``; ``weighted = [(pi_j, [(alpha_m, (mu_m, lambda_m)), ...]), ...]``."""
        parts = [(pi_j * a, mu, lam) for pi_j, members in weighted for a, (mu, lam) in members]
        mean = 0.0
        for w, mu, _ in parts:
            mean += w * mu
        variance = 0.0
        for w, mu, lam in parts:
            variance += w * (1.0 / lam + (mu - mean) ** 2)
        return mean, 1.0 / variance

    # rows (bounded mode, §5.3): a step uses the row of its context
    def row_key(self, inp):
        return int(inp[0])

    def row(self, weights, c):
        return list(weights[c])

    def with_rows(self, weights, rows):
        out = self.copy(weights)
        for c, row in rows.items():
            out[c] = list(row)
        return out


class Neuron:
    """Neuron (layer i, index n): its hyperplanes and its FMN process over its Gaussian neuron."""

    def __init__(self, layer, index, normals, offsets, records, fmn_kwargs, base):
        self.layer, self.index = layer, index
        self.normals = np.asarray(normals, dtype=np.float32)  # [s, d]
        self.offsets = np.asarray(offsets, dtype=np.float32)  # [s]
        self.records = records
        self.fmn = LiteralFMN(base, self.example, **fmn_kwargs)

    def context(self, z):
        return context(self.normals, self.offsets, z)

    def example(self, rid):
        """The neuron's input and standardised target on a stored record (§4.3)."""
        record = self.records[rid]
        return (record["contexts"][self.layer][self.index], record["inputs"][self.layer]), record["target"]


class LiteralNCTLRegressor:
    """NCTL over Gaussian neurons with the learner's running standardisation of the targets.

    ``hyperplanes``: per layer ``(normals [N_i, s, d], offsets [N_i, s])`` of the one network.
    """

    def __init__(self, hyperplanes, *, layer_sizes, n_features, context_bits=2, learning_rate=0.01,
                 min_variance=0.1, max_variance=10.0, max_weight=100.0, max_mean=10.0, pool_size=15,
                 min_segment=32, depth=None, refine_threshold=0.0, skip_threshold=0.0, joint_evidence=False,
                 eviction="fifo", split_prob=0.5, trained_members=None, max_depth=None):
        settings = Settings(learning_rate, min_variance, max_variance, max_weight, max_mean)
        fmn_kwargs = {"pool_size": pool_size, "min_segment": min_segment, "depth": depth, "split_prob": split_prob,
                      "refine_threshold": refine_threshold, "skip_threshold": skip_threshold,
                      "joint_evidence": joint_evidence, "eviction": eviction, "trained_members": trained_members,
                      "max_depth": max_depth}
        assert len(hyperplanes) == len(layer_sizes)
        self.records = []
        self.t = 0
        self.stats = (0.0, 0.0, 0.0)  # count, mean, sum of squared deviations of the raw targets
        self.outputs = []  # per step: the network's pre-update (mean, precision), standardised units
        self.layers, fan_in = [], n_features + len(BIAS)
        for i, size in enumerate(layer_sizes):
            normals, offsets = (np.asarray(a) for a in hyperplanes[i])
            assert normals.shape == (size, context_bits, n_features) and offsets.shape == (size, context_bits)
            base = GaussianNeuron(2**context_bits, fan_in, settings)
            self.layers.append([Neuron(i, n, normals[n], offsets[n], self.records, fmn_kwargs, base)
                                for n in range(size)])
            fan_in = size + len(BIAS)
        assert len(self.layers[-1]) == 1, "the last layer has one neuron"

    def standardise(self, y):
        """Welford's update with the raw target ``y``. Returns the mean and scale before it and the
        target standardised by the statistics that include it (rounded to float32)."""
        count, mean, squares = self.stats
        before = (mean, scale_of(count, squares))
        count += 1.0
        delta = y - mean
        mean += delta / count
        squares += delta * (y - mean)
        self.stats = (count, mean, squares)
        return before, float(np.float32((y - mean) / scale_of(count, squares)))

    def step(self, z, y):
        """One step (§5.2). Returns the pre-update prediction of ``y``: (mean, variance), raw units."""
        self.t += 1
        t = self.t
        z = np.asarray(z, dtype=np.float32)
        (shift, scale), x = self.standardise(float(y))
        u = [(clip(float(v), -FEATURE_BOUND, FEATURE_BOUND), 1.0) for v in z] + BIAS
        rid = len(self.records)
        record = {"z": z, "target": x, "inputs": [], "contexts": []}
        # forward pass: every neuron's FMN mixture, fed on as the next layer's inputs
        for neurons in self.layers:
            contexts = [neuron.context(z) for neuron in neurons]
            outputs = [neuron.fmn.predict((c, u)) for neuron, c in zip(neurons, contexts)]
            record["inputs"].append(u)
            record["contexts"].append(contexts)
            u = outputs + BIAS
        mean, precision = outputs[0]
        self.outputs.append((mean, precision))
        self.records.append(record)
        # learning: every member of every node of every neuron, with the inputs it saw
        for i, neurons in enumerate(self.layers):
            for n, neuron in enumerate(neurons):
                neuron.fmn.learn((record["contexts"][i][n], record["inputs"][i]), x, rid)
        # boundary processing of step t + 1 (§4.2: done as soon as step t is learned)
        for neurons in self.layers:
            for neuron in neurons:
                if neuron.fmn.growing or t < 2**neuron.fmn.D:
                    neuron.fmn.boundary(t + 1)
        return shift + scale * mean, scale * scale / precision

    def run(self, X, y):
        """Predicted means [n] and variances [n] (float64, raw units), each before its target is learned."""
        out = np.array([self.step(z, target) for z, target in zip(X, y)], dtype=np.float64).reshape(-1, 2)
        return out[:, 0], out[:, 1]

    def neurons(self):
        return [neuron for neurons in self.layers for neuron in neurons]

    def pool_events(self):
        """Cumulative (refine, skip, add, evict) per layer and neuron, nested as ``LiteralNCTL``'s (one
        network): ``[network][layer] -> int array [N, 4]``."""
        return [[np.array([[neuron.fmn.events[kind] for kind in EVENT_KINDS] for neuron in neurons], dtype=np.int64)
                 for neurons in self.layers]]


def scale_of(count, squares):
    """The population standard deviation, or 1 while every target so far is equal."""
    return math.sqrt(squares / count) if squares > 0 else 1.0
