"""PTW and FMN over KT against brute-force enumeration and a literal slow FMN."""

import functools
import itertools

import jax
import numpy as np
import pytest

from nctl.core import engine
from nctl.core.rows import KTRows
from nctl.pool import Pool, with_pool
from nctl.sequence import FMN, KT, PTW
from tests.reference.brute_force import anytime_depth, fmn_fixed_pool_log_prob, kt_log_prob, ptw_log_prob
from tests.reference.fmn_reference import ReferenceFMN

ALL_8_BIT_STRINGS = [list(s) for s in itertools.product([0, 1], repeat=8)]


def test_kt_log_probs_match_sequential_product():
    bits = [0, 1, 1, 0, 1, 1, 1, 0, 0, 1]
    got = KT().log_probs(np.array(bits))
    want = [kt_log_prob(bits[: n + 1]) for n in range(len(bits))]
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)


def sequential_log_probs(bits, evidence, depth):
    """``sum_s log P(x_s | x_<s)`` where each conditional is a ratio of the evidence of the tree in
    use at step ``s`` (fixed ``depth``, or the anytime depth ``ceil(log2 s)`` when it is None)."""
    cache = functools.lru_cache(maxsize=None)(lambda n, d: evidence(bits[:n], d) if n else 0.0)
    total, out = 0.0, []
    for n in range(1, len(bits) + 1):
        d = depth if depth is not None else anytime_depth(n)
        total += cache(n, d) - cache(n - 1, d)
        out.append(total)
    return np.array(out)


@pytest.mark.parametrize("depth", [3, None])
def test_ptw_equals_enumeration_of_every_segmentation_after_every_prefix(depth):
    ptw = PTW(depth=depth)
    worst_evidence = worst_sequential = 0.0
    for bits in ALL_8_BIT_STRINGS:
        evidence = ptw.log_evidence(np.array(bits))
        want = [ptw_log_prob(bits[:n], depth or anytime_depth(n)) for n in range(1, 9)]
        worst_evidence = max(worst_evidence, np.max(np.abs(evidence - want)))
        sequential = sequential_log_probs(bits, ptw_log_prob, depth)
        worst_sequential = max(worst_sequential, np.max(np.abs(ptw.log_probs(np.array(bits)) - sequential)))
    assert worst_evidence < 1e-9 and worst_sequential < 1e-9


@pytest.mark.parametrize("depth", [3, None])
def test_fmn_with_fixed_pool_equals_enumeration_of_segmentations_and_members(depth):
    rng = np.random.default_rng(0)
    for _ in range(20):
        bits = list(rng.integers(0, 2, 8))
        pool = [tuple(float(c) for c in rng.integers(0, 6, 2)) for _ in range(rng.integers(0, 3))]
        # min_segment beyond 2^3 keeps the pool fixed: no segment is ever long enough to update it
        run = FMN(depth=depth, pool=Pool(size=2, min_segment=16), initial_pool=tuple(pool)).run(np.array(bits))
        brute = lambda b, d: fmn_fixed_pool_log_prob(b, d, pool)  # noqa: E731
        want = [brute(bits[:n], depth or anytime_depth(n)) for n in range(1, 9)]
        np.testing.assert_allclose(run.evidence, want, rtol=0, atol=1e-9)
        np.testing.assert_allclose(np.cumsum(run.log_px), sequential_log_probs(bits, brute, depth), rtol=0, atol=1e-9)
        assert [tuple(c) for c in run.pool] == pool


def recurring_bits(rng, lengths=(20, 12, 33, 7), repeats=5, flip=0.1):
    pattern = np.concatenate([np.full(n, i % 2) for i, n in enumerate(lengths)])
    bits = np.tile(pattern, repeats)
    return np.where(rng.random(len(bits)) < flip, 1 - bits, bits)


def random_recurring_bits(rng, n):
    """Segments of random lengths whose rates recur (a few coins visited again and again)."""
    coins = rng.choice([0.03, 0.25, 0.6, 0.97], size=3, replace=False)
    rates = np.repeat(rng.choice(coins, size=24), rng.integers(3, 24, size=24))
    return (rng.random(n) < np.resize(rates, n)).astype(np.int64)


