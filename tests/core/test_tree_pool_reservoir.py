"""The tree schedule, the pool rules and the reservoir sampling, one function at a time."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from nctl.core import pool, reservoir, tree


def test_trailing_zeros_and_completed_levels_follow_the_worked_schedule():
    assert [int(tree.trailing_zeros(n)) for n in (1, 2, 3, 4, 8, 12, 96)] == [0, 1, 0, 2, 3, 2, 5]
    # D = 3 (ALGORITHMS.md 7.2): t = 2 completes level 3, t = 3 level 2, t = 5 level 1, t = 9 the root
    assert [int(tree.completed_level(t, 3)) for t in range(2, 10)] == [3, 2, 3, 1, 3, 2, 3, 0]


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


def test_member_prior_gives_fresh_half_and_splits_the_rest():
    prior = np.exp(np.asarray(pool.member_log_prior(jnp.array([True, False, True, True]))))
    np.testing.assert_allclose(prior, [1 / 6, 0, 1 / 6, 1 / 6, 1 / 2])
    np.testing.assert_allclose(np.exp(np.asarray(pool.member_log_prior(jnp.zeros(3, bool)))), [0, 0, 0, 1])


def test_winner_ties_go_to_stored_states_and_invalid_members_never_win():
    logprior = jnp.array([-1.0, -jnp.inf, -1.0, -0.5])
    assert int(pool.select_winner(jnp.array([-2.0, 5.0, -1.0, -1.0]), logprior)) == 2


def test_h0_evidence_joint_and_per_example_by_hand():
    logp = jnp.log(jnp.array([[0.9, 0.8, 0.5], [0.2, 0.3, 0.5], [0.5, 0.5, 0.5]]))
    valid = jnp.array([True, True, False])
    joint = pool.h0_evidence(logp, 2, valid, joint=True)
    per_example = pool.h0_evidence(logp, 2, valid, joint=False)
    assert float(joint) == pytest.approx(np.log((0.9 * 0.8 + 0.2 * 0.3) / 2))
    assert float(per_example) == pytest.approx(np.log((0.9 + 0.2) / 2) + np.log((0.8 + 0.3) / 2))


def test_decisions_refine_then_skip_then_add():
    cfg = pool.PoolConfig()
    decide = lambda *args: int(pool.decide(*(jnp.asarray(a) for a in args), cfg))
    assert decide(True, True, 0.1, 0.0, 1.0, True) == pool.REFINE
    assert decide(True, False, 0.1, 2.0, 1.0, True) == pool.SKIP  # parent gone: no refine
    assert decide(False, False, 0.0, 2.0, 1.0, True) == pool.SKIP
    assert decide(False, False, 0.0, 2.0, 1.0, False) == pool.ADD  # empty pool: H0 impossible
    assert decide(True, True, -0.1, 0.5, 1.0, True) == pool.ADD


def test_insertion_fills_free_entries_then_evicts_the_oldest():
    cfg = pool.PoolConfig(capacity=3)
    assert int(pool.insertion_index(jnp.array([True, False, True]), jnp.array([5, 0, 1]), 10, cfg)) == 1
    assert int(pool.insertion_index(jnp.array([True, True, True]), jnp.array([5, 9, 2]), 10, cfg)) == 2


def test_spacing_eviction_drops_the_entry_with_the_closest_neighbours_and_keeps_the_oldest():
    cfg = pool.PoolConfig(capacity=4, eviction="spacing")
    full = jnp.ones(4, bool)
    # sorted times 0, 48, 50, 90 and the new state at 100: removing 48 leaves 50 - 0, removing 50 leaves
    # 90 - 48 = 42, removing 90 leaves 100 - 50
    assert int(pool.insertion_index(full, jnp.array([90, 0, 48, 50]), 100, cfg)) == 3
    assert int(pool.insertion_index(full, jnp.array([0, 30, 60, 95]), 100, cfg)) == 3  # newest: 100 - 60
    assert int(pool.insertion_index(jnp.array([True, False, True, True]), jnp.array([0, 0, 1, 2]), 3, cfg)) == 1
    oldest_kept = [int(pool.insertion_index(full, jnp.array([0, t, t + 1, t + 2]), t + 3, cfg)) for t in (1, 50)]
    assert 0 not in oldest_kept
    with pytest.raises(ValueError, match="eviction"):
        pool.PoolConfig(eviction="lru").validate()


def test_reservoir_keeps_every_item_with_equal_probability():
    capacity, stream, trials = 10, 60, 3000

    def one_trial(key):
        def body(carry, item):
            slots, n, seen = carry
            position, n, seen = reservoir.offer(n, seen, capacity, jax.random.fold_in(key, item))
            slots = jnp.where(position >= 0, slots.at[jnp.maximum(position, 0)].set(item), slots)
            return (slots, n, seen), None

        (slots, n, _), _ = jax.lax.scan(body, (jnp.full(capacity, -1), jnp.int32(0), jnp.int32(0)), jnp.arange(stream))
        return jnp.zeros(stream).at[slots].add(1.0), n

    counts, n = jax.vmap(one_trial)(jax.random.split(jax.random.PRNGKey(0), trials))
    assert np.all(np.asarray(n) == capacity)
    frequency = np.asarray(counts).mean(axis=0)
    # each item is kept with probability R / stream = 1/6; binomial std over 3000 trials is 0.0068
    assert np.all(np.abs(frequency - capacity / stream) < 0.03)


def test_merge_keeps_everything_that_fits_and_weights_by_stream_share():
    positions, n, seen = reservoir.merge(3, 3, 4, 9, 10, jax.random.PRNGKey(0))
    assert list(np.asarray(positions)) == [0, 1, 2, 10, 11, 12, 13, -1, -1, -1]
    assert (int(n), int(seen)) == (7, 12)

    def from_first(key):
        positions, _, _ = reservoir.merge(10, 300, 10, 100, 10, key)
        return jnp.sum(positions < 10)

    share = np.mean(np.asarray(jax.vmap(from_first)(jax.random.split(jax.random.PRNGKey(1), 2000))))
    assert 6.5 < share < 8.5  # a stands for 3/4 of the stream: expect about 7.5 of the 10 positions
