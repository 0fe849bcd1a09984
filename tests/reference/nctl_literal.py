"""A literal, slow NCTL network written from ``docs/algorithm.md`` §1, §2 and §5 only.

Only for tests. Imports nothing from ``nctl``: the caller passes in the random gating hyperplanes
(read from the learner); initial weights follow §1.3 (zeros, or 1/K with ``weight_init="uniform"``).

Structure, as literal as possible: per class network, per layer, per neuron, one FMN process
(``tests.reference.fmn_reference.LiteralFMN``: one node object per tree level, an explicit ``[C, K]``
weight matrix for every member of every node, the PTW recursion written out, the pool rules of §4)
over the neuron's own gated geometric mixer (``GGM`` below). Weights, inputs, the dot product, the
sigmoid, the clip and the update are numpy float32 (§1.3); every log likelihood, posterior and tree
weight is a Python float (float64), with ``log q(x)`` taken of the float32 ``q`` converted to float64.

``max_depth`` is the ``D_max`` of §6.3 (the learner's ``depth``, or 20 when it grows): it sets the
number of pool cells, which matters in bounded mode only (``tests/reference/fmn_reference.py``).

Records (§4.3) are kept for every step: ``z_t``, every class network's input vector at every layer,
and ``y_t``. Reservoirs are assumed at least as long as the stream (nothing is ever sampled).
"""

from __future__ import annotations

import math

import numpy as np

from tests.reference.fmn_reference import EVENT_KINDS, LiteralFMN

F32 = np.float32


def sigmoid32(a):
    with np.errstate(over="ignore"):
        return F32(1.0) / (F32(1.0) + np.exp(-F32(a)))


class GGM:
    """The gated geometric mixer of §1 as a base model: the state is the ``[C, K]`` float32 weight
    matrix, the input of a step is ``(context, u)`` with ``u`` the float32 input logits (bias last)."""

    tie_tolerance = 1e-6  # §4.8, for float32 predictions: above the rounding that parts platforms

    def __init__(self, n_contexts, n_inputs, learning_rate, prob_eps, max_weight, weight_init):
        self.shape = (n_contexts, n_inputs)
        self.lr, self.wmax = F32(learning_rate), F32(max_weight)
        self.lo, self.hi = F32(prob_eps), F32(1.0 - prob_eps)
        self.init = F32(0.0) if weight_init == "zeros" else F32(1.0 / n_inputs)
        if weight_init not in ("zeros", "uniform"):
            raise ValueError(weight_init)

    def fresh(self):
        return np.full(self.shape, self.init, dtype=F32)

    def copy(self, weights):
        return weights.copy()

    def p1(self, weights, inp):
        """q = clip(sigma(W[c] . u), eps, 1 - eps), float32."""
        c, u = inp
        a = np.dot(weights[c], u)
        assert a.dtype == F32
        return np.clip(sigmoid32(a), self.lo, self.hi)

    def logp(self, weights, inp, x):
        q = float(self.p1(weights, inp))
        return math.log(q) if x else math.log(1.0 - q)

    def learn(self, weights, inp, x):
        """W[c] <- clip(W[c] - eta (q - x) u, -w_max, w_max), with the clipped q, float32, in place."""
        c, u = inp
        q = self.p1(weights, inp)
        step = self.lr * (q - F32(x))
        weights[c] = np.clip(weights[c] - step * u, -self.wmax, self.wmax)
        assert weights.dtype == F32
        return weights

    # rows (bounded mode, §5.3): a step uses the row of its context
    def row_key(self, inp):
        return int(inp[0])

    def row(self, weights, c):
        return weights[c].copy()

    def with_rows(self, weights, rows):
        """A copy of ``weights`` with the rows ``{context: row}`` put in."""
        out = weights.copy()
        for c, row in rows.items():
            out[c] = row
        return out


class Neuron:
    """Neuron (network k, layer i, index n): its hyperplanes and its FMN process over its GGM."""

    def __init__(self, network, layer, normals, offsets, records, fmn_kwargs, ggm):
        self.network, self.layer = network, layer
        self.normals = np.asarray(normals, dtype=F32)  # [s, d]
        self.offsets = np.asarray(offsets, dtype=F32)  # [s]
        self.records = records
        self.fmn = LiteralFMN(ggm, self.example, **fmn_kwargs)

    def context(self, z):
        """§1.2: bit h = 1[v_h . z > o_h], c = sum_h bit_h 2^h."""
        c = 0
        for h in range(len(self.offsets)):
            if np.dot(self.normals[h], z) > self.offsets[h]:
                c += 2**h
        return c

    def example(self, rid):
        """The neuron's input and target on a stored record (§4.3)."""
        record = self.records[rid]
        u = record["inputs"][self.network][self.layer]
        x = record["targets"][self.network]
        return (self.context(record["z"]), u), x


