"""Saliency maps of NCTL's MAP network and of pseudo-task networks
([algorithm §2](algorithm.md#2-the-gated-linear-network)).

For side information ``z`` every neuron ``n`` of layer ``i`` uses the weight row of its context,
``A_i(z)[n] = W_{i,n}[c_{i,n}(z)]``. Ignoring clipping, ``logit(p_i) = A_i(z) [logit(p_{i-1}); 1]`` and
``logit(p_0) = z``, so the output logit is ``u(z) . z + const(z)`` with

    u(z)^T = A_L[:, :-1] A_{L-1}[:, :-1] ... A_1[:, :-1]      (bias columns dropped),

the gradient of the output logit with respect to ``z`` with the contexts held fixed. Reshaped to
28 x 28 it is the saliency map (NCTL section 5.1).

* MAP network: per neuron the MAP level ``j* = argmax_j pi_j``, and within its slot the MAP member
  ``m* = argmax_m alpha_{j*,m}``, read from the learner's current (prepared) state.
* Pseudo-task network: per neuron an independent, uniformly drawn state of its pool.
"""

from __future__ import annotations

import numpy as np

from nctl import deferred
from nctl.core import engine, gating, gln, tree
from nctl.deferred import jax, jnp


@deferred.jit(static_argnums=(1, 2))
def _map_members(state: engine.State, cfg: engine.EngineConfig, klass: int):
    """Per layer: the MAP GLN layer and the birth step of each MAP member's lineage [N_i] (0: none known)."""
    net = jax.tree.map(lambda a: a[klass], state.nets)
    sched = state.schedule
    post = engine.posterior.posterior(net, sched, cfg)
    neurons = jnp.arange(cfg.neurons)
    slot = tree.canonical_slots(sched)[jnp.argmax(post.level, axis=0)]  # [N]
    member = jnp.argmax(post.alpha[slot, :, neurons], axis=1)  # [N]
    out, k = [], cfg.pool.capacity
    for layer, shape in enumerate(cfg.layers):
        cols = slice(shape.offset, shape.offset + shape.neurons)
        local = jnp.arange(shape.neurons)[:, None]
        weights = engine.members.member_weights(net, layer, cfg, slot[cols][:, None], member[cols][:, None], local,
                                        jnp.arange(cfg.contexts)[None, :])  # [N_i, C, K]
        born = jnp.zeros(shape.neurons, jnp.int32)
        if k:  # a member still attached to its source entry carries that entry's lineage
            m = jnp.minimum(member[cols], k - 1)
            entry = net.slots.source[slot[cols], m, neurons[cols]]
            attached = (member[cols] < k) & (entry >= 0) & ~net.slots.detached[slot[cols], m, neurons[cols]]
            born = jnp.where(attached, net.pool.born[jnp.maximum(entry, 0), neurons[cols]], 0)
        out.append((gln.Layer(jax.tree.map(lambda a: a[cols], net.gates), weights), born))
    return tuple(out)


def _checked(learner):
    learner.flush()
    if learner.state_ is None:
        raise ValueError("the learner has not seen any example yet")
    return learner.state_, learner.cfg_


def map_network(learner, klass: int = 0) -> tuple[gln.Layer, ...]:
    """The MAP GLN of a trained ``nctl.NCTL`` (of class network ``klass`` for one-vs-all), runnable by
    ``nctl.core.gln.predict``."""
    return tuple(layer for layer, _ in _map_members(*_checked(learner), klass))


def map_born(learner, klass: int = 0) -> tuple[np.ndarray, ...]:
    """Per layer [N]: the step at which the lineage each neuron's MAP member was recalled from was first
    added to the pool (``nctl.inspect.pools``); 0 for the fresh member or a lineage no longer stored."""
    return tuple(np.asarray(born) for _, born in _map_members(*_checked(learner), klass))


def pool_sample_network(learner, key, klass: int = 0) -> tuple[gln.Layer, ...]:
    """A pseudo-task GLN: every neuron takes a uniformly drawn state of its own pool."""
    state, cfg = _checked(learner)
    if not bool(jnp.all(jnp.any(state.nets.pool.in_pool[klass], axis=0))):
        raise ValueError("a neuron's pool is empty: there is nothing to sample")
    return _sample_layers(state, cfg, key, klass)


@deferred.jit(static_argnums=(1, 3))
def _sample_layers(state: engine.State, cfg: engine.EngineConfig, key, klass: int):
    net = jax.tree.map(lambda a: a[klass], state.nets)
    entry = jax.random.categorical(key, jnp.where(net.pool.in_pool.T, 0.0, -jnp.inf))  # [N]
    layers = []
    for layer, shape in enumerate(cfg.layers):
        cols = slice(shape.offset, shape.offset + shape.neurons)
        weights = net.arena.pool_rows[layer][jnp.arange(shape.neurons), :, entry[cols]]  # [N_i, C, K]
        layers.append(gln.Layer(jax.tree.map(lambda a: a[cols], net.gates), weights))
    return tuple(layers)


@deferred.jit()
def saliency_maps(layers: tuple[gln.Layer, ...], Z) -> jax.Array:
    """``u(z)`` [n, d] of every row of ``Z`` [n, d] for a GLN (module docstring)."""

    def one(z):
        u = None
        for layer in layers:
            rows = layer.weights[jnp.arange(layer.weights.shape[0]), gating.contexts(layer.gates, z), :-1]
            u = rows if u is None else jnp.matmul(rows, u, precision=jax.lax.Precision.HIGHEST)
        return u[0]

    return jax.vmap(one)(jnp.asarray(Z, jnp.float32))


def saliency(learner, X, klass: int = 0) -> np.ndarray:
    """Saliency ``u(z)`` [n, d] of the MAP network for every row of ``X``; average over a task's
    examples and reshape to 28 x 28 for the map of the task."""
    return np.asarray(saliency_maps(map_network(learner, klass), X))


_predict_many = deferred.jit(static_argnums=(2,))(gln.predict_many)


def gln_predictions(layers: tuple[gln.Layer, ...], X, rows) -> np.ndarray:
    """Frozen ``P(x = 1 | z)`` [n] of one GLN (a MAP or pseudo-task network) for the rows of ``X``."""
    batched = jax.tree.map(lambda a: a[None], layers)  # a class axis of one
    return np.asarray(_predict_many(batched, jnp.asarray(X, jnp.float32), rows))[:, 0]
