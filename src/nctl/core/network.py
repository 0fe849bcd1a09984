"""The NCTL network: a GLN whose every neuron is an FMN process over its GGM (NCTL section 4).

This is ``nctl.core.fmn`` for whole layers of GGM neurons, laid out for speed (ALGORITHMS.md 7):

* **One schedule for everything.** Segment boundaries depend on ``t`` only, so all neurons of all
  layers (and all one-vs-all class networks) share one stack of *slots*. Tree levels that started
  at the same step share a slot; the live slots are those of level 0 and of the levels whose bit
  is set in ``t - 1``, and they form a stack ordered by level: a step pops the slots of the levels
  that close and pushes one slot for the level that restarts. Only live slots are computed.
* **Lazy rows.** A new slot copies no weights. Its block of rows ``(slot, neuron, context)`` is
  *stale* until first used (``stamp != start``); a stale row of a stored member is read from its
  pool entry (if the entry is still the version the slot was created from) and of the fresh
  member from the initial value. Before a pool entry is overwritten, the stale rows that still
  depend on it are copied into the slots (``_materialise``), so a slot never sees a later version.
* **A record arena.** Reservoirs hold ids of step records ``(z, layer outputs, y)`` kept once in an
  arena; free rows are found by marking every id still held (``collect``) before each chunk.

Work is split into ``prepare`` (pool updates of the segments closing at the next step, and
garbage collection), run at steps ``t`` with ``t - 1`` a multiple of the chunk length
``P = 2^ceil(log2 L_min)`` (the only steps at which a segment of length >= L_min can close), and
``run_chunk`` (up to ``P`` steps of boundary bookkeeping, prediction and learning in one compiled
loop). Per step: restart bookkeeping, then predict, then learn.

Shapes: ``S`` slots (= tree levels), ``k`` pool entries, ``M = k + 1`` members (fresh last), ``N``
neurons, ``C`` contexts, ``K`` inputs, ``R`` reservoir size, ``A`` arena rows, ``d`` features.
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.nn import logsumexp, softmax

from nctl.core import gating, gln, mixing, reservoir, tree
from nctl.core import pool as pool_rules


class NetConfig(NamedTuple):
    """Static description of an NCTL network (hashable, so it can key compiled functions)."""

    n_features: int
    layer_sizes: tuple
    context_bits: int
    ggm: mixing.GGMConfig
    pool: pool_rules.PoolConfig
    prior: tree.TreePrior
    weight_init: str = "zeros"

    @property
    def chunk(self) -> int:
        """``P``: closing segments of length >= L_min only occur at steps ``t = 1 (mod P)``."""
        return 2**self.pool.min_segment_log2

    @property
    def record_width(self) -> int:
        """Floats per record for the input logits of layers 2..L: ``N_1 + ... + N_{L-1}``."""
        return sum(self.layer_sizes[:-1])


class Schedule(NamedTuple):
    """The slot stack, shared by every neuron and class network."""

    t: jax.Array  # int32: steps done
    depth: jax.Array  # int32: current tree depth D
    size: jax.Array  # int32: live slots (the stack holds slots 0 .. size-1)
    level: jax.Array  # [S] int32: shallowest level a slot stands for
    start: jax.Array  # [S] int32: step at which the slot's segment started


class LayerState(NamedTuple):
    gates: gating.Gates
    slot_w: jax.Array  # [S, N, C, M, K] float32: member weights per slot
    stamp: jax.Array  # [S, N, C] int32: slot start for which the block was materialised
    loglik: jax.Array  # [S, M, N] float64: in-segment log-likelihood of each member
    logprior: jax.Array  # [S, M, N] float64: mixture prior (-inf: no such member)
    src_version: jax.Array  # [S, k, N] int32: pool version each stored member came from (-1: none)
    log_b: jax.Array  # [S, N] float64: completed left-sibling weight, per tree level
    pool_w: jax.Array  # [N, C, k, K] float32
    pool_valid: jax.Array  # [k, N] bool
    pool_time: jax.Array  # [k, N] int32: step of the last write
    pool_version: jax.Array  # [k, N] int32
    lineage: jax.Array  # [k, N, R] int32: arena ids of the examples the entry's lineage saw
    lineage_n: jax.Array  # [k, N] int32
    lineage_seen: jax.Array  # [k, N] int32
    pool_born: jax.Array  # [k, N] int32: step before which the entry's lineage was first added (REFINE keeps it)
    pool_events: jax.Array  # [N, 4] int32: pool updates so far, counted per POOL_EVENTS


POOL_EVENTS = ("refine", "skip", "add", "evict")  # columns of pool_events; an eviction is an add into a full pool


class ClassNet(NamedTuple):
    """One binary network (one class of a one-vs-all ensemble) and its records."""

    layers: tuple  # of LayerState
    segment: jax.Array  # [S, R] int32: arena ids sampled from each slot's segment
    segment_n: jax.Array  # [S] int32
    segment_seen: jax.Array  # [S] int32
    arena_z: jax.Array  # [A, d] float32: side information of each record
    arena_h: jax.Array  # [A, H] float32: input logits of layers 2..L (bias excluded)
    arena_y: jax.Array  # [A] int32: label
    free_ids: jax.Array  # [P] int32: arena rows reserved for the records of the current chunk


class NCTLState(NamedTuple):
    schedule: Schedule
    nets: ClassNet  # every leaf has a leading class axis
    positive: jax.Array  # [classes] int32: label that is the positive class of each network
    key: jax.Array  # PRNG key of all reservoir randomness


# ----------------------------------------------------------------------------- initialisation


def init(cfg: NetConfig, key, n_classes: int = 2, depth: int = 0, capacity: int | None = None,
         arena_rows: int | None = None) -> NCTLState:
    """A fresh network; ``capacity`` slots (default ``depth + 1``), one binary net per class
    (one net when ``n_classes == 2``)."""
    capacity = max(capacity or 0, depth + 1)
    positive = jnp.arange(n_classes, dtype=jnp.int32) if n_classes > 2 else jnp.array([1], jnp.int32)
    arena_rows = arena_rows or cfg.pool.reservoir_size * (capacity + 4) + 2 * cfg.chunk
    keys = gln.class_keys(key, positive.shape[0])
    nets = jax.vmap(lambda k: _init_net(cfg, k, capacity, arena_rows))(keys)
    level = jnp.zeros(capacity, jnp.int32)
    schedule = Schedule(jnp.int32(0), jnp.int32(depth), jnp.int32(1), level, level + 1)
    return NCTLState(schedule, nets, positive, jax.random.fold_in(key, 0))


def _init_net(cfg: NetConfig, key, capacity: int, arena_rows: int) -> ClassNet:
    k, size = cfg.pool.capacity, cfg.pool.reservoir_size
    layers = []
    for layer in gln.init(key, cfg.n_features, cfg.layer_sizes, cfg.context_bits, cfg.weight_init):
        n, c, fan_in = layer.weights.shape
        pool_valid = jnp.zeros((k, n), bool)
        zeros_kn = jnp.zeros((k, n), jnp.int32)
        layers.append(LayerState(
            gates=layer.gates,
            slot_w=jnp.zeros((capacity, n, c, k + 1, fan_in), jnp.float32),
            stamp=jnp.zeros((capacity, n, c), jnp.int32),
            loglik=jnp.zeros((capacity, k + 1, n), jnp.float64),
            logprior=jnp.broadcast_to(_member_log_prior(pool_valid), (capacity, k + 1, n)),
            src_version=jnp.full((capacity, k, n), -1, jnp.int32),
            log_b=jnp.zeros((capacity, n), jnp.float64),
            pool_w=jnp.zeros((n, c, k, fan_in), jnp.float32),
            pool_valid=pool_valid,
            pool_time=zeros_kn,
            pool_version=zeros_kn,
            lineage=jnp.full((k, n, size), -1, jnp.int32),
            lineage_n=zeros_kn,
            lineage_seen=zeros_kn,
            pool_born=zeros_kn,
            pool_events=jnp.zeros((n, len(POOL_EVENTS)), jnp.int32),
        ))
    return ClassNet(
        layers=tuple(layers),
        segment=jnp.full((capacity, size), -1, jnp.int32),
        segment_n=jnp.zeros(capacity, jnp.int32),
        segment_seen=jnp.zeros(capacity, jnp.int32),
        arena_z=jnp.zeros((arena_rows, cfg.n_features), jnp.float32),
        arena_h=jnp.zeros((arena_rows, cfg.record_width), jnp.float32),
        arena_y=jnp.zeros(arena_rows, jnp.int32),
        free_ids=jnp.arange(cfg.chunk, dtype=jnp.int32),
    )


def _member_log_prior(pool_valid):
    """[k, N] -> [M, N]: the mixture prior of a segment starting now, per neuron."""
    return jax.vmap(pool_rules.member_log_prior, in_axes=1, out_axes=1)(pool_valid)


def _init_row(cfg: NetConfig, fan_in: int) -> float:
    return gln.init_weight_value(cfg.weight_init, fan_in)


def depth_after(t: int, depth: int) -> int:
    """Tree depth after ``t`` steps from an initial ``depth``: ``max(depth, ceil(log2 t))``."""
    return max(depth, (t - 1).bit_length()) if t > 1 else depth


def grow(state: NCTLState, capacity: int, arena_rows: int) -> NCTLState:
    """The same network with room for ``capacity`` slots (tree levels) and ``arena_rows`` records.

    New slots are dead and new arena rows free; nothing the network computes changes.
    """
    extra = capacity - state.schedule.level.shape[0]
    rows = arena_rows - state.nets.arena_y.shape[1]
    if extra < 0 or rows < 0:
        raise ValueError("grow can only add slots and arena rows")

    def pad(a, axis, amount, value=0):
        widths = [(0, 0)] * a.ndim
        widths[axis] = (0, amount)
        return jnp.pad(a, widths, constant_values=value)

    layers = tuple(
        layer._replace(**{name: pad(getattr(layer, name), 1, extra, -1 if name == "src_version" else 0)
                          for name in ("slot_w", "stamp", "loglik", "logprior", "src_version", "log_b")})
        for layer in state.nets.layers
    )
    nets = state.nets._replace(
        layers=layers,
        segment=pad(state.nets.segment, 1, extra, -1),
        segment_n=pad(state.nets.segment_n, 1, extra),
        segment_seen=pad(state.nets.segment_seen, 1, extra),
        arena_z=pad(state.nets.arena_z, 1, rows),
        arena_h=pad(state.nets.arena_h, 1, rows),
        arena_y=pad(state.nets.arena_y, 1, rows),
    )
    schedule = state.schedule._replace(level=pad(state.schedule.level, 0, extra), start=pad(state.schedule.start, 0, extra))
    return state._replace(schedule=schedule, nets=nets)


# ----------------------------------------------------------------------------- schedule


class Advance(NamedTuple):
    """What step ``t`` does to the tree, computed once and applied to every layer."""

    t: jax.Array
    boundary: jax.Array  # bool: t >= 2
    completed: jax.Array  # level j_c whose node completed (old numbering)
    grow: jax.Array  # bool: the root completed, the tree grows
    restart_below: jax.Array  # i: levels > i restart at t (new numbering)
    old: Schedule
    new: Schedule


def advance_schedule(s: Schedule) -> Advance:
    """Step ``t = s.t + 1``: pop the slots of closing levels, push one slot for level ``i + 1``."""
    t = s.t + 1
    boundary = t >= 2
    completed = tree.completed_level(jnp.maximum(t, 2), s.depth)
    grow = boundary & (completed == 0)
    i = completed - 1 + grow.astype(jnp.int32)
    slots = jnp.arange(s.level.shape[0])
    level = jnp.where(grow & (slots > 0), s.level + 1, s.level)
    kept = jnp.sum((slots < s.size) & (level <= i)).astype(jnp.int32)
    new = Schedule(
        t=t,
        depth=s.depth + grow.astype(jnp.int32),
        size=kept + 1,
        level=level.at[kept].set(i + 1),
        start=s.start.at[kept].set(t),
    )
    new = jax.tree.map(lambda n, o: jnp.where(boundary, n, o), new, s._replace(t=t))
    return Advance(t, boundary, completed, grow, i, s, new)


def canonical_slots(s: Schedule):
    """Slot of every tree level: the deepest live slot whose level is <= it. -> [S] int32."""
    live = jnp.arange(s.level.shape[0]) < s.size
    reaches = live[None, :] & (s.level[None, :] <= jnp.arange(s.level.shape[0])[:, None])
    return jnp.sum(reaches, axis=1).astype(jnp.int32) - 1


def _slot_log_evidence(layer: LayerState):
    """``R`` of every slot and neuron: ``lse_m(log lambda_m + L_m)``. -> [S, N]."""
    return logsumexp(layer.logprior + layer.loglik, axis=1)


def _restart_layer(layer: LayerState, adv: Advance, prior: tree.TreePrior) -> LayerState:
    """Close level ``j_c`` (``B_i <- W_{j_c}``), grow, and set up the pushed slot's mixture."""
    canon = canonical_slots(adv.old)
    log_r_levels = _slot_log_evidence(layer)[canon]  # [S, N]
    w_c = jax.vmap(tree.subtree_log_weight, in_axes=(1, 1, None, None, None))(
        layer.log_b, log_r_levels, adv.old.depth, adv.completed, prior
    )
    log_b = jnp.where(adv.grow, tree.shift_levels(layer.log_b), layer.log_b)
    restart = (jnp.arange(log_b.shape[0]) > adv.restart_below)[:, None]
    log_b = jnp.where(restart, 0.0, log_b).at[adv.restart_below].set(w_c)
    pushed = adv.new.size - 1
    restarted = layer._replace(
        log_b=log_b,
        loglik=layer.loglik.at[pushed].set(0.0),
        logprior=layer.logprior.at[pushed].set(_member_log_prior(layer.pool_valid)),
        src_version=layer.src_version.at[pushed].set(jnp.where(layer.pool_valid, layer.pool_version, -1)),
    )
    return jax.tree.map(lambda n, o: jnp.where(adv.boundary, n, o), restarted, layer)


