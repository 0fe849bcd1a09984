"""The CPU kernel for a layer's rows (docs/algorithm.md §6.11) against the row rule written out in numpy
(float64), and its fallbacks."""

import ctypes
import os
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from nctl.core import native
from nctl.core.rows import GGMRows
from nctl.pool import Pool


@pytest.fixture(autouse=True)
def on_jax(monkeypatch):
    """The learners here run on JAX: these tests check the JAX engine's CPU kernels (the native engine's
    NCTL has its own, tests/core/test_native_nctl.py)."""
    monkeypatch.setenv("NCTL_ENGINE", "jax")


pytestmark = [
    pytest.mark.skipif(jax.default_backend() != "cpu", reason="a CPU kernel; other platforms run XLA's code"),
    pytest.mark.skipif(not native.enabled(), reason="the CPU kernel is not built (no C++ compiler)"),
]

ROWS = GGMRows(learning_rate=0.05, max_weight=1.5, weight_init="uniform")
B, W, K, S, N, C, E = 40, 3, 37, 5, 4, 3, 4  # K not a multiple of the kernel's 16 partial sums
# a layer of 2^18 products (8 slots x 16 neurons x 4 lanes x 512 weights): spread over the intra-op threads
LARGE = dict(B=160, W=4, K=512, S=8, N=16)
# threaded too, with 91 (slot, neuron) items: the threads' runs of consecutive items end in a short one
UNEVEN = dict(B=120, W=4, K=768, S=7, N=13)


def case(seed=0, size=3, B=B, W=W, K=K, S=S, N=N):
    rng = np.random.default_rng(seed)
    blocks = rng.normal(0, 1, (B, W, K)).astype(np.float32)
    pool = rng.normal(0, 1, (N, C, E, K)).astype(np.float32)
    read = rng.permutation(B)[:S * N].reshape(S, N).astype(np.int32)
    write = np.where(rng.random((S, N)) < 0.8, read, B + np.arange(S * N).reshape(S, N)).astype(np.int32)
    entry = rng.integers(-1, E, (S, N, W)).astype(np.int32)
    stale = rng.random((S, N, W)) < 0.4
    contexts = rng.integers(0, C, N).astype(np.int32)
    u = rng.normal(0, 2, K).astype(np.float32)
    return blocks, pool, read, write, entry, stale, contexts, u, np.float32(1.0), np.int32(size)


def reference(blocks, pool, read, write, entry, stale, contexts, u, x, size):
    """The rule of §1.3 for every live lane, in float64: q of the lane's row (its block's, or its source
    where stale), and that row updated into the written block."""
    blocks = blocks.astype(np.float64)
    (B, W, K), (S, N) = blocks.shape, read.shape
    new, q = blocks.copy(), np.full((S, N, W), 0.5)
    for p in range(size):
        for n in range(N):
            for w in range(W):
                if stale[p, n, w]:
                    e = entry[p, n, w]
                    row = pool[n, contexts[n], e].astype(np.float64) if e >= 0 else np.full(K, 1.0 / K)
                else:
                    row = blocks[read[p, n], w]
                q[p, n, w] = np.clip(1 / (1 + np.exp(-row @ u)), ROWS.prob_eps, 1 - ROWS.prob_eps)
                if write[p, n] < B:
                    step = ROWS.learning_rate * (q[p, n, w] - x)
                    new[write[p, n], w] = np.clip(row - step * u, -ROWS.max_weight, ROWS.max_weight)
    return new, q


@jax.jit
def train(*args):
    return native.ggm_rows(*args, rows=ROWS, learn=True)


@jax.jit
def predict(*args):
    return native.ggm_rows(*args, rows=ROWS, learn=False)[1]


@pytest.mark.parametrize("shape", [{}, LARGE, UNEVEN],
                         ids=["small, on the calling thread", "large, threaded", "threaded, a short last run"])