def assert_same_decisions(run, reference):
    """Cumulative (refine, skip, add, evict) after every step equal the reference's.

    docs/algorithm.md does not say whether ``events[t]`` is observed before or after the boundary
    processing of step t + 1, which the engine performs at the end of step t (§4.2, §6.1); both
    exact sequences are accepted, nothing in between.
    """
    got = np.asarray(run.events)
    assert got.shape == (len(reference.events), 4)
    for want in (reference.events, reference.events_unprepared):
        if np.array_equal(got, want):
            return
    want = np.asarray(reference.events)
    t = int(np.argmax(np.any(got != want, axis=1)))
    raise AssertionError(f"decisions differ first after step {t + 1}: got {got[t]}, reference {want[t]} "
                         f"(before the next boundary: {reference.events_unprepared[t]})")


RESERVOIR = 360  # the length of recurring_bits' strings: nothing is sampled on them or shorter ones
SETTINGS = [  # (pool_size, min_segment, joint_evidence, depth, eviction)
    (1, 1, True, None, "fifo"), (2, 4, True, None, "fifo"), (3, 2, False, None, "fifo"), (3, 8, True, 9, "fifo"),
    (4, 1, False, 10, "fifo"), (3, 2, True, None, "spacing"), (4, 1, False, 10, "spacing"),
]


@pytest.mark.parametrize("pool_size, min_segment, joint, depth, eviction", SETTINGS)
def test_fmn_matches_the_literal_reference_step_for_step(pool_size, min_segment, joint, depth, eviction):
    """With reservoirs at least as long as the stream nothing is sampled: predictions, evidence,
    decisions after every step and the final pool (in pool order) are those of the literal FMN."""
    rng = np.random.default_rng(pool_size * 10 + min_segment)
    bits = recurring_bits(rng)
    assert len(bits) <= RESERVOIR
    kwargs = dict(depth=depth, pool_size=pool_size, min_segment=min_segment, joint_evidence=joint,
                  eviction=eviction)
    reference = ReferenceFMN(**kwargs).run(bits)
    run = FMN(**with_pool({**kwargs, "reservoir_size": RESERVOIR})).run(bits)
    np.testing.assert_allclose(run.p1, reference.p1, rtol=0, atol=1e-9)
    np.testing.assert_allclose(run.log_px, reference.log_px, rtol=0, atol=1e-9)
    np.testing.assert_allclose(run.evidence, reference.evidence, rtol=0, atol=1e-9)
    assert_same_decisions(run, reference)
    assert [tuple(c) for c in run.pool] == reference.pool
    assert min(reference.events[-1]) > 0  # every kind of decision was exercised


RANDOM_SETTINGS = [  # the pools of SETTINGS (their engines are compiled once for both tests), and thresholds
    dict(pool_size=3, min_segment=2, depth=None),
    dict(pool_size=3, min_segment=2, depth=None, joint_evidence=True, eviction="spacing"),
    dict(pool_size=2, min_segment=4, depth=8, joint_evidence=True),
    dict(pool_size=4, min_segment=1, depth=8, eviction="spacing"),
    dict(pool_size=3, min_segment=2, depth=None, refine_threshold=0.05, skip_threshold=-0.2),
]


@pytest.mark.parametrize("case", range(len(RANDOM_SETTINGS)))
def test_fmn_makes_the_decisions_of_the_literal_reference_on_random_recurring_strings(case):
    settings = RANDOM_SETTINGS[case]
    rng = np.random.default_rng(100 + case)
    totals = np.zeros(4, np.int64)
    for _ in range(10):
        bits = random_recurring_bits(rng, 160)
        reference = ReferenceFMN(**settings).run(bits)
        run = FMN(**with_pool({**settings, "reservoir_size": RESERVOIR})).run(bits)
        np.testing.assert_allclose(run.evidence, reference.evidence, rtol=0, atol=1e-9)
        assert_same_decisions(run, reference)
        assert [tuple(c) for c in run.pool] == reference.pool
        totals += reference.events[-1]
    assert totals[2] > 0 and totals[3] > 0 and totals[0] + totals[1] > 0


def coin_bits(rng, n, coins=7, switch=0.01):
    """Bits of one of ``coins`` coins of uniform random bias, the coin redrawn with probability ``switch``."""
    bias, coin, bits = rng.uniform(size=coins), 0, []
    for _ in range(n):
        if rng.uniform() < switch:
            coin = rng.integers(coins)
        bits.append(int(rng.uniform() < bias[coin]))
    return np.array(bits)