def _restart_net(net: ClassNet, adv: Advance, cfg: NetConfig) -> ClassNet:
    pushed = adv.new.size - 1
    layers = tuple(_restart_layer(layer, adv, cfg.prior) for layer in net.layers)
    return net._replace(
        layers=layers,
        segment_n=jnp.where(adv.boundary, net.segment_n.at[pushed].set(0), net.segment_n),
        segment_seen=jnp.where(adv.boundary, net.segment_seen.at[pushed].set(0), net.segment_seen),
    )


# ----------------------------------------------------------------------------- forward pass


DENSE_LAYER_BYTES = 16 * 2**20  # layers whose slot weights fit in this many bytes update every slot at once


def _layer_pass(layer: LayerState, sched: Schedule, z, logits, x, cfg: NetConfig, learn: bool):
    """Member predictions of every slot [S, M, N] and, when learning, the layer with every member's
    row updated on ``x``.

    Small layers are computed for all slots in one vectorised pass (dead slots are harmless: their
    rows are never read again before a restart makes them stale); large layers loop over the live
    slots only, so each step reads and writes just the live rows.
    """
    neurons = jnp.arange(layer.slot_w.shape[1])
    contexts = gating.contexts(layer.gates, z)
    k = layer.pool_w.shape[2]
    init_value = _init_row(cfg, logits.shape[0])
    source = jnp.concatenate(  # [N, M, K]: where stale rows come from (pool entries, then fresh)
        [layer.pool_w[neurons, contexts], jnp.full((neurons.shape[0], 1, logits.shape[0]), init_value, jnp.float32)],
        axis=1)
    fresh = jnp.arange(k + 1) == k

    def slot_pass(slot_w_s, stamp_s, src_version_s, start):
        """One slot: rows [N, M, K] resolved lazily, predictions [N, M] and updated rows."""
        rows = slot_w_s[neurons, contexts]
        stale = stamp_s[neurons, contexts] != start
        current = jnp.append(src_version_s == layer.pool_version, jnp.ones((1, neurons.shape[0]), bool), axis=0).T
        rows = jnp.where((stale[:, None] & (current | fresh))[:, :, None], source, rows)
        q = jax.vmap(jax.vmap(mixing.predict, in_axes=(0, None, None)), in_axes=(0, None, None))(
            rows, logits, cfg.ggm.prob_eps)
        update = jax.vmap(jax.vmap(mixing.update, in_axes=(0, None, 0, None, None)), in_axes=(0, None, 0, None, None))
        return q, update(rows, logits, q, x, cfg.ggm)

    if layer.slot_w.nbytes <= DENSE_LAYER_BYTES:
        q, rows = jax.vmap(slot_pass)(layer.slot_w, layer.stamp, layer.src_version, sched.start)
        if learn:
            slots = jnp.arange(layer.slot_w.shape[0])[:, None]
            layer = layer._replace(
                slot_w=layer.slot_w.at[slots, neurons, contexts].set(rows),
                stamp=layer.stamp.at[slots, neurons, contexts].set(jnp.broadcast_to(sched.start[:, None], stamp_shape(layer))),
            )
        return layer, jnp.swapaxes(q, 1, 2)

    def body(s, carry):
        layer, q_all = carry
        q, rows = slot_pass(layer.slot_w[s], layer.stamp[s], layer.src_version[s], sched.start[s])
        if learn:
            layer = layer._replace(
                slot_w=layer.slot_w.at[s, neurons, contexts].set(rows),
                stamp=layer.stamp.at[s, neurons, contexts].set(sched.start[s]),
            )
        return layer, q_all.at[s].set(q.T)

    q_all = jnp.full(layer.loglik.shape, 0.5, jnp.float32)
    return jax.lax.fori_loop(0, sched.size, body, (layer, q_all))


