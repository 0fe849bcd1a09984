"""The mixtures of one step: the member posterior in each slot, the tree-level posterior, and in
bounded mode which members hold the lanes (docs/algorithm.md §3.3, §5.3).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.nn import logsumexp, softmax

from nctl.core import native, tree
from nctl.core.engine.config import EngineConfig
from nctl.core.engine.state import Net
from nctl.core.platform import by_platform


class Posterior(NamedTuple):
    alpha: jax.Array  # [S, M, N] member posterior within each slot
    level: jax.Array  # [S, N] pi: posterior that the current step lies in each tree level's node
    mass: jax.Array  # [S, N] the same summed per slot
    log_evidence: jax.Array  # [N] log FMN(x_{1:t}) of every neuron


def mixture_posterior(logits, dtype):
    """``softmax`` over members and ``log sum exp`` of the float64 ``logits`` [S, M, N], with one
    exponential pass in ``dtype``, the precision of the members' predictions (float32 for GGM rows,
    §1.3; float64 for KT counts)."""
    top = jnp.max(logits, axis=1, keepdims=True)
    weights = jnp.exp((logits - top).astype(dtype))
    total = jnp.sum(weights, axis=1)
    return weights / total[:, None], top[:, 0] + jnp.log(total).astype(jnp.float64)


@jax.named_scope("posterior")
def posterior(net: Net, sched: tree.Schedule, cfg: EngineConfig) -> Posterior:
    """``alpha = softmax_m(log lambda + L)``, ``pi_j = softmax_j(Lambda_j + R_canon(j))`` summed per slot (§3.3)."""
    live = (jnp.arange(cfg.slots) < sched.size)[:, None, None]
    alpha, log_r = mixture_posterior(jnp.where(live, net.slots.logprior + net.slots.loglik, 0.0), cfg.rows.dtype)
    canon = tree.canonical_slots(sched)
    level_logits = tree.mixed_level_log_prior(net.slots.log_b, sched.depth, cfg.prior) + log_r[canon]
    pi = softmax(level_logits, axis=0)
    return Posterior(alpha, pi, jnp.zeros_like(log_r).at[canon].add(pi), logsumexp(level_logits, axis=0))


def top_members(weights, count: int):
    """The indices of the ``count`` largest of ``weights`` [..., M], largest first, ties lower index first
    (``lax.top_k``'s order). Each member's rank is counted by comparing it with every other: M^2
    comparisons per node, where XLA:CPU sorts each node's M members by calling a comparator."""
    members = jnp.arange(weights.shape[-1])
    ahead = (weights[..., None, :] > weights[..., :, None]) | (
        (weights[..., None, :] == weights[..., :, None]) & (members[None, :] < members[:, None]))
    rank = jnp.sum(ahead, axis=-1, dtype=jnp.int32)  # [..., M]: members ranked ahead of each
    return jnp.argmax(rank[..., None, :] == jnp.arange(count)[:, None], axis=-1).astype(jnp.int32)


@jax.named_scope("assign_lanes")
def assign_lanes(net: Net, sched: tree.Schedule, cfg: EngineConfig):
    """Bounded mode (§5.3): the ``W`` most probable members of every node hold the lanes; a member that
    stays keeps its lane, newcomers take the lanes given up, in rank order. -> (lanes, lane_since). By the
    CPU kernel where it is built (§6.11), which takes the live slots' nodes only; else ``lanes_by_rank``."""
    if not native.enabled():
        return lanes_by_rank(net, sched, cfg)
    slots = net.slots
    kernel = lambda loglik: native.assign_lanes(slots.logprior, loglik, slots.lanes, slots.lane_since, sched.size,
                                                sched.t)
    return by_platform(slots.loglik, cpu=kernel, default=lambda _: lanes_by_rank(net, sched, cfg))


def lanes_by_rank(net: Net, sched: tree.Schedule, cfg: EngineConfig):
    """``assign_lanes`` as XLA code. Members are ranked by their float64 log weights ``log lambda_m +
    L_m``, the order of ``alpha`` without its float32 exponentials (whose last bits differ between
    platforms and can make or break a tie)."""
    W = cfg.pool.lanes
    log_weight = jnp.moveaxis(net.slots.logprior + net.slots.loglik, 1, 2)  # [S, N, M]
    valid = jnp.moveaxis(net.slots.logprior > -jnp.inf, 1, 2)
    desired = top_members(jnp.where(valid, log_weight, -jnp.inf), W)  # [S, N, W]
    desired = jnp.where(jnp.take_along_axis(valid, desired, axis=2), desired, -1)
    held = net.slots.lanes
    keep = jnp.any(held[..., :, None] == desired[..., None, :], axis=-1) & (held >= 0)
    placed = jnp.any(desired[..., :, None] == held[..., None, :], axis=-1) | (desired < 0)
    newcomer_rank = jnp.cumsum(~placed, axis=-1) - 1
    open_rank = jnp.cumsum(~keep, axis=-1) - 1
    take = (~keep[..., :, None]) & (~placed[..., None, :]) & (open_rank[..., :, None] == newcomer_rank[..., None, :])
    newcomer = jnp.max(jnp.where(take, desired[..., None, :], -1), axis=-1)
    lanes = jnp.where(keep, held, newcomer)
    since = jnp.where(keep, net.slots.lane_since, sched.t)
    live = (jnp.arange(cfg.slots) < sched.size)[:, None, None]
    return jnp.where(live, lanes, net.slots.lanes), jnp.where(live, since, net.slots.lane_since)