def test_kt_decisions_near_ties_are_the_references_at_the_float64_tolerance():
    """§4.8: KT predictions are float64 and their comparisons keep the fine tolerance. On this string,
    refine tests win by more than 1e-9 but less than 1e-6 of the log likelihoods compared, so the float32
    tolerance would make other decisions (`python tools/kt_ties.py`)."""
    bits = coin_bits(np.random.default_rng(1), 512)
    reference = ReferenceFMN().run(bits)
    run = FMN(pool=Pool(reservoir_size=len(bits))).run(bits)
    np.testing.assert_allclose(run.evidence, reference.evidence, rtol=0, atol=1e-9)
    assert_same_decisions(run, reference)
    assert reference.events[-1][0] > 0  # the string has refines


# (a, b, segment): KT states (a, b) and (b, a) give a segment with as many zeros as ones the same
# probability (it depends only on the counts), yet summing the per-step logs in floating point
# makes (b, a) look larger by an ulp or two on each of these
TIES = [(1, 2, (0, 0, 1, 1)), (2, 3, (0, 1, 1, 0)), (3, 4, (0, 1, 0, 1)), (4, 5, (0, 0, 1, 1)), (3, 8, (1, 0, 1, 0))]


@pytest.mark.parametrize("a, b, segment", TIES)
def test_an_exact_winner_tie_goes_to_the_lower_member_index(a, b, segment):
    """§4.5, §4.8: pool [(a, b), (b, a)]; the 4-step segment closing at step 5 is the only one long
    enough to update the pool. Both stored members have the same segment log likelihood, so the
    winner is member 0, the copy of (a, b), and what is added is (a, b) plus the segment's counts."""
    zeros, ones = segment.count(0), segment.count(1)
    assert zeros == ones
    bits = np.array(list(segment) + [1, 0])  # the boundaries of steps 6 and 7 update nothing
    kwargs = dict(depth=3, pool_size=3, min_segment=4, initial_pool=((a, b), (b, a)),
                  skip_threshold=10.0)  # the skip test can not stop the add
    winner = (float(a + zeros), float(b + ones))
    want_pool = [(float(a), float(b)), (float(b), float(a)), winner]
    reference = ReferenceFMN(**kwargs).run(bits)
    assert reference.pool == want_pool and reference.events[-1] == [0, 0, 1, 0]
    run = FMN(**with_pool({**kwargs, "reservoir_size": 8})).run(bits)
    assert [tuple(float(v) for v in c) for c in run.pool] == want_pool
    assert list(np.asarray(run.events)[-1]) == [0, 0, 1, 0]


@pytest.mark.parametrize("depth", [9, None])
def test_a_grid_of_split_probabilities_is_the_bayesian_mixture_of_the_literal_fmns(depth):
    """§3.6: with ``split_prob`` a grid the evidence after every step is ``log mean_a`` of the literal
    FMNs' evidences, one per split probability (their pools decide alike: pool decisions do not read
    the tree weights). With a fixed tree the evidence is the code length, so the predictions are the
    Bayesian mixture's; a growing tree re-weighs at each growth, and so does the mixture."""
    grid = (0.05, 0.5, 0.95)
    bits = recurring_bits(np.random.default_rng(7))
    settings = dict(depth=depth, pool_size=3, min_segment=4, eviction="spacing")
    runs = [ReferenceFMN(**settings, split_prob=s).run(bits) for s in grid]
    mixture = FMN(**with_pool({**settings, "reservoir_size": len(bits)}), split_prob=grid).run(bits)
    evidence = np.logaddexp.reduce([r.evidence for r in runs], axis=0) - np.log(len(grid))
    np.testing.assert_allclose(mixture.evidence, evidence, rtol=0, atol=1e-9)
    if depth is not None:
        np.testing.assert_allclose(np.cumsum(mixture.log_px), evidence, rtol=0, atol=1e-9)
    best = max(r.evidence[-1] for r in runs)
    assert best - np.log(len(grid)) <= mixture.evidence[-1] < best  # within log A of the best grid point
    assert_same_decisions(mixture, runs[0])