def test_the_kernel_trains_the_live_rows_by_the_rule(shape):
    args = case(size=3, **shape)
    want_blocks, want_q = reference(*args)
    blocks, q = train(*map(jnp.asarray, args))
    np.testing.assert_allclose(np.asarray(q), want_q, rtol=1e-5, atol=1e-7)
    assert np.all(np.asarray(q)[3:] == 0.5)  # slots past the live ones
    np.testing.assert_allclose(np.asarray(blocks), want_blocks, rtol=1e-5, atol=1e-6)
    untouched = np.setdiff1d(np.arange(args[0].shape[0]), args[3][:3])
    assert np.array_equal(np.asarray(blocks)[untouched], args[0][untouched])


def test_prediction_reads_the_blocks_and_rounds_as_training_does():
    args = case(seed=1)
    _, q_train = train(*map(jnp.asarray, args))
    q = predict(*map(jnp.asarray, args))
    assert np.array_equal(np.asarray(q), np.asarray(q_train))


def test_the_kernel_under_vmap_serves_each_network_and_shares_unbatched_arguments():
    """Blocks, pools, indices and labels per network; ``u`` and the live slot count shared by all."""
    cases = [case(seed) for seed in (2, 3, 4)]
    per_net = [jnp.asarray(np.stack([c[i] for c in cases])) for i in range(7)]
    labels = np.float32([1, 0, 1])
    u, size = cases[0][7], cases[0][9]

    def one(blocks, pool, read, write, entry, stale, contexts, x):
        return native.ggm_rows(blocks, pool, read, write, entry, stale, contexts, jnp.asarray(u), x, size, ROWS,
                               learn=True)

    blocks, q = jax.jit(jax.vmap(one))(*per_net, jnp.asarray(labels))
    for g, c in enumerate(cases):
        want_blocks, want_q = train(*map(jnp.asarray, c[:7] + (u, labels[g], size)))
        assert np.array_equal(np.asarray(q[g]), np.asarray(want_q))
        assert np.array_equal(np.asarray(blocks[g]), np.asarray(want_blocks))


def free_stack_reference(block_of, free, n_free, first, stop, layer, offset, neurons, clear):
    """A closing slot's blocks pushed onto its layer's stack, written out: slots in order, each neuron's
    contexts in order; pushes past the stack's end dropped but counted; then, where ``clear``, slot
    ``first``'s table emptied."""
    block_of, free, n_free = block_of.copy(), free.copy(), n_free.copy()
    for p in range(first, stop):
        for block in block_of[p, offset:offset + neurons].reshape(-1):
            if block >= 0:
                if n_free[layer] < free.shape[0]:
                    free[n_free[layer]] = block
                n_free[layer] += 1
    if clear and first < block_of.shape[0]:
        block_of[first] = -1
    return block_of, free, n_free


@pytest.mark.parametrize("first, stop, room, clear", [(1, 4, 200, True), (0, 5, 200, False), (2, 2, 200, True),
                                                      (0, 5, 12, True), (5, 5, 200, True)])
def test_free_blocks_are_pushed_in_slot_neuron_context_order_for_each_network(first, stop, room, clear):
    """Three networks, the range of slots shared by all; ``room`` 12: the stack overflows, and the pushes
    past its end are dropped and counted; slot 5 is past the table (nothing to free or empty)."""
    rng = np.random.default_rng(first * 10 + stop)
    S, columns, C, L = 5, 7, 6, 3
    block_of = np.where(rng.random((3, S, columns, C)) < 0.4, rng.integers(0, 1000, (3, S, columns, C)), -1)
    block_of = block_of.astype(np.int32)
    n_free = rng.integers(0, 10, (3, L)).astype(np.int32)
    free = rng.integers(0, 1000, (3, room)).astype(np.int32)

    def one(block_of, free, n_free):
        return native.free_blocks(block_of, free, n_free, first, stop, 1, 2, 4, clear)

    got = jax.jit(jax.vmap(one))(*map(jnp.asarray, (block_of, free, n_free)))
    for g in range(3):
        want = free_stack_reference(block_of[g], free[g], n_free[g], first, stop, 1, 2, 4, clear)
        for array, expected in zip(got, want):
            np.testing.assert_array_equal(np.asarray(array[g]), expected)
    alone = jax.jit(one)(*map(jnp.asarray, (block_of[0], free[0], n_free[0])))  # one network: no vmap
    want = free_stack_reference(block_of[0], free[0], n_free[0], first, stop, 1, 2, 4, clear)
    for array, expected in zip(alone, want):
        np.testing.assert_array_equal(np.asarray(array), expected)
    if room == 12:
        assert np.any(np.asarray(got[2])[:, 1] > room)  # the case overflows


