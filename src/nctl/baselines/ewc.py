"""Elastic Weight Consolidation (Kirkpatrick et al. 2017) and Online EWC (Schwarz et al. 2018).

Both are a penalty added to the MLP's loss, ``loss + ewc_penalty(params, anchors, fishers, lam)``,
with a diagonal empirical Fisher computed at the end of each task (:meth:`MLPLearner.consolidate`).

Paper settings (section 5.2): MLP 1000-250-1, ReLU, sigmoid output, one epoch per task in
mini-batches, task boundaries given; EWC lambda 1e6, lr 1e-5; Online EWC lambda 1e7, lr 1e-5,
gamma 0.8. Where the paper is silent we choose, and say so:

- optimizer Adam (the usual choice for these baselines; its step size does not scale with lambda);
  its moment estimates carry over from task to task (no reset at boundaries);
- mini-batch size 20 (the paper's only stated MLP batch size, Elec2; it divides eval_every = 500);
- the Fisher is averaged over every training example of the task's segment (optionally a seeded
  subset, ``fisher_samples`` of :func:`nctl.baselines.evaluate_task_matrix_with_boundaries`);
- Online EWC follows Schwarz et al.: ``F* <- gamma F* + F_t`` and ``theta* <- theta_t`` at the end
  of task t, and the penalty while learning the next task is ``(lambda/2) sum_i gamma F*_i
  (theta_i - theta*_i)^2``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from nctl.baselines import mlp_core
from nctl.baselines.mlp import PAPER_HIDDEN, MLPLearner
from nctl.baselines.mlp_core import MLPConfig, Params
from nctl.deferred import jax, jnp

EWC_LAMBDA = 1e6
EWC_LEARNING_RATE = 1e-5
ONLINE_EWC_LAMBDA = 1e7
ONLINE_EWC_LEARNING_RATE = 1e-5
ONLINE_EWC_GAMMA = 0.8
EWC_BATCH_SIZE = 20  # our choice; see the module docstring
FISHER_BATCH = 1024  # examples per squared-gradient call (bounds the activation memory)


def ewc_penalty(
    params: Params, anchors: tuple[Params, ...], fishers: tuple[Params, ...], lam: float
) -> jax.Array:
    """Omega(theta) = (lam / 2) sum_k sum_i F_{k,i} (theta_i - theta*_{k,i})^2.

    One ``(anchor theta*_k, diagonal Fisher F_k)`` pair per consolidated task; zero without any.
    """
    if len(anchors) != len(fishers):
        raise ValueError(
            f"need one Fisher per anchor, got {len(anchors)} anchors and {len(fishers)} Fishers"
        )
    total = jnp.zeros((), jnp.float32)
    for anchor, fisher in zip(anchors, fishers):
        terms = jax.tree.map(lambda p, a, f: jnp.sum(f * (p - a) ** 2), params, anchor, fisher)
        total = total + sum(jax.tree.leaves(terms))
    return 0.5 * lam * total


def empirical_fisher(config: MLPConfig, params: Params, X: jax.Array, y: jax.Array) -> Params:
    """Diagonal empirical Fisher F_i = (1/n) sum_n (d/d theta_i ln p(y_n | x_n, theta))^2.

    Evaluated at ``params`` with the observed labels ``y [n]`` of the inputs ``X [n, d]``.
    """
    n = X.shape[0]
    if n == 0:
        raise ValueError("the empirical Fisher needs at least one example")
    total = jax.tree.map(jnp.zeros_like, params)
    for start in range(0, n, FISHER_BATCH):
        batch = mlp_core.sum_squared_grads(
            config, params, X[start : start + FISHER_BATCH], y[start : start + FISHER_BATCH]
        )
        total = jax.tree.map(jnp.add, total, batch)
    return jax.tree.map(lambda f: f / jnp.float32(n), total)


class EWCState(NamedTuple):
    anchors: tuple[Params, ...]  # theta*_k, one per consolidated task
    fishers: tuple[Params, ...]  # F_k, one per consolidated task


@dataclass(frozen=True)
class EWC:
    """EWC: one quadratic penalty per past task k.

    ``(lam/2) sum_k sum_i F_ki (theta_i - theta*_ki)^2``.
    """

    lam: float = EWC_LAMBDA

    def init(self, params: Params) -> EWCState:
        return EWCState(anchors=(), fishers=())

    def penalty(self, params: Params, state: EWCState) -> jax.Array:
        return ewc_penalty(params, state.anchors, state.fishers, self.lam)

    def consolidate(
        self, state: EWCState, config: MLPConfig, params: Params, X: jax.Array, y: jax.Array
    ) -> EWCState:
        fisher = empirical_fisher(config, params, X, y)
        return EWCState(anchors=(*state.anchors, params), fishers=(*state.fishers, fisher))


class OnlineEWCState(NamedTuple):
    anchor: Params  # theta*, the parameters at the end of the latest task
    fisher: Params  # F*, the decayed running sum of the tasks' Fishers


@dataclass(frozen=True)
class OnlineEWC:
    """Online EWC: ``(lam/2) sum_i gamma F*_i (theta_i - theta*_i)^2``, ``F* <- gamma F* + F_t``."""

    lam: float = ONLINE_EWC_LAMBDA
    gamma: float = ONLINE_EWC_GAMMA

    def __post_init__(self) -> None:
        if not 0.0 <= self.gamma <= 1.0:
            raise ValueError(f"gamma must lie in [0, 1], got {self.gamma}")

    def init(self, params: Params) -> OnlineEWCState:
        return OnlineEWCState(anchor=params, fisher=jax.tree.map(jnp.zeros_like, params))

    def penalty(self, params: Params, state: OnlineEWCState) -> jax.Array:
        decayed = jax.tree.map(lambda f: self.gamma * f, state.fisher)
        return ewc_penalty(params, (state.anchor,), (decayed,), self.lam)

    def consolidate(
        self, state: OnlineEWCState, config: MLPConfig, params: Params, X: jax.Array, y: jax.Array
    ) -> OnlineEWCState:
        fisher = empirical_fisher(config, params, X, y)
        running = jax.tree.map(lambda old, new: self.gamma * old + new, state.fisher, fisher)
        return OnlineEWCState(anchor=params, fisher=running)


def ewc_learner(
    n_features: int,
    *,
    lam: float = EWC_LAMBDA,
    learning_rate: float = EWC_LEARNING_RATE,
    batch_size: int = EWC_BATCH_SIZE,
    hidden: tuple[int, ...] = PAPER_HIDDEN,
    n_classes: int = 2,
    seed: int = 0,
) -> MLPLearner:
    """The paper's EWC baseline: MLP 1000-250-1, Adam lr 1e-5, lambda 1e6, batches of 20."""
    return MLPLearner(
        n_features,
        hidden=hidden,
        n_classes=n_classes,
        learning_rate=learning_rate,
        batch_size=batch_size,
        optimizer="adam",
        regulariser=EWC(lam),
        seed=seed,
    )


def online_ewc_learner(
    n_features: int,
    *,
    lam: float = ONLINE_EWC_LAMBDA,
    gamma: float = ONLINE_EWC_GAMMA,
    learning_rate: float = ONLINE_EWC_LEARNING_RATE,
    batch_size: int = EWC_BATCH_SIZE,
    hidden: tuple[int, ...] = PAPER_HIDDEN,
    n_classes: int = 2,
    seed: int = 0,
) -> MLPLearner:
    """The paper's Online EWC baseline: MLP 1000-250-1, Adam lr 1e-5, lambda 1e7, gamma 0.8."""
    return MLPLearner(
        n_features,
        hidden=hidden,
        n_classes=n_classes,
        learning_rate=learning_rate,
        batch_size=batch_size,
        optimizer="adam",
        regulariser=OnlineEWC(lam, gamma),
        seed=seed,
    )