def test_a_record_arena_doubled_mid_stream_changes_nothing(monkeypatch):
    """§6.5: small engines start with room for every record their pools can name; one started with too
    few rows doubles its arena at a boundary, and the predictions and the final pool are the same."""
    monkeypatch.setattr(engine.driver, "enlarge_ahead", lambda *args: None)  # doubled when full: no program compiled
    # ahead for a doubling the stream never reaches (tests/test_compilation.py checks compiling ahead)
    fmn = FMN(pool=Pool(size=3, min_segment=2, reservoir_size=8, eviction="spacing"))
    bits = random_recurring_bits(np.random.default_rng(9), 400)
    roomy = fmn.config(len(bits))
    small = engine.configure(0, (1,), 0, KTRows(), roomy.pool, roomy.prior, 2, roomy.max_depth, record_rows=48)
    runs = []
    for cfg in (roomy, small):
        state = jax.device_put(engine.init(cfg, 0, 0))
        state, final, probs, _ = engine.learn(state, cfg, np.zeros((len(bits), 0), np.float32), bits)
        runs.append((probs, np.asarray(state.nets.pool.roster), final.record_rows))
    assert runs[1][2] > 48 and runs[1][2] < roomy.record_rows  # it grew, from less than the roomy arena
    np.testing.assert_array_equal(runs[0][0], runs[1][0])
    np.testing.assert_array_equal(runs[0][1], runs[1][1])


def test_a_grid_of_one_split_probability_is_that_split_probability():
    bits = recurring_bits(np.random.default_rng(8))
    one, grid = (FMN(pool=Pool(min_segment=4), split_prob=s).run(bits) for s in (0.8, (0.8,)))
    assert np.array_equal(one.p1, grid.p1) and np.array_equal(one.evidence, grid.evidence)


def test_fmn_without_pool_is_ptw():
    bits = recurring_bits(np.random.default_rng(3))
    np.testing.assert_allclose(FMN(pool=Pool(size=0)).log_probs(bits), PTW().log_probs(bits), rtol=0, atol=1e-9)


@pytest.mark.parametrize("predictor", [PTW(), PTW(depth=12), FMN(pool=Pool(min_segment=4)),
                                       FMN(depth=9, pool=Pool(min_segment=4))])
def test_log_probs_are_the_predictive_code_length_and_the_evidence_of_a_fixed_tree(predictor):
    bits = recurring_bits(np.random.default_rng(4))
    p1 = predictor.probs(bits)
    step_logp = np.log(np.where(bits == 1, p1, 1.0 - p1))
    log_probs = predictor.log_probs(bits)
    np.testing.assert_allclose(np.cumsum(step_logp), log_probs, rtol=1e-12, atol=1e-9)
    evidence = predictor.log_evidence(bits) if isinstance(predictor, PTW) else predictor.run(bits).evidence
    if predictor.depth is not None:  # no growth: the sequential code length is the tree's evidence
        np.testing.assert_allclose(log_probs, evidence, rtol=0, atol=1e-9)
    else:  # each growth of the root moves the evidence by at most one bit
        assert abs(evidence[-1] - log_probs[-1]) <= np.log(2) * np.ceil(np.log2(len(bits)))


def test_a_string_of_a_power_of_two_length_is_learned_without_growing_the_engine(monkeypatch):
    """The state after the last step is prepared for the next one, so 2^k bits need room for 2^k + 1
    steps; sized for 2^k, the engine grew (and compiled every program again) at the last bit."""
    def no_growth(*args):
        raise AssertionError("the engine grew")

    monkeypatch.setattr(engine.driver, "enlarge", no_growth)
    bits = np.random.default_rng(5).integers(0, 2, 32)
    assert np.all(np.isfinite(PTW().log_probs(bits)))


def test_recurring_source_fmn_beats_ptw_beats_kt():
    rng = np.random.default_rng(0)
    rates = np.repeat([0.05, 0.95] * 8, 128)  # A B A B ... segments of 128 steps
    bits = (rng.random(rates.size) < rates).astype(int)
    kt, ptw, fmn = (-p.log_probs(bits)[-1] for p in (KT(), PTW(), FMN()))
    assert fmn < ptw - 5.0 and ptw < 0.5 * kt


@pytest.mark.parametrize(
    "bad, message",
    [([0, 2, 1], "0 or 1"), ([[0, 1]], "1-D"), ([0.0, np.nan], "NaN"), (["a", "b"], "dtype")],
)
def test_bad_bits_raise_a_clear_error(bad, message):
    with pytest.raises(ValueError, match=message):
        PTW().log_probs(np.array(bad))
