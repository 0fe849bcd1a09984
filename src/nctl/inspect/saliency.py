"""Saliency maps of NCTL's MAP network and of pseudo-task networks (ALGORITHMS.md 2 item 6, 5.5).

For side information ``z`` every neuron ``n`` of layer ``i`` uses the weight row of its context,
``A_i(z)[n] = W_{i,n}[c_{i,n}(z)]``. Ignoring clipping, ``logit(p_i) = A_i(z) [logit(p_{i-1}); 1]`` and
``logit(p_0) = z``, so the output logit is ``u(z) . z + const(z)`` with

    u(z)^T = A_L[:, :-1] A_{L-1}[:, :-1] ... A_1[:, :-1]      (bias columns dropped),

the gradient of the output logit with respect to ``z`` with the contexts held fixed. Reshaped to
28 x 28 it is the saliency map (NCTL section 5.1).

* MAP network: per neuron the MAP level ``j* = argmax_j pi_j``, and within its slot the MAP member
  ``m* = argmax_m alpha_{j*,m}``, read from the posterior after the last learned step.
* Pseudo-task network: per neuron an independent, uniformly drawn stored pool entry.
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from nctl.core import gating, gln, network


@partial(jax.jit, static_argnums=(1, 2))
def _map_members(state: network.NCTLState, cfg: network.NetConfig, klass: int):
    """Per layer: the MAP GLN layer and the ``pool_born`` of each MAP member's source entry [N]."""
    sched = state.schedule
    canon = network.canonical_slots(sched)
    out = []
    for layer in state.nets.layers:
        layer = jax.tree.map(lambda a: a[klass], layer)
        neurons = jnp.arange(layer.pool_w.shape[0])
        slot = canon[jnp.argmax(network.level_posterior(layer, sched, cfg.prior), axis=0)]  # [N]
        member = jnp.argmax(network.member_posterior(layer)[slot, :, neurons], axis=1)  # [N]
        weights = network.member_weights(layer, sched, slot, member, cfg)
        k = layer.pool_w.shape[2]
        born = jnp.zeros(neurons.shape, jnp.int32)
        if k:  # the entry still holds the member's lineage unless it was re-added after the slot started
            entry = jnp.minimum(member, k - 1)
            same = (member < k) & (layer.src_version[slot, entry, neurons] >= 0) & (
                layer.pool_born[entry, neurons] <= sched.start[slot])
            born = jnp.where(same, layer.pool_born[entry, neurons], born)
        out.append((gln.Layer(layer.gates, weights), born))
    return tuple(out)


def _checked(learner):
    if learner.state_ is None:
        raise ValueError("the learner has not seen any example yet")
    return learner.state_, learner.cfg_


def map_network(learner, klass: int = 0) -> tuple[gln.Layer, ...]:
    """The MAP GLN of a trained ``nctl.NCTL`` (of class network ``klass`` for one-vs-all), runnable by
    ``nctl.core.gln.predict``."""
    return tuple(layer for layer, _ in _map_members(*_checked(learner), klass))


def map_born(learner, klass: int = 0) -> tuple[np.ndarray, ...]:
    """Per layer [N]: ``pool_born`` of the lineage each neuron's MAP member was recalled from
    (``nctl.inspect.pools``); 0 for the fresh member or a lineage evicted since its slot started."""
    return tuple(np.asarray(born) for _, born in _map_members(*_checked(learner), klass))


def pool_sample_network(learner, key, klass: int = 0) -> tuple[gln.Layer, ...]:
    """A pseudo-task GLN: every neuron takes a uniformly drawn valid entry of its own pool."""
    state = _checked(learner)[0]
    for index, layer in enumerate(state.nets.layers):
        if not bool(jnp.all(jnp.any(layer.pool_valid[klass], axis=0))):
            raise ValueError(f"a neuron of layer {index + 1} has an empty pool")
    return _sample_layers(state, key, klass)


@partial(jax.jit, static_argnums=(2,))
def _sample_layers(state: network.NCTLState, key, klass: int):
    layers = []
    for index, layer in enumerate(state.nets.layers):
        layer = jax.tree.map(lambda a: a[klass], layer)
        logits = jnp.where(layer.pool_valid.T, 0.0, -jnp.inf)  # [N, k]
        entry = jax.random.categorical(jax.random.fold_in(key, index), logits)
        layers.append(gln.Layer(layer.gates, layer.pool_w[jnp.arange(logits.shape[0]), :, entry]))
    return tuple(layers)


@jax.jit
def saliency_maps(layers: tuple[gln.Layer, ...], Z) -> jax.Array:
    """``u(z)`` [n, d] of every row of ``Z`` [n, d] for a GLN (module docstring)."""

    def one(z):
        u = None
        for layer in layers:
            rows = layer.weights[jnp.arange(layer.weights.shape[0]), gating.contexts(layer.gates, z), :-1]
            u = rows if u is None else rows @ u
        return u[0]

    return jax.vmap(one)(jnp.asarray(Z, jnp.float32))


def saliency(learner, X, klass: int = 0) -> np.ndarray:
    """Saliency ``u(z)`` [n, d] of the MAP network for every row of ``X``; average over a task's
    examples and reshape to 28 x 28 for the map of the task."""
    return np.asarray(saliency_maps(map_network(learner, klass), X))


_predict_many = jax.jit(gln.predict_many, static_argnums=(2,))


def gln_predictions(layers: tuple[gln.Layer, ...], X, ggm) -> np.ndarray:
    """Frozen ``P(x = 1 | z)`` [n] of one GLN (a MAP or pseudo-task network) for the rows of ``X``."""
    batched = jax.tree.map(lambda a: a[None], layers)  # a class axis of one
    return np.asarray(_predict_many(batched, jnp.asarray(X, jnp.float32), ggm))[:, 0]
