"""The tree schedule, the pool rules and the reservoir sampling, one function at a time."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from nctl.core import pool, reservoir, tree


def test_trailing_zeros():
    assert [int(tree.trailing_zeros(n)) for n in (1, 2, 3, 4, 8, 12, 96)] == [0, 1, 0, 2, 3, 2, 5]


def test_the_slot_stack_keeps_one_slot_per_distinct_start_time():
    """After step t the live slots are level 0 and each level whose bit is set in t - 1 (docs §3.5), each
    started where its level's node started; the tree grows when t passes 2^D (§3.4)."""
    sched = tree.initial_schedule(8, 0)
    advance = jax.jit(tree.advance)
    for t in range(1, 70):
        depth = max(0, (t - 1).bit_length())
        assert (int(sched.t), int(sched.depth)) == (t, depth)
        live = [0] + [j for j in range(1, depth + 1) if (t - 1) >> (depth - j) & 1]
        assert list(np.asarray(sched.level[: int(sched.size)])) == live
        starts = [1] + [t - ((t - 1) % 2 ** (depth - j)) for j in live[1:]]
        assert list(np.asarray(sched.start[: int(sched.size)])) == starts
        step = advance(sched)
        grow = t == 2**depth  # the root completes: the old tree becomes level 1 and closes
        assert (int(step.closing), bool(step.grow)) == (1 if grow else depth - int(tree.trailing_zeros(t)), grow)
        sched = step.new


def test_level_prior_normalises_over_a_fresh_tree():
    for depth in range(5):
        lam = tree.level_log_prior(jnp.zeros(6), depth, tree.tree_prior())
        # with all B = 0 (fresh siblings) and equal evidences the posterior is 1/2, 1/4, ..., 2^-D, 2^-D
        probs = np.exp(np.asarray(lam))
        want = [2.0 ** -(j + 1) for j in range(depth)] + [2.0**-depth] + [0.0] * (5 - depth)
        np.testing.assert_allclose(probs, want, atol=1e-15)


def test_zero_split_probability_puts_all_mass_on_the_root():
    lam = tree.level_log_prior(jnp.array([-3.0, -1.0, 0.0, 0.0]), 3, tree.tree_prior(0.0))
    assert float(lam[0]) == 0.0 and np.all(np.isneginf(np.asarray(lam[1:])))


@pytest.mark.parametrize("split", [0.5, 0.3, 0.0, 1.0])
def test_node_weight_equals_the_recursion_written_out(split):
    prior = tree.tree_prior(split)
    rng = np.random.default_rng(0)
    log_b, log_r = rng.normal(-5, 2, 6), rng.normal(-4, 2, 6)
    for depth in range(6):
        for level in range(depth + 1):
            w = log_r[depth]
            for j in range(depth - 1, level - 1, -1):
                terms = [a for a in (prior.log_stop + log_r[j], prior.log_split + log_b[j] + w) if a > -math.inf]
                w = max(terms) + math.log(sum(math.exp(a - max(terms)) for a in terms)) if terms else -math.inf
            got = float(tree.node_log_weight(jnp.asarray(log_b), jnp.asarray(log_r), depth, level, prior))
            assert got == pytest.approx(w, abs=1e-12) if w > -math.inf else got == -math.inf


def test_member_prior_gives_fresh_half_and_splits_the_rest():
    prior = np.exp(np.asarray(pool.member_log_prior(jnp.array([3, 0]), 4)))  # two neurons: 3 stored, none
    np.testing.assert_allclose(prior[:, 0], [1 / 6, 1 / 6, 1 / 6, 0, 1 / 2])
    np.testing.assert_allclose(prior[:, 1], [0, 0, 0, 0, 1])


