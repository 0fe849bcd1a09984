"""Gated Linear Network: layers of neurons trained online by their own local log loss.

Layer 0 is ``p_0 = sigma(z)``; every neuron of layer ``i`` mixes the previous layer's predictions
(plus the bias ``sigma(1)``) with the weight row picked by its gating of ``z``; the last layer has
one neuron (docs/algorithm.md §2). Every neuron learns from the same target with the pre-update inputs of
this step, so no back-propagation is needed. What a row predicts and how it learns is the row model's, as
in NCTL's engine: the GGM (``nctl.core.rows.GGMRows``) for a GLN, the product of Gaussians
(``nctl.core.gaussian.GaussianRows``, §8) for a Gaussian GLN, whose predictions are ``(mean, precision)``
pairs and whose inputs and bias are Gaussians. A network is written for one output and vmapped over a
leading class axis for one-vs-all (``rows.target``).
"""

from __future__ import annotations

from typing import NamedTuple

from nctl.core import gating, programs, threefry
from nctl.deferred import jax, jnp


class Layer(NamedTuple):
    gates: gating.Gates
    weights: jax.Array  # [N, C, K]: a row per context, K = rows.width(inputs + 1 for the bias)


def check_layer_sizes(layer_sizes) -> tuple[int, ...]:
    sizes = tuple(int(n) for n in layer_sizes)
    if not sizes or min(sizes) < 1 or sizes[-1] != 1:
        raise ValueError(f"layer_sizes must be positive and end with a single output neuron, got {layer_sizes}")
    return sizes


def fan_ins(n_features: int, layer_sizes) -> tuple[int, ...]:
    """Inputs of each layer including the bias: ``(d + 1, N_1 + 1, ..., N_{L-1} + 1)``."""
    return tuple(n + 1 for n in (n_features,) + tuple(layer_sizes[:-1]))


programs.register(gating.Gates)  # hyperplanes are arguments of the programs stored on disk


def network_gates(seed: int, n_nets: int, n_features: int, layer_sizes: tuple,
                  context_bits: int) -> tuple[gating.Gates, ...]:
    """The hyperplanes of every layer of the ``n_nets`` class networks of a learner of seed ``seed``
    (``gating.network_gates`` from ``threefry.key(seed)``, in numpy): per layer ``Gates(normals [nets, N_i, s,
    d], offsets [nets, N_i, s])``; GLN and NCTL with the same seed and layers get the same."""
    return gating.network_gates(threefry.key(seed), n_nets, n_features, layer_sizes, context_bits)


def init(gates: tuple[gating.Gates, ...], n_features: int, layer_sizes, context_bits: int,
         rows) -> tuple[Layer, ...]:
    """A fresh network for one output, with the hyperplanes ``gates`` (per layer)."""
    weights = [jnp.full((n, 2**context_bits, rows.width(k)), rows.init_value(k), rows.dtype)
               for n, k in zip(layer_sizes, fan_ins(n_features, layer_sizes))]
    return tuple(Layer(g, w) for g, w in zip(gates, weights))


def _layer_rows(layer: Layer, z):
    neurons = jnp.arange(layer.weights.shape[0])
    contexts = gating.contexts(layer.gates, z)
    return neurons, contexts, layer.weights[neurons, contexts]  # [N, K]


def predict(layers: tuple[Layer, ...], z, rows):
    """The output neuron's prediction for ``z`` (``P(x = 1 | z)`` for a GGM), without learning."""
    u = rows.base_inputs(z)
    for layer in layers:
        _, _, w = _layer_rows(layer, z)
        q = rows.predict(w, u)
        u = rows.layer_inputs(q)
    return q[0]


def step(layers: tuple[Layer, ...], z, x, rows):
    """Predict ``x`` from ``z``, then every neuron takes one step on its own loss.

    Returns the new layers and the pre-update output prediction.
    """
    u = rows.base_inputs(z)
    new_layers = []
    for layer in layers:
        neurons, contexts, w = _layer_rows(layer, z)
        q = rows.predict(w, u)
        new_layers.append(layer._replace(weights=layer.weights.at[neurons, contexts].set(rows.update(w, u, q, x))))
        u = rows.layer_inputs(q)
    return tuple(new_layers), q[0]


def run_chunk(layers: tuple[Layer, ...], Z, Y, n, positive, rows):
    """``n`` steps over rows ``Z[:n]`` [P, d], ``Y[:n]`` [P] (labels, or real targets) of every class
    network (leading class axis on ``layers``); returns the layers and the pre-update predictions [P,
    classes, ...] (``...``: the shape of one prediction of the row model, none for a GGM)."""
    step_all = jax.vmap(step, in_axes=(0, None, 0, None))

    def body(i, carry):
        layers, preds = carry
        layers, p = step_all(layers, Z[i], rows.target(Y[i], positive), rows)
        return layers, preds.at[i].set(p)

    one = jax.eval_shape(lambda *args: step_all(*args, rows)[1], layers, Z[0], rows.target(Y[0], positive))
    preds = jnp.zeros((Z.shape[0],) + one.shape, one.dtype)
    return jax.lax.fori_loop(0, n, body, (layers, preds))


def predict_many(layers: tuple[Layer, ...], Z, rows):
    """Frozen predictions [n, classes, ...] for rows ``Z`` [n, d]."""
    per_class = jax.vmap(predict, in_axes=(0, None, None))
    return jax.lax.map(lambda z: per_class(layers, z, rows), Z, batch_size=64)