def test_lanes_go_to_the_most_probable_members_as_the_xla_code_gives_them():
    """Bounded mode's lanes (§5.3) by the kernel are ``lanes_by_rank``'s, the XLA code's: the top members
    of each live node by log weight (ties to the lower member; absent members, of prior -inf, never),
    members that stay keeping their lanes and ``lane_since``, newcomers in rank order; per network
    (three, ``size`` and ``t`` shared) and alone; the slots that are not live keep their lanes."""
    from types import SimpleNamespace

    from nctl.core.engine.posterior import lanes_by_rank

    rng = np.random.default_rng(5)
    for trial in range(12):
        slots, members, neurons = 6, int(rng.integers(2, 18)), 4
        W = int(rng.integers(1, members + 1))
        size, t = int(rng.integers(0, slots + 1)), int(rng.integers(1, 1000))
        shape = (3, slots, members, neurons)
        values = [-np.inf, -3.0, 0.0, 2.5] if trial % 2 else None  # few distinct values: many ties
        logprior = rng.choice([-np.inf, -1.0, 0.0], size=shape, p=[0.2, 0.4, 0.4])
        loglik = rng.choice(values, size=shape) if values else rng.standard_normal(shape)
        loglik = np.where(np.isinf(logprior), 0.0, np.nan_to_num(loglik, neginf=-50.0))
        held = np.stack([[[np.where(rng.random(W) < 0.3, -1, rng.permutation(members)[:W])
                           for _ in range(neurons)] for _ in range(slots)] for _ in range(3)]).astype(np.int32)
        since = rng.integers(0, t, held.shape).astype(np.int32)

        def xla(logprior, loglik, held, since):
            net = SimpleNamespace(slots=SimpleNamespace(logprior=logprior, loglik=loglik, lanes=held, lane_since=since))
            cfg = SimpleNamespace(pool=SimpleNamespace(lanes=W), slots=slots)
            return lanes_by_rank(net, SimpleNamespace(size=jnp.int32(size), t=jnp.int32(t)), cfg)

        kernel = lambda *a: native.assign_lanes(*a, size, t)
        args = tuple(map(jnp.asarray, (logprior, loglik, held, since)))
        for got, want in zip(jax.jit(jax.vmap(kernel))(*args), jax.jit(jax.vmap(xla))(*args)):
            np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
        for got, want in zip(jax.jit(kernel)(*(a[1] for a in args)), jax.jit(xla)(*(a[1] for a in args))):
            np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_row_predictions_round_as_the_blocks_do():
    """A state predicts the same wherever it is read: in a block, as a pool entry (§6.11)."""
    args = case(seed=5)
    blocks, u = args[0], args[7]
    q_blocks = predict(*map(jnp.asarray, args))
    rows = blocks[args[2]]  # [S, N, W, K], the blocks each (slot, neuron) reads
    q_rows = jax.jit(lambda r: native.row_predictions(r, jnp.asarray(u), ROWS.prob_eps))(jnp.asarray(rows))
    live = ~args[5][:3]
    assert np.array_equal(np.asarray(q_rows)[:3][live], np.asarray(q_blocks)[:3][live])


def every_entry(neurons, entries):
    """``entry_predictions``' sources (one live slot whose members start from every entry), offset, live."""
    source = np.broadcast_to(np.arange(entries, dtype=np.int32)[None, :, None], (1, entries, neurons))
    return jnp.asarray(source), 0, jnp.ones(1, bool)