def stamp_shape(layer: LayerState):
    return (layer.stamp.shape[0], layer.stamp.shape[1])


def member_posterior(layer: LayerState):
    """``alpha_{s,m} = softmax_m(log lambda_m + L_m)`` of every slot and neuron. -> [S, M, N]."""
    return softmax(layer.logprior + layer.loglik, axis=1)


def level_posterior(layer: LayerState, sched: Schedule, prior: tree.TreePrior):
    """``pi_j = softmax_j(Lambda_j + R_{canon(j)})``: posterior that the current step lies in the node of
    level ``j`` (ALGORITHMS.md 3.3); levels beyond the depth get 0. -> [levels, N]."""
    lam = jax.vmap(tree.level_log_prior, in_axes=(1, None, None), out_axes=1)(layer.log_b, sched.depth, prior)
    return softmax(lam + _slot_log_evidence(layer)[canonical_slots(sched)], axis=0)


def _mixture(layer: LayerState, sched: Schedule, q, prior: tree.TreePrior):
    """Neuron outputs ``p = sum_j pi_j sum_m alpha_{j,m} q_{j,m}`` [N] from member predictions q [S, M, N]."""
    nu = jnp.sum(member_posterior(layer) * q, axis=1)  # [S, N]
    return jnp.sum(level_posterior(layer, sched, prior) * nu[canonical_slots(sched)], axis=0)


