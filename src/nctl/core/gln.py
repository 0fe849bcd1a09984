"""Gated Linear Network: layers of GGM neurons trained online by their own local log loss.

Layer 0 is ``p_0 = sigma(z)``; every neuron of layer ``i`` mixes the previous layer's predictions
(plus the bias ``sigma(1)``) with the weight row picked by its gating of ``z``; the last layer has
one neuron (docs/algorithm.md §2). Every neuron learns from the same target with the pre-update inputs of
this step, so no back-propagation is needed. A network is written for one output and vmapped over
a leading class axis for one-vs-all (``targets``).
"""

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp

from nctl.core import gating, mixing, programs


class Layer(NamedTuple):
    gates: gating.Gates
    weights: jax.Array  # [N, C, K] float32, K = fan-in + 1 (bias)


def check_layer_sizes(layer_sizes) -> tuple[int, ...]:
    sizes = tuple(int(n) for n in layer_sizes)
    if not sizes or min(sizes) < 1 or sizes[-1] != 1:
        raise ValueError(f"layer_sizes must be positive and end with a single output neuron, got {layer_sizes}")
    return sizes


def fan_ins(n_features: int, layer_sizes) -> tuple[int, ...]:
    """Inputs of each layer including the bias: ``(d + 1, N_1 + 1, ..., N_{L-1} + 1)``."""
    return tuple(n + 1 for n in (n_features,) + tuple(layer_sizes[:-1]))


def init_weight_value(weight_init: str, fan_in: int) -> float:
    """Initial weight of every entry: ``zeros`` (every neuron predicts 1/2) or ``uniform`` (1/K)."""
    if weight_init == "zeros":
        return 0.0
    if weight_init == "uniform":
        return 1.0 / fan_in
    raise ValueError(f"weight_init must be 'zeros' or 'uniform', got {weight_init!r}")


def class_keys(key, n_classes: int):
    """Keys of the one-vs-all networks; GLN and NCTL with the same seed get the same gates."""
    return jax.random.split(jax.random.fold_in(key, 1), n_classes)


programs.register(gating.Gates)  # what network_gates returns, for programs stored on disk


@partial(programs.jit, static_argnums=(1, 2, 3, 4))
def network_gates(key, n_nets: int, n_features: int, layer_sizes: tuple, context_bits: int) -> tuple[gating.Gates, ...]:
    """The hyperplanes of every layer of the ``n_nets`` class networks of seed ``key``: per layer
    ``Gates(normals [nets, N_i, s, d], offsets [nets, N_i, s])``. A program of its own: drawing Gaussians
    takes XLA seconds to compile on a CPU, and this program is shared by every learner, GLN or NCTL,
    with these layers (the rest of a configuration does not change it)."""
    return tuple(jax.vmap(lambda k: gating.init_gates(jax.random.fold_in(k, i), n, context_bits, n_features))(
        class_keys(key, n_nets)) for i, n in enumerate(layer_sizes))


def init(gates: tuple[gating.Gates, ...], n_features: int, layer_sizes, context_bits: int,
         weight_init: str = "zeros") -> tuple[Layer, ...]:
    """A fresh network for one output, with the hyperplanes ``gates`` (per layer)."""
    weights = [jnp.full((n, 2**context_bits, k), init_weight_value(weight_init, k), jnp.float32)
               for n, k in zip(layer_sizes, fan_ins(n_features, layer_sizes))]
    return tuple(Layer(g, w) for g, w in zip(gates, weights))


def targets(y, positive):
    """Binary target of each one-vs-all network: ``x_c = 1[y == positive_c]``; positive: [classes]."""
    return (y == positive).astype(jnp.float32)


def _layer_rows(layer: Layer, z):
    neurons = jnp.arange(layer.weights.shape[0])
    contexts = gating.contexts(layer.gates, z)
    return neurons, contexts, layer.weights[neurons, contexts]  # [N, K]


def predict(layers: tuple[Layer, ...], z, cfg: mixing.GGMConfig):
    """``P(x = 1 | z)`` of the output neuron, without learning."""
    logits = mixing.feature_logits(z, cfg.prob_eps)
    for layer in layers:
        _, _, rows = _layer_rows(layer, z)
        q = jax.vmap(mixing.predict, in_axes=(0, None, None))(rows, logits, cfg.prob_eps)
        logits = mixing.input_logits(q, cfg.prob_eps)
    return q[0]


def step(layers: tuple[Layer, ...], z, x, cfg: mixing.GGMConfig):
    """Predict ``x`` from ``z``, then every neuron takes one step on its own log loss.

    Returns the new layers and the pre-update output prediction.
    """
    logits = mixing.feature_logits(z, cfg.prob_eps)
    new_layers = []
    for layer in layers:
        neurons, contexts, rows = _layer_rows(layer, z)
        q = jax.vmap(mixing.predict, in_axes=(0, None, None))(rows, logits, cfg.prob_eps)
        rows = jax.vmap(mixing.update, in_axes=(0, None, 0, None, None))(rows, logits, q, x, cfg)
        new_layers.append(layer._replace(weights=layer.weights.at[neurons, contexts].set(rows)))
        logits = mixing.input_logits(q, cfg.prob_eps)
    return tuple(new_layers), q[0]


def run_chunk(layers: tuple[Layer, ...], Z, Y, n, positive, cfg: mixing.GGMConfig):
    """``n`` steps over rows ``Z[:n]`` [P, d], ``Y[:n]`` [P] of every class network (leading class axis
    on ``layers``); returns the layers and the pre-update predictions [P, classes]."""

    def body(i, carry):
        layers, preds = carry
        layers, p = jax.vmap(step, in_axes=(0, None, 0, None))(layers, Z[i], targets(Y[i], positive), cfg)
        return layers, preds.at[i].set(p)

    preds = jnp.zeros((Z.shape[0], positive.shape[0]), jnp.float32)
    return jax.lax.fori_loop(0, n, body, (layers, preds))


def predict_many(layers: tuple[Layer, ...], Z, cfg: mixing.GGMConfig):
    """Frozen predictions [n, classes] for rows ``Z`` [n, d]."""
    per_class = jax.vmap(predict, in_axes=(0, None, None))
    return jax.lax.map(lambda z: per_class(layers, z, cfg), Z, batch_size=64)