def test_winner_is_the_lowest_index_within_the_tie_tolerance_and_invalid_members_never_win():
    valid, tolerance = jnp.array([True, False, True, True]), pool.tie_tolerance(jnp.float64)
    assert int(pool.select_winner(jnp.array([-2.0, 5.0, -1.0, -1.5]), valid, tolerance)) == 2
    tied = jnp.array([-1000.0, 0.0, -1000.0 * (1 - 1e-14), -1000.0])  # equal up to rounding
    assert int(pool.select_winner(tied, valid, tolerance)) == 0
    assert int(pool.select_winner(jnp.array([-1000.0, 0.0, -999.9, -1000.0]), valid, tolerance)) == 2


def test_beats_needs_more_than_rounding():
    f32, f64 = pool.tie_tolerance(jnp.float32), pool.tie_tolerance(jnp.float64)
    for tolerance in (f32, f64):
        assert bool(pool.beats(1.0, 0.5, 0.0, tolerance)) and not bool(pool.beats(0.5, 1.0, 0.0, tolerance))
        assert not bool(pool.beats(1000.0 + 1e-10, 1000.0, 0.0, tolerance))
        assert bool(pool.beats(2.0, 0.5, 1.0, tolerance)) and not bool(pool.beats(1.4, 0.5, 1.0, tolerance))
        assert bool(pool.beats(-4.6458, -4.6459, 0.0, tolerance))
    # a refine test's two lineage log likelihoods of float32 predictions on a GPU, where this CPU computed
    # them equal: rows that parted by float32 rounding steps before (docs/algorithm.md §4.8)
    # are a tie; float64 predictions (KT counts) keep the finer tolerance
    gpu_pair = (-4.645898590107247, -4.645898798042708)
    assert not bool(pool.beats(*gpu_pair, 0.0, f32)) and bool(pool.beats(*gpu_pair, 0.0, f64))
    assert bool(pool.beats(-0.5, -0.5 - 2e-6, 0.0, f32))


def test_skip_evidence_joint_and_per_example_by_hand():
    probs = jnp.array([[0.9, 0.2, 0.5], [0.8, 0.3, 0.5], [0.5, 0.5, 0.5]])  # [records, members]
    members, used = jnp.array([True, True, False]), jnp.array([True, True, False])
    for joint, want in [(True, np.log((0.9 * 0.8 + 0.2 * 0.3) / 2)),
                        (False, np.log((0.9 + 0.2) / 2) + np.log((0.8 + 0.3) / 2))]:
        whole = pool.evidence(pool.evidence_add(pool.evidence_start(3), probs, members, used, joint), used, joint)
        assert float(whole) == pytest.approx(want)
        parts = pool.evidence_start(3)
        for m in range(3):  # members added one at a time, as pending states are
            parts = pool.evidence_add(parts, probs[:, m:m + 1], members[m:m + 1], used, joint)
        assert float(pool.evidence(parts, used, joint)) == pytest.approx(want)


def test_fifo_pruning_removes_every_state_at_or_below_the_cut_off_age():
    cfg = pool.PoolConfig(capacity=3)
    prune = lambda alive, age: list(np.asarray(pool.prune(jnp.array(alive), jnp.array(age), jnp.arange(len(age)),
                                                          100, cfg)))
    assert prune([1, 1, 1, 0], [5, 9, 7, 0]) == [False] * 4  # within capacity
    assert prune([1, 1, 1, 1], [5, 9, 7, 100]) == [True, False, False, False]
    # ages 100, 9, 7, 7: the cut-off (position k = 3) is 7, and both states of age 7 leave
    assert prune([1, 1, 1, 1], [7, 9, 7, 100]) == [True, False, True, False]