def _forward(net: ClassNet, sched: Schedule, z, x, cfg: NetConfig, learn: bool):
    """All layers: returns the (updated) net, the output ``p`` of the last layer [1] and the input
    logits of layers 2..L (bias excluded, concatenated) for the step's record."""
    logits = mixing.feature_logits(z, cfg.ggm.prob_eps)
    layers, hidden = [], []
    for index, layer in enumerate(net.layers):
        if index:
            hidden.append(logits[:-1])
        layer, q = _layer_pass(layer, sched, z, logits, x, cfg, learn)
        p = _mixture(layer, sched, q, cfg.prior)
        if learn:
            layer = layer._replace(loglik=layer.loglik + mixing.log_prob(q, x))
        layers.append(layer)
        logits = mixing.input_logits(p, cfg.ggm.prob_eps)
    hidden = jnp.concatenate(hidden) if hidden else jnp.zeros(0, jnp.float32)
    return net._replace(layers=tuple(layers)), p, hidden


def predict(state: NCTLState, z, cfg: NetConfig):
    """``P(x_{t+1} = 1 | z)`` of every class network, frozen. Call after ``prepare`` when due."""
    adv = advance_schedule(state.schedule)

    def one(net):
        net = _restart_net(net, adv, cfg)
        return _forward(net, adv.new, z, jnp.float32(0), cfg, learn=False)[1][0]

    return jax.vmap(one)(state.nets)


