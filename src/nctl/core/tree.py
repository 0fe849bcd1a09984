"""The Partition Tree Weighting schedule, prior and weights, shared by every process (docs/algorithm.md §3).

Time ``t = 1, 2, ...`` is the leaf index of a complete binary tree of depth ``D``. At step ``t >= 2`` the
level ``c = D - ctz(t - 1)`` completes and levels ``c..D`` close and restart at ``t`` (§3.2); ``c = 0``
means ``t = 2^D + 1`` and the tree grows a new root (§3.4). Levels that started together share a
*slot*; the live slots form a stack ordered by level (§3.5).

Prior: a node above the leaves stops with ``1 - s`` and splits with ``s``. With ``B_j`` the log weight
of level ``j``'s completed left sibling and ``R_j`` the log evidence of level ``j``'s node, the
posterior of "step t lies in the level-j node" is ``pi_j = softmax_j(Lambda_j + R_j)`` with
``Lambda_j = sum_{l<j} (log s + B_l) + [j < D] log(1 - s)`` (§3.3; the deepest level keeps its mass).

Several split probabilities ``s_1..s_A`` (a grid, uniform prior) give the Bayesian mixture of their PTWs
(§3.6): the segment models do not depend on ``s``, only the weights ``B`` do, so each grid point keeps its
own ``B`` and the level prior becomes ``log (1/A) sum_a exp(Lambda_{a,j})``.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from nctl.deferred import jax, jnp


class TreePrior(NamedTuple):
    log_stop: float  # log(1 - s)
    log_split: float  # log s


def tree_prior(split_prob: float = 0.5) -> TreePrior:
    """Prior with split probability ``s``; ``s = 0`` puts all mass on the root (a single segment)."""
    if not 0.0 <= split_prob <= 1.0:
        raise ValueError(f"split_prob must lie in [0, 1], got {split_prob}")
    with np.errstate(divide="ignore"):
        return TreePrior(float(np.log1p(-split_prob)), float(np.log(split_prob)))


def split_grid(split_prob) -> tuple[TreePrior, ...]:
    """One prior per split probability: ``split_prob`` is a number or a sequence of them (a grid)."""
    probs = (split_prob,) if np.ndim(split_prob) == 0 else tuple(split_prob)
    if not probs:
        raise ValueError("split_prob must be a number or a non-empty sequence of numbers")
    return tuple(tree_prior(float(s)) for s in probs)


def trailing_zeros(n):
    """Number of trailing zero bits of ``n >= 1`` (int32)."""
    n = jnp.asarray(n, jnp.int32)
    return jax.lax.population_count((n & -n) - 1)


class Schedule(NamedTuple):
    """The slot stack, shared by every neuron and class network. The state is always prepared for
    step ``t``: slots ``0 .. size - 1`` are live, ordered by level."""

    t: jax.Array  # int32: the next step to learn (1-based)
    depth: jax.Array  # int32: D
    size: jax.Array  # int32: live slots
    level: jax.Array  # [S] int32: shallowest level a slot stands for
    start: jax.Array  # [S] int32: step at which the slot's segment started


def initial_schedule(slots: int, depth: int) -> Schedule:
    zeros = jnp.zeros(slots, jnp.int32)
    return Schedule(jnp.int32(1), jnp.int32(depth), jnp.int32(1), zeros, zeros + 1)


class Advance(NamedTuple):
    """What the boundary of step ``t + 1`` does to the stack, once step ``t`` has been learned."""

    grow: jax.Array  # bool: the root completed and the tree grows (§3.4)
    completed: jax.Array  # c in the old numbering: the level whose node completed
    closing: jax.Array  # c in the new numbering: levels closing..depth close, sharing slot kept - 1
    kept: jax.Array  # slots that continue; slots kept .. old size - 1 are popped
    new: Schedule  # prepared for step t + 1: one slot pushed at position kept


def advance(s: Schedule) -> Advance:
    """Close the levels that end at ``t``, grow if the root completed, push the slot starting at ``t + 1``."""
    t = s.t + 1
    completed = s.depth - trailing_zeros(t - 1)
    grow = completed == 0
    closing = completed + grow.astype(jnp.int32)
    positions = jnp.arange(s.level.shape[0])
    level = jnp.where(grow & (positions > 0), s.level + 1, s.level)
    kept = jnp.sum((positions < s.size) & (level < closing)).astype(jnp.int32)
    new = Schedule(t, s.depth + grow.astype(jnp.int32), kept + 1, level.at[kept].set(closing), s.start.at[kept].set(t))
    return Advance(grow, completed, closing, kept, new)


def canonical_slots(s: Schedule):
    """Slot of every tree level: the deepest live slot whose level is <= it. -> [S] int32."""
    positions = jnp.arange(s.level.shape[0])
    live = positions < s.size
    reaches = live[None, :] & (s.level[None, :] <= positions[:, None])
    return jnp.sum(reaches, axis=1).astype(jnp.int32) - 1


def level_log_prior(log_b, depth, prior: TreePrior):
    """``Lambda_j`` for every level ``j`` (levels beyond ``depth`` get ``-inf``). log_b: [S, ...]."""
    levels = jnp.arange(log_b.shape[0]).reshape((-1,) + (1,) * (log_b.ndim - 1))
    before = exclusive_cumsum(prior.log_split + log_b)
    lam = before + jnp.where(levels < depth, prior.log_stop, 0.0)
    return jnp.where(levels <= depth, lam, -jnp.inf)


def stacked(priors: tuple[TreePrior, ...]) -> TreePrior:
    """The grid as one prior of ``[A, 1]`` arrays, which broadcast over ``[S, A, N]`` weights."""
    return TreePrior(np.array([p.log_stop for p in priors])[:, None], np.array([p.log_split for p in priors])[:, None])


def mixed_level_log_prior(log_b, depth, priors: tuple[TreePrior, ...]):
    """``log (1/A) sum_a exp(Lambda_{a,j})``: the level prior with the split probability integrated out
    over the grid ``priors`` (§3.6). log_b: [S, A, N], one ``B`` per grid point -> [S, N]."""
    lam = level_log_prior(log_b, depth, stacked(priors))
    return jax.nn.logsumexp(lam, axis=1) - np.log(len(priors))


def node_log_weight(log_b, log_r, depth, level, prior: TreePrior):
    """``W_level`` of the node at ``level`` from its subtree: ``W_D = R_D``,
    ``W_j = lse(log(1-s) + R_j, log s + B_j + W_{j+1})``, unrolled into one log-sum-exp:
    ``W_c = lse_{l=c..D} (sum_{c<=m<l} (log s + B_m) + a_l)`` with ``a_l = log(1-s) + R_l`` (``a_D = R_D``).
    log_b, log_r: [S, ...] per level."""
    levels = jnp.arange(log_b.shape[0]).reshape((-1,) + (1,) * (log_b.ndim - 1))
    inside = (levels >= level) & (levels <= depth)
    terms = jnp.where(inside & (levels < depth), prior.log_split + log_b, 0.0)
    path = exclusive_cumsum(terms)
    own = jnp.where(levels < depth, prior.log_stop + log_r, log_r)
    return jax.nn.logsumexp(jnp.where(inside, path + own, -jnp.inf), axis=0)


def exclusive_cumsum(x):
    """``y_j = sum_{l<j} x_l`` along axis 0 (no subtraction, so infinite terms stay exact)."""
    return jnp.concatenate([jnp.zeros_like(x[:1]), jnp.cumsum(x[:-1], axis=0)], axis=0)


def shift_levels(x):
    """Grow the tree by one level: ``new[j + 1] = old[j]``, the new root shares the old root."""
    return jnp.concatenate([x[:1], x[:-1]], axis=0)


def depth_for(n_steps: int) -> int:
    """``ceil(log2 n)``: the smallest tree that holds ``n`` steps (in integers: ``n - 1`` has that many bits)."""
    return (max(int(n_steps), 1) - 1).bit_length()