def test_only_the_entries_a_live_slot_starts_from_are_predicted():
    """Of each neuron's pool entries, those some member of a live slot starts from are predicted as
    gathered rows are; the others, among them those only a slot that is not live names, are not read
    (q = 1/2). Class networks under vmap, each with its own sources, a layer at columns 3 .. 3 + N - 1."""
    _, pool, *_, contexts, u, _, _ = case(seed=9)
    rng = np.random.default_rng(9)
    slots, k, columns, offset = 4, 3, N + 5, 3
    sources = rng.integers(-1, E, (2, slots, k, columns)).astype(np.int32)
    sources[:, :, :, offset + 1] = -1  # a neuron no member starts from an entry
    live = np.array([[True, True, False, False], [True, False, True, False]])
    pools = np.stack([pool, pool[:, ::-1]])
    got = jax.jit(jax.vmap(lambda p, s, l: native.entry_predictions(p, jnp.asarray(contexts), jnp.asarray(u),
                                                                    ROWS.prob_eps, s, offset, l)))(pools, sources, live)
    for g in range(2):
        gathered = np.asarray(jax.jit(lambda r: native.row_predictions(r, jnp.asarray(u), ROWS.prob_eps))(
            pools[g][np.arange(N), contexts]))
        for n in range(N):
            named = set(sources[g][live[g]][:, :, offset + n].ravel()) - {-1}
            for e in range(E):
                assert np.asarray(got)[g, n, e] == (gathered[n, e] if e in named else 0.5)


def test_pool_entries_are_predicted_in_place_as_gathered_rows_are():
    """Each neuron's pool entries at its context, read where they are stored, predict as the same rows
    gathered do, for one network and for class networks under vmap (their contexts apart, ``u`` shared)."""
    _, pool, *_, contexts, u, _, _ = case(seed=7)
    entries = lambda pool, contexts: native.entry_predictions(pool, contexts, jnp.asarray(u), ROWS.prob_eps,
                                                              *every_entry(N, E))
    gathered = lambda pool, contexts: native.row_predictions(pool[np.arange(N), contexts], jnp.asarray(u), ROWS.prob_eps)
    assert np.array_equal(np.asarray(jax.jit(entries)(pool, contexts)), np.asarray(jax.jit(gathered)(pool, contexts)))
    pools = np.stack([pool, pool[:, ::-1]])  # two networks, their contexts reversed
    nets_contexts = np.stack([contexts, (contexts + 1) % C])
    got = jax.jit(jax.vmap(entries))(pools, nets_contexts)
    for g in range(2):
        assert np.array_equal(np.asarray(got[g]), np.asarray(jax.jit(gathered)(pools[g], nets_contexts[g])))
        want = 1 / (1 + np.exp(-(pools[g][np.arange(N), nets_contexts[g]].astype(np.float64) @ u)))
        np.testing.assert_allclose(np.asarray(got[g]), np.clip(want, ROWS.prob_eps, 1 - ROWS.prob_eps), rtol=1e-5)


