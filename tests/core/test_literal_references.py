"""Self-checks of the literal references themselves (no engine involved).

The references (``tests/reference/fmn_reference.py``, ``tests/reference/nctl_literal.py``) are only
worth something if they are right on their own: their tree is checked here against enumeration of
every segmentation (KT and GGM base models, fixed and growing depth), their predictive against their
evidence, their bounded mode with every member trained against the exact process, and a
root-only, pool-free network against a plain GLN written out below.
"""

import functools
import itertools
import math

import numpy as np
import pytest

from tests.reference.brute_force import anytime_depth, fmn_fixed_pool_log_prob, partitions, ptw_log_prob
from tests.reference.fmn_reference import EVENT_KINDS, KT, LiteralFMN, ReferenceFMN
from tests.reference.nctl_literal import LiteralNCTL

F32 = np.float32


def logsumexp(values):
    peak = max(values)
    return peak + math.log(sum(math.exp(v - peak) for v in values))


def ratios(evidence_of_prefix, n, depth):
    """log P(x_t | x_<t) from the evidences of the tree in use at step t (fixed depth, or the anytime
    depth ceil(log2 t) when depth is None)."""
    evidence = functools.lru_cache(maxsize=None)(evidence_of_prefix)
    out = []
    for t in range(1, n + 1):
        d = depth if depth is not None else anytime_depth(t)
        out.append(evidence(t, d) - (evidence(t - 1, d) if t > 1 else 0.0))
    return np.array(out)


def random_hyperplanes(rng, layer_sizes, n_features, context_bits, n_networks):
    """§1.2: normals N(0, I) scaled to unit length, offsets N(0, 0.05^2)."""
    out = []
    for _ in range(n_networks):
        layers = []
        for size in layer_sizes:
            v = rng.standard_normal((size, context_bits, n_features))
            v /= np.linalg.norm(v, axis=-1, keepdims=True)
            layers.append((v.astype(F32), (0.05 * rng.standard_normal((size, context_bits))).astype(F32)))
        out.append(tuple(layers))
    return tuple(out)