def test_spacing_pruning_drops_the_state_with_the_closest_neighbours_and_keeps_the_oldest_and_the_new():
    cfg = pool.PoolConfig(capacity=4, eviction="spacing")
    prune = lambda age, order=None: list(np.asarray(pool.prune(
        jnp.ones(len(age), bool), jnp.array(age), jnp.arange(len(age)) if order is None else jnp.array(order),
        100, cfg)))
    # ages 0, 48, 50, 90 and a state stored now: removing 48 leaves 50 - 0, 50 leaves 42, 90 leaves 50
    assert prune([90, 0, 48, 50, 100]) == [False, False, False, True, False]
    assert prune([0, 30, 60, 95, 100]) == [False, False, False, True, False]  # the youngest: 100 - 60
    assert prune([0, 100, 100, 100, 100]) == [False, True, False, False, False]  # only new ones left: pool order


def test_reservoir_keeps_every_item_with_equal_probability():
    capacity, stream, trials = 10, 60, 3000

    def one_trial(trial):
        def body(carry, item):
            slots, n, seen = carry
            key = reservoir.event_key(7, reservoir.SEGMENT_TAG, trial, item)
            position, n, seen = reservoir.offer(n, seen, capacity, key)
            slots = jnp.where(position >= 0, slots.at[jnp.maximum(position, 0)].set(item), slots)
            return (slots, n, seen), None

        (slots, n, _), _ = jax.lax.scan(body, (jnp.full(capacity, -1), jnp.int32(0), jnp.int32(0)), jnp.arange(stream))
        return jnp.zeros(stream).at[slots].add(1.0), n

    counts, n = jax.vmap(one_trial)(jnp.arange(trials))
    assert np.all(np.asarray(n) == capacity)
    frequency = np.asarray(counts).mean(axis=0)
    # each item is kept with probability R / stream = 1/6; binomial std over 3000 trials is 0.0068
    assert np.all(np.abs(frequency - capacity / stream) < 0.03)


def test_merge_keeps_everything_that_fits_and_weights_by_stream_share():
    positions, n, seen = reservoir.merge(3, 3, 4, 9, 10, reservoir.event_key(0, reservoir.MERGE_TAG, 1, 2))
    assert list(np.asarray(positions)) == [0, 1, 2, 10, 11, 12, 13, -1, -1, -1]
    assert (int(n), int(seen)) == (7, 12)

    def from_first(trial):
        positions, _, _ = reservoir.merge(10, 300, 10, 100, 10, reservoir.event_key(1, reservoir.MERGE_TAG, trial, 0))
        return jnp.sum(positions < 10)

    share = np.mean(np.asarray(jax.vmap(from_first)(jnp.arange(2000))))
    assert 6.5 < share < 8.5  # a stands for 3/4 of the stream: expect about 7.5 of the 10 positions


def largest_keys_first(n_a, seen_a, n_b, seen_b, R, u):
    """Reference: the positions of the R largest keys log(u) / weight of a[:n_a] ++ b[:n_b] (numpy),
    largest first, equal keys in position order; everything, a's first, when it all fits."""
    if n_a + n_b <= R:
        kept = list(range(n_a)) + [R + j for j in range(n_b)]
        return kept + [-1] * (R - len(kept))
    weight = np.concatenate([np.full(R, seen_a / max(n_a, 1)), np.full(R, seen_b / max(n_b, 1))])
    stored = np.concatenate([np.arange(R) < n_a, np.arange(R) < n_b])
    keys = np.log(u) / weight
    items = [i for i in np.lexsort((np.arange(2 * R), -keys)) if stored[i]]
    return items[:R]