def test_many_neurons_pool_entries_are_predicted_by_the_threads_as_gathered_rows_are():
    """Enough entries to share the neurons out among the intra-op threads (2 x 13 neurons, 7 entries of
    1,500 weights: runs of neurons that end in a short one, four rows at a time and then three)."""
    rng = np.random.default_rng(8)
    pools = rng.normal(0, 0.05, (2, 13, 3, 7, 1500)).astype(np.float32)
    contexts = rng.integers(0, 3, (2, 13)).astype(np.int32)
    u = rng.normal(0, 1, 1500).astype(np.float32)
    got = jax.jit(jax.vmap(lambda p, c: native.entry_predictions(p, c, jnp.asarray(u), ROWS.prob_eps,
                                                                 *every_entry(13, 7))))(pools, contexts)
    for g in range(2):
        rows = pools[g][np.arange(13), contexts[g]]
        gathered = jax.jit(lambda r: native.row_predictions(r, jnp.asarray(u), ROWS.prob_eps))(rows)
        assert np.array_equal(np.asarray(got[g]), np.asarray(gathered))
        want = np.clip(1 / (1 + np.exp(-(rows.astype(np.float64) @ u))), ROWS.prob_eps, 1 - ROWS.prob_eps)
        np.testing.assert_allclose(np.asarray(got[g]), want, rtol=1e-5)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_member_values_are_the_sources_and_the_lanes_values(dtype):
    """Each member's value (§6.2): its source entry's, the fresh model's where it has none (and member
    k's), its lane's where one trains it; for one network and for class networks under vmap (the entries
    and lanes apart, the fresh value shared), against the loops written out."""
    rng = np.random.default_rng(11)
    nets, slots, k, columns, offset, neurons, E, lanes = 3, 4, 5, 9, 2, 6, 7, 3
    entries = rng.normal(size=(nets, neurons, E)).astype(dtype)
    fresh = dtype(0.25)
    source = rng.integers(-1, E, (nets, slots, k, columns)).astype(np.int32)
    values = rng.normal(size=(nets, slots, neurons, lanes)).astype(dtype)
    member = np.stack([[[rng.permutation(k + 1)[:lanes] for _ in range(neurons)] for _ in range(slots)]
                       for _ in range(nets)]).astype(np.int32)
    member[rng.random(member.shape) < 0.3] = -1

    def expected(g):
        out = np.full((slots, k + 1, neurons), fresh, dtype)
        for s in range(slots):
            for n in range(neurons):
                for m in range(k):
                    if source[g, s, m, offset + n] >= 0:
                        out[s, m, n] = entries[g, n, source[g, s, m, offset + n]]
                for w in range(lanes):
                    if member[g, s, n, w] >= 0:
                        out[s, member[g, s, n, w], n] = values[g, s, n, w]
        return out

    one = jax.jit(lambda e, s, v, m: native.member_values(e, fresh, s, offset, v, m))
    assert np.array_equal(np.asarray(one(entries[0], source[0], values[0], member[0])), expected(0))
    got = jax.jit(jax.vmap(one))(entries, source, values, member)
    assert got.dtype == dtype
    for g in range(nets):
        assert np.array_equal(np.asarray(got[g]), expected(g))


def test_pool_decisions_are_scored_in_place_as_gathered_rows_are():
    """A pool decision's scores (§4.5): each record's context picks its neuron's pool entries and the
    slot members' rows (a block's row, a pool entry or the fresh row), and its inputs are its clipped
    logits in a table with the bias last. Read in place they equal the same rows and inputs gathered
    and predicted one per record, to the last bit, and the rule in float64 to rounding; a neuron out of
    range or a member not scored is not computed."""
    rng = np.random.default_rng(6)
    pool = rng.normal(0, 1, (N, C, E, K)).astype(np.float32)
    blocks = rng.normal(0, 1, (5, 2, K)).astype(np.float32)  # 5 blocks of 2 lanes
    R, T, offset, bound, bias, init = 9, 20, 3, 1.5, 1.0, 0.25
    table = rng.normal(0, 2, (T, offset + K + 2)).astype(np.float32)  # inputs at columns offset .. offset + K - 2
    neurons = np.int32([2, 0, -1])
    contexts = rng.integers(0, C, (3, R)).astype(np.int32)
    entries = np.int32([[3, 0, 2], [1, 1, 3], [0, 2, 3]])
    rows = rng.choice([-1, -2, -4, 0, 3, 9], (2, 3, R)).astype(np.int32)  # fresh, entries 0 and 2, block rows
    scored = np.array([[True, True, True], [True, False, True]])
    score = jax.jit(lambda *a: native.pool_predictions(*a, offset, bound, bias, init, ROWS.prob_eps))
    for ids in (rng.integers(0, T, (3, R)), rng.integers(0, T, R)):  # records per neuron, or the same for all
        q = np.asarray(score(pool, blocks, neurons, contexts, entries, rows, scored, table, ids.astype(np.int32)))
        assert q.shape == (3, R, 5) and np.all(q[2] == 0.5) and np.all(q[1, :, 4] == 0.5)
        for b in range(2):
            members = [np.where(code[:, None] >= 0, blocks.reshape(-1, K)[np.maximum(code, 0)],
                                np.where(code[:, None] == -1, np.float32(init),
                                         pool[neurons[b], contexts[b], np.maximum(-2 - code, 0)]))
                       for code in rows[:, b]]
            gathered = np.concatenate([pool[neurons[b], contexts[b][:, None], entries[b]], np.stack(members, 1)], 1)
            records = ids[b] if ids.ndim == 2 else ids
            u = np.concatenate([np.clip(table[records, offset:offset + K - 1], -bound, bound),
                                np.full((R, 1), bias, np.float32)], axis=1)
            u = np.repeat(u[:, None], 5, 1)
            per_row = np.asarray(jax.jit(lambda r, v: native.row_predictions(r, v, ROWS.prob_eps))(gathered, u))
            computed = np.array([True] * 3 + list(scored[:, b]))
            assert np.array_equal(q[b][:, computed], per_row[:, computed])
            want = np.clip(1 / (1 + np.exp(-np.einsum("rjk,rjk->rj", gathered.astype(np.float64), u))), ROWS.prob_eps,
                           1 - ROWS.prob_eps)
            np.testing.assert_allclose(q[b][:, computed], want[:, computed], rtol=1e-5)