class LiteralNCTL:
    """NCTL (§5) as ``n_classes`` one-vs-all networks (one for binary, positive label 1)."""

    def __init__(self, hyperplanes, *, layer_sizes, n_features, context_bits=2, learning_rate=0.05,
                 pool_size=15, depth=None, min_segment=32, refine_threshold=0.0, skip_threshold=0.0,
                 joint_evidence=False, eviction="fifo", split_prob=0.5, n_classes=2, weight_init="zeros",
                 prob_eps=0.01, max_weight=200.0, trained_members=None, max_depth=None):
        self.n_classes = n_classes
        self.n_networks = 1 if n_classes == 2 else n_classes
        self.eps = prob_eps
        self.bound = F32(math.log((1.0 - prob_eps) / prob_eps))  # logit(1 - eps)
        self.records = []
        self.t = 0
        fmn_kwargs = dict(pool_size=pool_size, min_segment=min_segment, depth=depth, split_prob=split_prob,
                          refine_threshold=refine_threshold, skip_threshold=skip_threshold,
                          joint_evidence=joint_evidence, eviction=eviction, trained_members=trained_members,
                          max_depth=max_depth)
        assert len(hyperplanes) == self.n_networks
        self.networks = []
        for k in range(self.n_networks):
            assert len(hyperplanes[k]) == len(layer_sizes)
            layers, fan_in = [], n_features + 1
            for i, size in enumerate(layer_sizes):
                normals, offsets = (np.asarray(a) for a in hyperplanes[k][i])
                assert normals.shape == (size, context_bits, n_features) and offsets.shape == (size, context_bits)
                ggm = GGM(2**context_bits, fan_in, learning_rate, prob_eps, max_weight, weight_init)
                layers.append([Neuron(k, i, normals[n], offsets[n], self.records, fmn_kwargs, ggm)
                               for n in range(size)])
                fan_in = size + 1
            assert len(layers[-1]) == 1, "the last layer has one neuron"
            self.networks.append(layers)

    def target(self, k, y):
        return int(y == 1) if self.n_networks == 1 else int(y == k)

    def input_logits(self, probs):
        """Logits of the previous layer's outputs, clipped, as float32, with the bias input last."""
        u = [min(max(math.log(p) - math.log1p(-p), -float(self.bound)), float(self.bound)) for p in probs]
        return np.array(u + [1.0], dtype=F32)

    def step(self, z, y):
        """One step (§5.2). Returns the pre-update output of every class network (float64)."""
        self.t += 1
        t = self.t
        z = np.asarray(z, dtype=F32)
        rid = len(self.records)
        record = {"z": z, "y": y, "inputs": [], "targets": []}
        outputs = []
        # forward pass: every member of every node of every neuron predicts; FMN outputs feed on
        for k, layers in enumerate(self.networks):
            u = np.append(np.clip(z, -self.bound, self.bound), F32(1.0)).astype(F32)  # layer 0 + bias
            inputs, seen = [], []
            for neurons in layers:
                inputs.append(u)
                contexts = [neuron.context(z) for neuron in neurons]
                probs = [neuron.fmn.predict((c, u)) for neuron, c in zip(neurons, contexts)]
                seen.append(contexts)
                u = self.input_logits(probs)
            outputs.append(probs[0])
            record["inputs"].append(inputs)
            record["targets"].append(self.target(k, y))
            record.setdefault("contexts", []).append(seen)
        self.records.append(record)
        # learning: every member of every node of every neuron, with the inputs it saw
        for k, layers in enumerate(self.networks):
            x = record["targets"][k]
            for i, neurons in enumerate(layers):
                for n, neuron in enumerate(neurons):
                    neuron.fmn.learn((record["contexts"][k][i][n], record["inputs"][k][i]), x, rid)
        # boundary processing of step t + 1 (§4.2: done as soon as step t is learned)
        for layers in self.networks:
            for neurons in layers:
                for neuron in neurons:
                    fmn = neuron.fmn
                    if fmn.growing or t < 2**fmn.D:
                        fmn.boundary(t + 1)
        return outputs

    def prediction(self, outputs):
        """The learner's prediction: P(y = 1) for binary, else the outputs divided by their sum."""
        if self.n_networks == 1:
            return outputs[0]
        total = sum(outputs)
        return [p / total for p in outputs]

    def run(self, X, y):
        return np.array([self.prediction(self.step(z, label)) for z, label in zip(X, y)])

    def neurons(self):
        return [neuron for layers in self.networks for neurons in layers for neuron in neurons]

    def reuses_while_read(self):
        """How many pool writes, over every neuron, went into a cell that a continuing node read (§6.3)."""
        return sum(neuron.fmn.reuses_while_read for neuron in self.neurons())

    def pool_events(self):
        """Cumulative (refine, skip, add, evict) per class network, layer and neuron: nested lists
        ``[network][layer] -> int array [N, 4]``."""
        return [[np.array([[neuron.fmn.events[kind] for kind in EVENT_KINDS] for neuron in neurons], dtype=np.int64)
                 for neurons in layers] for layers in self.networks]