def _record_step(net: ClassNet, sched: Schedule, key, z, y, hidden, cfg: NetConfig) -> ClassNet:
    """Store step ``t``'s record in the arena and offer it to every live slot's reservoir."""
    record = net.free_ids[(sched.t - 1) % cfg.chunk]
    net = net._replace(
        arena_z=net.arena_z.at[record].set(z.astype(jnp.float32)),
        arena_h=net.arena_h.at[record].set(hidden),
        arena_y=net.arena_y.at[record].set(y),
    )
    keys = jax.vmap(lambda r: reservoir.event_key(key, reservoir.SEGMENT_TAG, r, sched.t))(sched.start)
    positions, n, seen = jax.vmap(lambda n, s, k: reservoir.offer(n, s, cfg.pool.reservoir_size, k))(
        net.segment_n, net.segment_seen, keys
    )
    live = jnp.arange(positions.shape[0]) < sched.size
    keep = live & (positions >= 0)
    slots = jnp.arange(positions.shape[0])
    safe = jnp.maximum(positions, 0)
    segment = net.segment.at[slots, safe].set(jnp.where(keep, record, net.segment[slots, safe]))
    return net._replace(
        segment=segment, segment_n=jnp.where(live, n, net.segment_n), segment_seen=jnp.where(live, seen, net.segment_seen)
    )


def step(state: NCTLState, z, y, cfg: NetConfig):
    """One step: restart bookkeeping, predict, learn. Returns the state and the pre-update
    predictions [classes]. ``prepare`` must have run if ``t`` (the new step) is 1 mod P."""
    adv = advance_schedule(state.schedule)

    def one(net, positive):
        x = (y == positive).astype(jnp.float32)
        net = _restart_net(net, adv, cfg)
        net, p, hidden = _forward(net, adv.new, z, x, cfg, learn=True)
        return _record_step(net, adv.new, state.key, z, y, hidden, cfg), p[0]

    nets, p = jax.vmap(one)(state.nets, state.positive)
    return state._replace(schedule=adv.new, nets=nets), p