@pytest.mark.parametrize("contexts, width", [(5, 7), (64, 400)], ids=["small, on the calling thread", "threaded"])
@pytest.mark.parametrize("bounded", [False, True], ids=["exact", "bounded"])
def test_stored_rows_are_the_winners_rows_at_every_context(bounded, contexts, width):
    """A pool boundary's store (§6.3): for each neuron with an entry to write, the winner's row at every
    context is its block's lane where it holds a current one (bounded: a lane naming it, filled since it
    took the lane), else its source entry's row, else the fresh row; the other entries and neurons are
    untouched. For one network and for class networks under vmap (the slot shared), against the loops
    written out; the larger case (3 x 4 x 64 x 400 floats) is spread over the intra-op threads."""
    rng = np.random.default_rng(21)
    nets, neurons, entries, slots, k, columns, offset, lanes = 3, 4, 6, 3, 4, 9, 2, 3
    blocks_n = 40
    W = lanes if bounded else k + 1
    pool = rng.normal(size=(nets, neurons, contexts, entries, width)).astype(np.float32)
    blocks = rng.normal(size=(nets, blocks_n, W, width)).astype(np.float32)
    stamps = rng.integers(0, 10, (nets, blocks_n, W)).astype(np.int32)
    block_of = np.where(rng.random((nets, slots, columns, contexts)) < 0.7,
                        rng.integers(0, blocks_n, (nets, slots, columns, contexts)), -1).astype(np.int32)
    held = np.stack([[[rng.permutation(k + 1)[:W] for _ in range(columns)] for _ in range(slots)]
                     for _ in range(nets)]).astype(np.int32)
    held[rng.random(held.shape) < 0.3] = -1
    since = rng.integers(0, 10, (nets, slots, columns, W)).astype(np.int32)
    source = rng.integers(-1, entries, (nets, slots, k, columns)).astype(np.int32)
    slot, init = np.int32(1), 0.125
    winner = rng.integers(0, k + 1, (nets, neurons)).astype(np.int32)
    target = rng.integers(0, entries + 2, (nets, neurons)).astype(np.int32)  # entries and beyond: none
    # no entry both read (a winner's source) and written, as the pool update chooses its targets
    source[np.arange(nets)[:, None], slot, np.minimum(winner, k - 1), offset + np.arange(neurons)] = np.where(
        target < entries, (target + 1) % entries, -1)

    def expected(g):
        out = pool[g].copy()
        for n in range(neurons):
            if not 0 <= target[g, n] < entries:
                continue
            m, col = winner[g, n], offset + n
            for c in range(contexts):
                b = block_of[g, slot, col, c]
                lane = list(held[g, slot, col]).index(m) if bounded and m in held[g, slot, col] else m
                owns = b >= 0 and (not bounded or (m in held[g, slot, col]
                                                    and stamps[g, b, lane] >= since[g, slot, col, lane]))
                e = source[g, slot, m, col] if m < k else -1
                out[n, c, target[g, n]] = (blocks[g, b, lane] if owns else pool[g, n, c, e] if e >= 0
                                           else np.full(width, init, np.float32))
        return out

    one = jax.jit(lambda p, b, st, t, h, si, so, w, e: native.store_rows(
        p, b, st if bounded else None, t, h if bounded else None, si if bounded else None, so, slot, w, e, offset,
        init))
    args = (pool, blocks, stamps, block_of, held, since, source, winner, target)
    assert np.array_equal(np.asarray(one(*(a[0] for a in args))), expected(0))
    got = np.asarray(jax.jit(jax.vmap(one))(*args))
    for g in range(nets):
        assert np.array_equal(got[g], expected(g))


