"""PTW and FMN over KT against brute-force enumeration and a literal slow FMN."""

import functools
import itertools

import numpy as np
import pytest

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
        fmn = FMN(depth=depth, pool_size=2, min_segment=16, initial_pool=tuple(pool))
        _, _, log_px, evidence = fmn.run(np.array(bits))
        brute = lambda b, d: fmn_fixed_pool_log_prob(b, d, pool)
        want = [brute(bits[:n], depth or anytime_depth(n)) for n in range(1, 9)]
        np.testing.assert_allclose(evidence, want, rtol=0, atol=1e-9)
        np.testing.assert_allclose(np.cumsum(log_px), sequential_log_probs(bits, brute, depth), rtol=0, atol=1e-9)


def recurring_bits(rng, lengths=(20, 12, 33, 7), repeats=5, flip=0.1):
    pattern = np.concatenate([np.full(n, i % 2) for i, n in enumerate(lengths)])
    bits = np.tile(pattern, repeats)
    return np.where(rng.random(len(bits)) < flip, 1 - bits, bits)


@pytest.mark.parametrize(
    "capacity, min_segment, joint, depth, eviction",
    [(1, 1, True, None, "fifo"), (2, 4, True, None, "fifo"), (3, 2, False, None, "fifo"), (3, 8, True, 9, "fifo"),
     (4, 1, False, 10, "fifo"), (3, 2, True, None, "spacing"), (4, 1, False, 10, "spacing")],
)
def test_fmn_pool_updates_match_literal_reference(capacity, min_segment, joint, depth, eviction):
    rng = np.random.default_rng(capacity * 10 + min_segment)
    bits = recurring_bits(rng)
    reference = ReferenceFMN(capacity, min_segment, joint, depth or 0, eviction)
    want = np.array([reference.step(int(x)) for x in bits])
    fmn = FMN(depth=depth, pool_size=capacity, min_segment=min_segment, reservoir_size=len(bits),
              joint_evidence=joint, eviction=eviction)
    state, p1, _, evidence = fmn.run(bits)
    np.testing.assert_allclose(p1, want[:, 0], rtol=0, atol=1e-9)
    np.testing.assert_allclose(evidence, want[:, 1], rtol=0, atol=1e-9)
    assert int(np.sum(state.pool.valid)) == sum(e is not None for e in reference.pool) > 0


def test_fmn_without_pool_is_ptw():
    bits = recurring_bits(np.random.default_rng(3))
    np.testing.assert_allclose(FMN(pool_size=0).log_probs(bits), PTW().log_probs(bits), rtol=0, atol=1e-9)


@pytest.mark.parametrize("predictor", [PTW(), PTW(depth=12), FMN(min_segment=4), FMN(depth=9, min_segment=4)])
def test_log_probs_are_the_predictive_code_length_and_the_evidence_of_a_fixed_tree(predictor):
    bits = recurring_bits(np.random.default_rng(4))
    p1 = predictor.probs(bits)
    step_logp = np.log(np.where(bits == 1, p1, 1.0 - p1))
    log_probs = predictor.log_probs(bits)
    np.testing.assert_allclose(np.cumsum(step_logp), log_probs, rtol=1e-12, atol=1e-9)
    evidence = predictor.log_evidence(bits) if isinstance(predictor, PTW) else predictor.run(bits)[3]
    if predictor.depth is not None:  # no growth: the sequential code length is the tree's evidence
        np.testing.assert_allclose(log_probs, evidence, rtol=0, atol=1e-9)
    else:  # each growth of the root moves the evidence by at most one bit
        assert abs(evidence[-1] - log_probs[-1]) <= np.log(2) * np.ceil(np.log2(len(bits)))


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