def run_chunk(state: NCTLState, Z, Y, n, cfg: NetConfig):
    """``n <= P`` steps on rows ``Z[:n]`` [P, d], ``Y[:n]`` [P]; returns predictions [P, classes]."""

    def body(i, carry):
        state, preds = carry
        state, p = step(state, Z[i], Y[i], cfg)
        return state, preds.at[i].set(p)

    preds = jnp.zeros((Z.shape[0], state.positive.shape[0]), jnp.float64)
    return jax.lax.fori_loop(0, n, body, (state, preds))


# ----------------------------------------------------------------------------- pool updates


def prepare(state: NCTLState, cfg: NetConfig):
    """Before step ``t = state.t + 1`` (``t = 1 mod P``): pool updates of the closing segments of
    length >= L_min, longest first (ALGORITHMS.md 4.2 step 2), then reserve arena rows for the
    chunk. Returns the state and whether every network found ``P`` free rows."""
    sched = state.schedule
    t = sched.t + 1
    if cfg.pool.capacity:
        completed = tree.completed_level(jnp.maximum(t, 2), sched.depth)
        first = jnp.where(t >= 2, completed, sched.depth + 1)
        last_eligible = sched.depth - cfg.pool.min_segment_log2
        canon = canonical_slots(sched)

        def close(level, nets):
            def update(nets):
                return jax.vmap(lambda net, positive: _close_segment(net, positive, sched, canon[level], t, state.key, cfg))(
                    nets, state.positive)

            return jax.lax.cond(level <= last_eligible, update, lambda nets: nets, nets)

        nets = jax.lax.fori_loop(first, sched.depth + 1, close, state.nets)
    else:
        nets = state.nets
    return reserve(state._replace(nets=nets), cfg)


def reserve(state: NCTLState, cfg: NetConfig):
    """Reserve the arena rows of the next chunk; also returns whether every network found ``P``."""
    nets = jax.vmap(lambda net: collect(net, state.schedule, cfg))(state.nets)
    return state._replace(nets=nets), jnp.all(nets.free_ids >= 0)


def collect(net: ClassNet, sched: Schedule, cfg: NetConfig) -> ClassNet:
    """Reserve ``P`` arena rows that no live reservoir refers to (mark and sweep)."""
    rows = net.arena_y.shape[0]
    size = cfg.pool.reservoir_size
    held = jnp.zeros(rows, bool)
    live_slot = jnp.arange(net.segment.shape[0])[:, None] < sched.size
    used = live_slot & (jnp.arange(size)[None, :] < net.segment_n[:, None])
    held = held.at[jnp.where(used, net.segment, rows)].set(True, mode="drop")
    for layer in net.layers:
        used = layer.pool_valid[:, :, None] & (jnp.arange(size) < layer.lineage_n[:, :, None])
        held = held.at[jnp.where(used, layer.lineage, rows)].set(True, mode="drop")
    (free,) = jnp.nonzero(~held, size=cfg.chunk, fill_value=-1)
    return net._replace(free_ids=free.astype(jnp.int32))


def _record_inputs(net: ClassNet, layer_index: int, ids, cfg: NetConfig):
    """Side information [..., d] and the layer's input logits [..., K] of stored records ``ids``."""
    z = net.arena_z[ids]
    if layer_index == 0:
        logits = jax.vmap(mixing.feature_logits, in_axes=(0, None))(z.reshape(-1, z.shape[-1]), cfg.ggm.prob_eps)
    else:
        offset = sum(cfg.layer_sizes[: layer_index - 1])
        h = net.arena_h[ids][..., offset: offset + cfg.layer_sizes[layer_index - 1]]
        return z, jnp.concatenate([h, jnp.full(h.shape[:-1] + (1,), mixing.BIAS_LOGIT, jnp.float32)], axis=-1)
    return z, logits.reshape(ids.shape + (-1,))


def _close_segment(net: ClassNet, positive, sched: Schedule, slot, t, key, cfg: NetConfig) -> ClassNet:
    """UPDATEMODELPOOL (ALGORITHMS.md 4.3) of every neuron of every layer for the segment of
    ``slot`` that closes before step ``t``."""
    ids = net.segment[slot]
    safe = jnp.maximum(ids, 0)
    segment = (ids, net.segment_n[slot], net.segment_seen[slot], (net.arena_y[safe] == positive).astype(jnp.float32))
    merge_key = reservoir.event_key(key, reservoir.MERGE_TAG, sched.start[slot], t)
    layers = tuple(
        _close_layer(layer, index, net, positive, sched, slot, t, segment, merge_key, cfg)
        for index, layer in enumerate(net.layers)
    )
    return net._replace(layers=layers)