def test_the_engine_calls_the_kernel():
    """The engine's step program calls the kernel for every layer: the literal tests' default cases
    (tests/core/test_nctl_literal.py) check it against the reference network."""
    import nctl
    import nctl.core.engine

    learner = nctl.NCTL(layer_sizes=(2, 1), pool=Pool(size=2), depth=3)
    learner.learn_one(np.zeros(3, np.float32), 1)
    state, cfg = learner.state_, learner.cfg_
    step = jax.jit(lambda s, z, y: nctl.core.engine.step.step(s, z, y, cfg))
    text = step.lower(state, jnp.zeros(3, jnp.float32), jnp.int32(1)).as_text()
    assert "nctl_train_rows" in text and "nctl_entry_predictions" not in text  # exact mode: every member has a lane


def test_the_pool_boundary_calls_the_kernel_on_a_cpu_only(monkeypatch):
    """The pool boundary's decisions and reservoir merges call the kernel where the program runs on a
    CPU; traced as a process with an accelerator traces it (both branches) and lowered for a GPU, the
    same program holds none of its calls (the XLA code of §6.11 runs there)."""
    import nctl
    import nctl.core.engine
    from nctl.core import platform

    learner = nctl.NCTL(layer_sizes=(2, 1), pool=Pool(size=2, min_segment=2), depth=4)
    rng = np.random.default_rng(3)
    learner.learn_many(rng.normal(size=(8, 3)).astype(np.float32), rng.integers(0, 2, 8))
    state, cfg = learner.state_, learner.cfg_
    boundary = lambda: jax.jit(lambda s: nctl.core.engine.compiled.pool_boundary.__wrapped__(s, cfg)).trace(state)
    cpu = boundary().lower().as_text()
    assert "nctl_pool_predictions" in cpu and "nctl_largest_first" in cpu and "nctl_store_rows" in cpu
    monkeypatch.setattr(platform, "cpu_only", lambda: False)
    assert "nctl_" not in boundary().lower(lowering_platforms=("cuda",)).as_text()


def test_every_layer_goes_through_the_kernel_where_it_is_built(monkeypatch):
    """The Split MNIST network (§6.11): where the kernel is built it computes every layer; where it is
    not, the 784-input layer (larger than any vectorised layer) goes slot by slot and the 25-neuron layer
    and the output neuron are vectorised."""
    import nctl
    import nctl.core.engine

    learner = nctl.NCTL(layer_sizes=(50, 25, 1), context_bits=4, pool=Pool(size=15), depth=16)
    assert [shape.vectorised for shape in learner.engine_config(784).layers] == [False, False, False]
    monkeypatch.setattr(nctl.core.native, "enabled", lambda: False)
    assert [shape.vectorised for shape in learner.engine_config(784).layers] == [False, True, True]