def recurring_stream(n, n_features, n_classes, seed=0, period=16):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, n_features)).astype(F32)
    flipped = (np.arange(n) // period) % 2 == 1
    s = X[:, 0] + 0.5 * X[:, 1]
    s = np.where(flipped, -s, s)
    y = (s > 0).astype(int) if n_classes == 2 else np.digitize(s, [-0.5, 0.5])
    return X, y


# ----------------------------------------------------------------------------- FMN over KT


@pytest.mark.parametrize("depth", [3, None])
def test_reference_fmn_without_pool_is_ptw_by_enumeration_on_every_8_bit_string(depth):
    worst = 0.0
    for bits in itertools.product([0, 1], repeat=8):
        bits = list(bits)
        run = ReferenceFMN(depth=depth, pool_size=0, min_segment=1).run(bits)
        want = [ptw_log_prob(bits[:t], depth if depth is not None else anytime_depth(t)) for t in range(1, 9)]
        worst = max(worst, np.max(np.abs(np.array(run.evidence) - want)))
        sequential = ratios(lambda t, d: ptw_log_prob(bits[:t], d), 8, depth)
        worst = max(worst, np.max(np.abs(np.array(run.log_px) - sequential)))
    assert worst < 1e-9


def test_reference_fmn_without_pool_is_ptw_by_enumeration_at_depth_4():
    rng = np.random.default_rng(5)
    for _ in range(6):
        bits = list(rng.integers(0, 2, 16))
        run = ReferenceFMN(depth=4, pool_size=0, min_segment=1, split_prob=0.5).run(bits)
        want = [ptw_log_prob(bits[:t], 4) for t in range(1, 17)]
        np.testing.assert_allclose(run.evidence, want, rtol=0, atol=1e-9)
        np.testing.assert_allclose(np.cumsum(run.log_px), want, rtol=0, atol=1e-9)


@pytest.mark.parametrize("depth", [3, None])
def test_reference_fmn_with_fixed_pool_is_the_enumeration_of_segmentations_and_members(depth):
    rng = np.random.default_rng(1)
    for _ in range(6):
        bits = list(rng.integers(0, 2, 8))
        pool = [tuple(float(c) for c in rng.integers(0, 6, 2)) for _ in range(rng.integers(0, 3))]
        run = ReferenceFMN(depth=depth, pool_size=2, min_segment=16, initial_pool=pool).run(bits)
        brute = lambda t, d: fmn_fixed_pool_log_prob(bits[:t], d, pool)  # noqa: E731
        want = [brute(t, depth if depth is not None else anytime_depth(t)) for t in range(1, 9)]
        np.testing.assert_allclose(run.evidence, want, rtol=0, atol=1e-9)
        np.testing.assert_allclose(run.log_px, ratios(brute, 8, depth), rtol=0, atol=1e-9)
        assert run.pool == pool and run.events[-1] == [0, 0, 0, 0]


def recurring_bits(rng, n=160):
    rates = rng.choice([0.05, 0.95, 0.5], size=16)
    p = np.repeat(rates, rng.integers(6, 30, size=16))
    p = np.resize(p, n)
    return [int(b) for b in rng.random(n) < p]


@pytest.mark.parametrize("joint, eviction", [(False, "fifo"), (True, "spacing")])
def test_reference_fmn_code_length_is_its_evidence_with_pool_updates(joint, eviction):
    """With a fixed tree every node's mixture is fixed at its start, so even with pool updates the
    sum of the per-step log predictive is the tree's evidence, and P(0) + P(1) = 1 by construction."""
    bits = recurring_bits(np.random.default_rng(3), 200)
    run = ReferenceFMN(depth=8, pool_size=3, min_segment=2, joint_evidence=joint, eviction=eviction).run(bits)
    np.testing.assert_allclose(np.cumsum(run.log_px), run.evidence, rtol=0, atol=1e-9)
    assert all(v > 0 for v in run.events[-1])  # refines, skips, adds and evictions all happened
    assert len(run.pool) <= 3


def pool_sizes_after_each_boundary(bits, **kwargs):
    """(adds at the boundary, pool size after it) for every boundary of a literal KT FMN."""
    fmn = LiteralFMN(KT(), lambda rid: (None, bits[rid]), **kwargs)
    out = []
    for t, x in enumerate(bits, start=1):
        fmn.predict(None)
        fmn.learn(None, x, t - 1)
        adds = fmn.events["add"]
        fmn.boundary(t + 1)
        out.append((fmn.events["add"] - adds, len(fmn.pool)))
    return out


def test_reference_fifo_removes_every_state_of_the_cut_off_age_and_spacing_one_at_a_time():
    """§4.7: with k = 1, two states added at one step share the cut-off age and leave together (the
    pool falls to 0); spacing removes one state at a time, so a full pool stays full."""
    bits = recurring_bits(np.random.default_rng(9), 128)
    kwargs = dict(pool_size=1, min_segment=1, depth=None, skip_threshold=1e9)  # never skip
    fifo = pool_sizes_after_each_boundary(bits, **kwargs)
    assert any(adds >= 2 and size == 0 for adds, size in fifo)
    spacing = pool_sizes_after_each_boundary(bits, **kwargs, eviction="spacing")
    assert [size for _, size in spacing] == [1] * len(bits)


# ----------------------------------------------------------------------------- GGM network


def ggm_segment_loglik(Z, xs, normals, offsets, learning_rate, eps=0.01, wmax=200.0):
    """A fresh single gated geometric mixer (§1) trained on one segment, written out independently:
    the log likelihood it assigns to the segment."""
    bound = F32(math.log((1 - eps) / eps))
    W = np.zeros((2 ** len(offsets), Z.shape[1] + 1), F32)
    total = 0.0
    for z, x in zip(Z, xs):
        c = int(sum(2**h for h in range(len(offsets)) if normals[h] @ z > offsets[h]))
        u = np.concatenate([np.clip(z, -bound, bound), [F32(1)]]).astype(F32)
        q = F32(1) / (F32(1) + np.exp(-(W[c] @ u)))
        q = np.clip(q, F32(eps), F32(1 - eps))
        total += math.log(float(q)) if x else math.log(1.0 - float(q))
        W[c] = np.clip(W[c] - F32(learning_rate) * (q - F32(x)) * u, -F32(wmax), F32(wmax))
    return total


def ptw_ggm_log_evidence(Z, xs, depth, normals, offsets, learning_rate):
    """log PTW_D over fresh GGMs by enumeration of every segmentation (split prob 1/2)."""
    n = len(xs)
    terms = []
    for parts, cost in partitions(0, 2**depth, depth):
        log_p = -cost * math.log(2.0)
        for a, b in parts:
            if a < n:
                log_p += ggm_segment_loglik(Z[a:min(b, n)], xs[a:min(b, n)], normals, offsets, learning_rate)
        terms.append(log_p)
    return logsumexp(terms)


@pytest.mark.parametrize("depth, n", [(3, 8), (4, 14), (None, 9)])
def test_literal_network_single_neuron_without_pool_is_ptw_over_ggms_by_enumeration(depth, n):
    rng = np.random.default_rng(3)
    Z, y = recurring_stream(n, 2, 2, seed=4, period=3)
    planes = random_hyperplanes(rng, (1,), 2, 2, 1)
    normals, offsets = planes[0][0][0][0], planes[0][0][1][0]
    net = LiteralNCTL(planes, layer_sizes=(1,), n_features=2, learning_rate=0.3, pool_size=0, depth=depth,
                      min_segment=1)
    p = net.run(Z, y)
    log_px = np.log(np.where(y == 1, p, 1.0 - p))
    brute = lambda t, d: ptw_ggm_log_evidence(Z[:t], y[:t], d, normals, offsets, 0.3)  # noqa: E731
    np.testing.assert_allclose(log_px, ratios(brute, n, depth), rtol=0, atol=1e-6)
    fmn = net.networks[0][0][0].fmn
    final_depth = depth if depth is not None else anytime_depth(n)
    assert abs(fmn.evidence() - brute(n, final_depth)) < 1e-6


def literal_gln(planes, Z, y, layer_sizes, learning_rate, eps=0.01):
    """A plain GLN (§2): one GGM per neuron trained from step 1, written out independently."""
    bound = F32(math.log((1 - eps) / eps))
    fan_ins = [Z.shape[1] + 1] + [size + 1 for size in layer_sizes[:-1]]
    weights = [np.zeros((size, 2 ** planes[i][1].shape[1], k), F32)
               for i, (size, k) in enumerate(zip(layer_sizes, fan_ins))]
    out = []
    for z, label in zip(Z, y):
        x = F32(label == 1)
        u = np.concatenate([np.clip(z, -bound, bound), [F32(1)]]).astype(F32)
        seen = []
        for i, (normals, offsets) in enumerate(planes):
            q = []
            for n in range(normals.shape[0]):
                c = int(sum(2**h for h in range(offsets.shape[1]) if normals[n, h] @ z > offsets[n, h]))
                qn = np.clip(F32(1) / (F32(1) + np.exp(-(weights[i][n, c] @ u))), F32(eps), F32(1 - eps))
                seen.append((i, n, c, u, qn))
                q.append(float(qn))
            u = np.array([min(max(math.log(v / (1 - v)), -float(bound)), float(bound)) for v in q] + [1.0], F32)
        out.append(q[0])
        for i, n, c, u_in, qn in seen:
            weights[i][n, c] = np.clip(weights[i][n, c] - F32(learning_rate) * (qn - x) * u_in, -200, 200)
    return np.array(out)


def test_literal_network_with_all_mass_on_the_root_and_no_pool_is_a_gln():
    """§5.1: split_prob 0 and k = 0: the root's fresh member, trained from step 1, is a GLN neuron."""
    rng = np.random.default_rng(6)
    Z, y = recurring_stream(60, 3, 2)
    planes = random_hyperplanes(rng, (3, 1), 3, 2, 1)
    net = LiteralNCTL(planes, layer_sizes=(3, 1), n_features=3, learning_rate=0.1, pool_size=0, depth=6,
                      min_segment=1, split_prob=0.0)
    np.testing.assert_allclose(net.run(Z, y), literal_gln(planes[0], Z, y, (3, 1), 0.1), rtol=0, atol=1e-6)


@pytest.mark.parametrize("n_classes, joint, eviction", [(2, False, "fifo"), (3, True, "spacing")])
def test_literal_network_bounded_with_every_member_trained_is_exact(n_classes, joint, eviction):
    rng = np.random.default_rng(7)
    Z, y = recurring_stream(72, 2, n_classes)
    planes = random_hyperplanes(rng, (2, 1), 2, 2, 1 if n_classes == 2 else n_classes)
    kw = dict(layer_sizes=(2, 1), n_features=2, learning_rate=0.05, pool_size=2, depth=None, min_segment=2,
              joint_evidence=joint, eviction=eviction, n_classes=n_classes)
    exact, bounded, fewer = LiteralNCTL(planes, **kw), LiteralNCTL(planes, **kw, trained_members=3), \
        LiteralNCTL(planes, **kw, trained_members=1)
    p_exact, p_bounded, p_fewer = exact.run(Z, y), bounded.run(Z, y), fewer.run(Z, y)
    np.testing.assert_array_equal(p_exact, p_bounded)
    for a, b in zip(exact.pool_events(), bounded.pool_events()):
        for la, lb in zip(a, b):
            np.testing.assert_array_equal(la, lb)
    assert np.max(np.abs(p_exact - p_fewer)) > 1e-4  # training one member is a different process
    totals = sum(layer.sum(0) for net in exact.pool_events() for layer in net)
    assert all(totals > 0), dict(zip(EVENT_KINDS, totals))


def test_literal_network_code_length_of_a_single_neuron_is_its_evidence_with_pool_updates():
    rng = np.random.default_rng(8)
    Z, y = recurring_stream(100, 2, 2)
    planes = random_hyperplanes(rng, (1,), 2, 2, 1)
    net = LiteralNCTL(planes, layer_sizes=(1,), n_features=2, learning_rate=0.1, pool_size=2, depth=7,
                      min_segment=2)
    p = net.run(Z, y)
    fmn = net.networks[0][0][0].fmn
    assert abs(np.sum(np.log(np.where(y == 1, p, 1.0 - p))) - fmn.evidence()) < 1e-9
    assert sum(fmn.events.values()) > 0