def _close_layer(layer: LayerState, index, net, positive, sched, slot, t, segment, merge_key, cfg: NetConfig):
    pcfg = cfg.pool
    k = pcfg.capacity
    neurons = jnp.arange(layer.slot_w.shape[1])
    predict = jax.vmap(mixing.predict, in_axes=(0, 0, None))

    # 1. each neuron's winner and its full weights
    winner = jax.vmap(pool_rules.select_winner, in_axes=(1, 1))(layer.loglik[slot], layer.logprior[slot])
    winner_w = _winner_rows(layer, slot, sched.start[slot], winner, _init_row(cfg, layer.slot_w.shape[-1]))
    parent = jnp.minimum(winner, k - 1)
    stored = winner < k
    parent_current = stored & layer.pool_valid[parent, neurons] & (
        layer.pool_version[parent, neurons] == layer.src_version[slot, parent, neurons])

    # 2. refine test: winner vs its unchanged parent on the parent's lineage reservoir
    lineage = layer.lineage[parent, neurons]  # [N, R]
    lineage_n = jnp.where(parent_current, layer.lineage_n[parent, neurons], 0)
    lineage_seen = jnp.where(parent_current, layer.lineage_seen[parent, neurons], 0)

    def lineage_gain(r):
        ids = jnp.maximum(lineage[:, r], 0)
        z, logits = _record_inputs(net, index, ids, cfg)
        x = (net.arena_y[ids] == positive).astype(jnp.float32)
        c = gating.neuron_contexts(layer.gates, z)
        new = mixing.log_prob(predict(winner_w[neurons, c], logits, cfg.ggm.prob_eps), x)
        old = mixing.log_prob(predict(layer.pool_w[neurons, c, parent], logits, cfg.ggm.prob_eps), x)
        return jnp.where(r < lineage_n, new - old, 0.0)

    gain = jnp.sum(jax.lax.map(lineage_gain, jnp.arange(pcfg.reservoir_size)), axis=0)

    # 3. hypothesis test: the pool (H0) vs the winner (H1) on the segment's reservoir
    segment_ids, segment_n, segment_seen, segment_x = segment
    seg_z, seg_logits = _record_inputs(net, index, jnp.maximum(segment_ids, 0), cfg)

    seg_contexts = jax.vmap(gating.contexts, in_axes=(None, 0))(layer.gates, seg_z)  # [R, N]

    def neuron_log_probs(n):
        """Frozen log-probabilities of neuron ``n``'s pool entries [R, k] and winner [R]; one neuron at a
        time so that its pool rows stay in cache while every record is scored."""
        c = seg_contexts[:, n]
        pool_q = jax.vmap(jax.vmap(mixing.predict, in_axes=(0, None, None)), in_axes=(0, 0, None))(
            layer.pool_w[n][c], seg_logits, cfg.ggm.prob_eps)
        win_q = jax.vmap(mixing.predict, in_axes=(0, 0, None))(winner_w[n][c], seg_logits, cfg.ggm.prob_eps)
        return mixing.log_prob(pool_q, segment_x[:, None]), mixing.log_prob(win_q, segment_x)

    logp_pool, logp_winner = jax.lax.map(neuron_log_probs, neurons)  # [N, R, k], [N, R]
    logp_pool, logp_winner = jnp.moveaxis(logp_pool, 0, 1), logp_winner.T  # [R, N, k], [R, N]
    e0 = jax.vmap(lambda logp, valid: pool_rules.h0_evidence(logp, segment_n, valid, pcfg.joint_evidence), in_axes=(0, 1))(
        jnp.moveaxis(logp_pool, 0, 2), layer.pool_valid)
    e1 = jnp.sum(jnp.where(jnp.arange(pcfg.reservoir_size)[:, None] < segment_n, logp_winner, 0.0), axis=0)
    action = pool_rules.decide(stored, parent_current, gain, e0, e1, jnp.any(layer.pool_valid, axis=0), pcfg)
    insert = jax.vmap(lambda valid, time: pool_rules.insertion_index(valid, time, t, pcfg), in_axes=(1, 1))
    target = jnp.where(action == pool_rules.REFINE, parent, insert(layer.pool_valid, layer.pool_time))
    write = action != pool_rules.SKIP
    added = action == pool_rules.ADD
    events = jnp.stack([action == pool_rules.REFINE, action == pool_rules.SKIP, added,
                        added & jnp.all(layer.pool_valid, axis=0)], axis=1)

    # 4. the new entry's lineage: its parent's (if still current) merged with the segment's
    positions, merged_n, merged_seen = jax.vmap(
        lambda n, seen: reservoir.merge(n, seen, segment_n, segment_seen, pcfg.reservoir_size, merge_key)
    )(lineage_n, lineage_seen)
    candidates = jnp.concatenate([lineage, jnp.broadcast_to(segment_ids, lineage.shape)], axis=1)
    merged = jnp.where(positions >= 0, jnp.take_along_axis(candidates, jnp.maximum(positions, 0), axis=1), -1)

    # 5. write, after copying the rows live slots still read from the old entries
    layer = _materialise(layer, sched, target, write)
    keep = lambda new, old: jnp.where(write.reshape(write.shape + (1,) * (new.ndim - 1)), new, old)
    return layer._replace(
        pool_w=layer.pool_w.at[neurons, :, target].set(keep(winner_w, layer.pool_w[neurons, :, target])),
        pool_valid=layer.pool_valid.at[target, neurons].set(layer.pool_valid[target, neurons] | write),
        pool_time=layer.pool_time.at[target, neurons].set(keep(t, layer.pool_time[target, neurons])),
        pool_version=layer.pool_version.at[target, neurons].add(write.astype(jnp.int32)),
        lineage=layer.lineage.at[target, neurons].set(keep(merged, layer.lineage[target, neurons])),
        lineage_n=layer.lineage_n.at[target, neurons].set(keep(merged_n, layer.lineage_n[target, neurons])),
        lineage_seen=layer.lineage_seen.at[target, neurons].set(keep(merged_seen, layer.lineage_seen[target, neurons])),
        pool_born=layer.pool_born.at[target, neurons].set(jnp.where(added, t, layer.pool_born[target, neurons])),
        pool_events=layer.pool_events + events.astype(jnp.int32),
    )