@pytest.mark.parametrize("lanes", [True, False], ids=["each lane from its row", "each pool entry once"])
def test_the_river_path_predicts_each_next_row_as_learning_does(lanes, monkeypatch):
    """Through the kernel, the river path (a frozen prediction of the next row, then learning it) gives
    ``learn_many``'s pre-update predictions and state to the last bit: every prediction of a row uses
    one dot product, in a block or from a pool entry, whether a frozen prediction reads every lane's row
    (a small layer) or predicts each pool entry once (a large one, §6.2)."""
    import nctl
    import nctl.core.engine
    import nctl.core.engine.layer

    if not lanes:
        monkeypatch.setattr(nctl.core.engine.layer, "LANE_PREDICTION_BYTES", 0)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(70, 6)).astype(np.float32)
    y = (X[:, 0] + 0.3 * rng.normal(size=70) > 0).astype(int)
    settings = dict(layer_sizes=(4, 3, 1), context_bits=2, learning_rate=0.05,
                    pool=nctl.Pool(size=3, min_segment=8, reservoir_size=8), depth=9)
    batch = nctl.NCTL(**settings)
    want = batch.learn_many(X, y)
    one, got = nctl.NCTL(**settings), []
    for x, label in zip(X, y):
        got.append(one.predict_proba_one(x))
        one.learn_one(x, label)
    np.testing.assert_array_equal(np.array(got), want)
    one.flush()  # the last row waits to be learned with the next prediction
    for a, b in zip(jax.tree.leaves(one.state_), jax.tree.leaves(batch.state_)):
        assert np.array_equal(np.asarray(a), np.asarray(b))
    predict = jax.jit(lambda state, z: nctl.core.engine.compiled.predict_row(state, z, one.cfg_))
    assert ("nctl_entry_predictions" in predict.lower(one.state_, X[0]).as_text()) == (not lanes)  # the pool entries'


@pytest.mark.parametrize("env, warns", [({"NCTL_NATIVE": "0"}, False), ({"CXX": "false"}, True)])
def test_without_the_kernel_the_engine_runs_xla(tmp_path, env, warns):
    """Switched off, or when the build fails (here: a compiler that always fails), ``enabled`` is false,
    with a warning that names the failure in the second case."""
    code = ("import warnings; warnings.simplefilter('always'); from nctl.core import native; "
            "print(native.enabled())")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "NCTL_NATIVE_CACHE": str(tmp_path), **env})
    assert run.stdout.strip() == "False", run.stderr
    assert ("could not be built" in run.stderr) == warns
    assert not list(tmp_path.iterdir())  # a failed build leaves nothing behind


def test_a_missing_library_is_built_once_into_the_folder_given(tmp_path):
    """``build`` compiles a library that loads and holds every target, and a second call finds it."""
    first = native.build(tmp_path)
    built = first.stat().st_mtime_ns
    assert native.build(tmp_path) == first and first.stat().st_mtime_ns == built
    assert [path.name for path in tmp_path.iterdir()] == [native.library_name()]
    library = ctypes.cdll.LoadLibrary(str(first))
    assert all(hasattr(library, symbol) for symbol in native.TARGETS.values())


def test_the_library_name_follows_the_shared_header(tmp_path, monkeypatch):
    """Every source includes ``kernel_common.h``, so a change to it is a new library, not a stale one."""
    header = tmp_path / "kernel_common.h"
    header.write_bytes(native.HEADERS[0].read_bytes())
    monkeypatch.setattr(native, "HEADERS", (header,))
    same = native.library_name()
    header.write_bytes(header.read_bytes() + b"// changed\n")
    assert same != native.library_name()
    assert all(f'#include "{native.HEADERS[0].name}"' in source.read_text() for source in native.SOURCES)


@pytest.mark.skipif(not (Path(native.__file__).parent / native.library_name()).exists(),
                    reason="not installed with pip: no library was built at install time")
def test_the_library_built_at_install_time_is_used(tmp_path):
    """A process that finds the installed library builds nothing into its cache."""
    run = subprocess.run([sys.executable, "-c", "from nctl.core import native; print(native.enabled())"],
                         capture_output=True, text=True, timeout=120, env={**os.environ, "NCTL_NATIVE_CACHE": str(tmp_path)})
    assert run.stdout.strip() == "True", run.stderr
    assert not list(tmp_path.iterdir())