@pytest.mark.parametrize("distinct_draws", [None, 3])
def test_a_merge_keeps_the_largest_keys_in_order_ties_by_position(monkeypatch, distinct_draws):
    """Full, partly filled and empty reservoirs (one b, many a, as at a close), and (with draws taking
    only 3 values and equal weights in both halves) keys tied within each half and across them."""
    R = 12
    rng = np.random.default_rng(7)
    u = np.asarray(reservoir.uniform(reservoir.draws(reservoir.event_key(5, reservoir.MERGE_TAG, 1, 64), 2 * R)))
    if distinct_draws:
        u = np.array([0.2, 0.5, 0.7])[rng.integers(0, distinct_draws, 2 * R)]
        monkeypatch.setattr(reservoir, "uniform", lambda words: jnp.asarray(u))
    for n_b, seen_b in ((R, 40), (5, 5), (0, 0), (R, R)):
        n_a = rng.integers(0, R + 1, 40)
        seen_a = n_a if distinct_draws else n_a * rng.integers(1, 6, 40)
        if distinct_draws:
            seen_b = n_b
        key = reservoir.event_key(5, reservoir.MERGE_TAG, 1, 64)
        positions, n, seen = jax.vmap(lambda n, seen: reservoir.merge(n, seen, n_b, seen_b, R, key))(
            jnp.asarray(n_a), jnp.asarray(seen_a))
        for i in range(len(n_a)):
            want = largest_keys_first(int(n_a[i]), int(seen_a[i]), n_b, seen_b, R, u)
            assert list(np.asarray(positions[i])) == want, (i, n_a[i], seen_a[i], n_b, seen_b)
        np.testing.assert_array_equal(n, np.minimum(n_a + n_b, R))
        np.testing.assert_array_equal(seen, seen_a + seen_b)


def test_the_largest_keys_come_first_equal_keys_in_position_order():
    """``reservoir.largest_first`` is ``top_k``'s answer for negative and -inf keys, ties included: many
    equal keys, equal keys across the two halves, runs of -inf, and all keys equal; so are its XLA code
    (other platforms, no kernel) and its kernel under vmap (a merge per neuron)."""
    rng = np.random.default_rng(11)
    picks = [jax.jit(reservoir.largest_first, static_argnums=1),
             jax.jit(reservoir.largest_first_by_sorts, static_argnums=1)]
    rows, wants = [], []
    for trial in range(30):
        keys = -rng.choice([0.25, 0.5, 3.0, 7.0], 40) if trial % 3 == 0 else np.log(rng.random(40)) / rng.random()
        keys[rng.random(40) < (0.3 if trial % 2 else 0.0)] = -np.inf
        if trial == 29:
            keys[:] = -1.5
        want = np.lexsort((np.arange(40), -keys))[:17]  # largest first, equal keys by position (numpy)
        for pick in picks:
            np.testing.assert_array_equal(np.asarray(pick(jnp.asarray(keys), 17)), want, err_msg=str(keys))
        rows.append(keys)
        wants.append(want)
    batched = jax.jit(jax.vmap(lambda keys: reservoir.largest_first(keys, 17)))(jnp.asarray(np.stack(rows)))
    np.testing.assert_array_equal(np.asarray(batched), np.stack(wants))


def test_stable_order_is_a_stable_argsort_along_the_first_axis():
    rng = np.random.default_rng(2)
    order = jax.jit(pool.stable_order)
    for shape, values in (((31, 25), 4), ((7,), 3), ((16, 3, 2), 1000), ((1, 5), 2),
                          ((pool.COUNTED_ORDER_MAX, 4), 9), ((pool.COUNTED_ORDER_MAX + 1, 4), 9)):  # counted, sorted
        keys = rng.integers(0, values, shape)
        np.testing.assert_array_equal(np.asarray(order(jnp.asarray(keys))), np.argsort(keys, axis=0, kind="stable"))
    keys = np.array([np.inf, -1.0, 2.5, -1.0, -np.inf, 2.5])
    np.testing.assert_array_equal(np.asarray(order(jnp.asarray(keys))), np.argsort(keys, kind="stable"))


def test_event_words_are_distinct_and_uniform():
    keys = np.asarray(reservoir.event_key(3, reservoir.SEGMENT_TAG, jnp.arange(1, 2001), 5000))
    assert len(set(keys.tolist())) == 2000
    u = np.asarray(reservoir.uniform(jnp.asarray(keys)))
    assert 0 < u.min() and u.max() < 1 and abs(u.mean() - 0.5) < 0.02