def _winner_rows(layer: LayerState, slot, start, winner, init_value):
    """Full weight matrix [N, C, K] of each neuron's member ``winner`` [N] in ``slot`` (one slot, or one
    per neuron [N] with its ``start`` [N]): rows used in the segment from the slot, the others from
    their source (pool entry or initial value)."""
    neurons = jnp.arange(layer.slot_w.shape[1])
    k = layer.pool_w.shape[2]
    rows = layer.slot_w[slot, neurons, :, winner]
    stale = (layer.stamp[slot, neurons] != jnp.asarray(start)[..., None])[:, :, None]
    if not k:  # no pool: the fresh member is the only one
        return jnp.where(stale, jnp.full_like(rows, init_value), rows)
    parent = jnp.minimum(winner, k - 1)
    from_pool = (winner < k) & (layer.src_version[slot, parent, neurons] == layer.pool_version[parent, neurons])
    source = jnp.where(from_pool[:, None, None], layer.pool_w[neurons, :, parent], rows)
    source = jnp.where((winner == k)[:, None, None], jnp.full_like(rows, init_value), source)
    return jnp.where(stale, source, rows)


def member_weights(layer: LayerState, sched: Schedule, slot, member, cfg: NetConfig):
    """Full weight matrix [N, C, K] of member ``member`` [N] (``k``: the fresh one) of slot ``slot``
    ([N] or one for all) for every neuron, as the member would predict with it now."""
    return _winner_rows(layer, slot, sched.start[slot], member, _init_row(cfg, layer.slot_w.shape[-1]))


def _materialise(layer: LayerState, sched: Schedule, target, write) -> LayerState:
    """Copy into every live slot the stale rows of pool entries ``target`` [N] that are about to be
    overwritten (where ``write`` [N]) and that the slot still reads from the pool."""
    neurons = jnp.arange(layer.slot_w.shape[1])

    def body(s, layer):
        depends = write & (layer.src_version[s, target, neurons] == layer.pool_version[target, neurons])
        stale = (layer.stamp[s] != sched.start[s]) & depends[:, None]  # [N, C]
        rows = layer.slot_w[s, neurons, :, target]
        rows = jnp.where(stale[:, :, None], layer.pool_w[neurons, :, target], rows)
        return layer._replace(slot_w=layer.slot_w.at[s, neurons, :, target].set(rows))

    return jax.lax.fori_loop(0, sched.size, body, layer)
