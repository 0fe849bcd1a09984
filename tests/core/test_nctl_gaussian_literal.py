"""``nctl.NCTLRegressor`` against the literal network of ``tests/reference/nctl_gaussian_literal.py``, on the
JAX engine's code paths and on the native engine.

The reference shares no code with the engine: it is written from ``docs/algorithm.md`` (§1-§5 with the
Gaussian neurons of §8) and takes only the gating hyperplanes from the learner. On tiny networks (2-3
inputs, layers (2, 1) and (1,), 2 context bits), pool sizes 0-3, ``min_segment`` 1-4, fixed depth 7 and
growing depth, per-example and joint skip evidence, fifo and spacing eviction and bounded mode, on a
recurring regression stream of 80 steps with reservoirs at least as long as the stream: every predicted
mean and variance agrees within ``rtol=1e-4, atol=1e-5`` and the pool event counts of every neuron are
equal, after half the stream and at its end.

Tolerance: the engine keeps weights, inputs and predictions in float32, the reference in float64, so they
agree to a tolerance, not bit for bit (as ``tests/core/test_gaussian_rows.py``, at the same 1e-4
relative). float32 rounds at 6e-8 per operation; a prediction here is a few hundred operations (three
layers of dot products over <= 6 inputs, the mixture over <= 8 levels of <= 4 members) on values within a
few units, and 80 gradient steps of rate 0.05 do not amplify an error by more than a small factor, so the
differences stay near 1e-6 relative, two decades inside the tolerance. Pool decisions compare sums of
float64 log likelihoods with the float32 tie tolerance of §4.8 (1e-6 of the larger sum, at least 1e-6),
which float32 differences of about 1e-6 per record rarely cross; a case that does shows up as unequal
event counts, and the failure says how close the reference's closest decision was to a tie.

``test_the_reference_with_one_level_and_no_pool_is_the_gaussian_gln`` checks the reference itself, without
the engine: with no pool and depth 0 (one node, one member) its network is the literal Gaussian GLN of
``tests/reference/gaussian_gln.py``.
"""

from unittest import mock

import numpy as np
import pytest

import nctl
from nctl.pool import with_pool
from tests.reference import fmn_reference
from tests.reference.fmn_reference import EVENT_KINDS
from tests.reference.gaussian_gln import GaussianGLN, Settings
from tests.reference.nctl_gaussian_literal import LiteralNCTLRegressor

STEPS = 80  # checked after STEPS // 2 and STEPS
ROWS = {"learning_rate": 0.05, "min_variance": 0.1, "max_variance": 10.0, "max_weight": 100.0, "max_mean": 10.0}
# the pool's settings written out (the learner's and the reference's defaults alike), so that both sides get them
POOL = {"refine_threshold": 0.0, "skip_threshold": 0.0, "split_prob": 0.5, "joint_evidence": False,
        "eviction": "fifo", "trained_members": None}
SHARED = {"context_bits": 2, "reservoir_size": STEPS, "seed": 3, **ROWS, **POOL}

CASES = {  # id -> (n_features, learner settings)
    "k0-grow-L1": (3, {"layer_sizes": (2, 1), "pool_size": 0, "min_segment": 1, "depth": None}),
    "k1-D7-L2-joint-1layer": (2, {"layer_sizes": (1,), "pool_size": 1, "min_segment": 2, "depth": 7,
                                  "joint_evidence": True}),
    "k2-grow-L1-spacing": (2, {"layer_sizes": (2, 1), "pool_size": 2, "min_segment": 1, "depth": None,
                               "eviction": "spacing"}),
    "k3-D7-L2": (3, {"layer_sizes": (2, 1), "pool_size": 3, "min_segment": 2, "depth": 7}),
    "k3-grow-L4-joint-spacing": (3, {"layer_sizes": (2, 1), "pool_size": 3, "min_segment": 4, "depth": None,
                                     "joint_evidence": True, "eviction": "spacing"}),
    "k2-D7-L1-bounded1": (3, {"layer_sizes": (2, 1), "pool_size": 2, "min_segment": 1, "depth": 7,
                              "trained_members": 1}),
}


def recurring_stream(n, n_features, seed=0, period=16):
    """Two concepts taking turns every ``period`` steps: ``y = 2 + 3 s`` and ``y = 2 - 3 s`` for
    ``s = z_0 + 0.5 z_1``, plus noise of standard deviation 0.1 (raw targets, standardised by the learner)."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, n_features)).astype(np.float32)
    s = X[:, 0].astype(np.float64) + 0.5 * X[:, 1]
    s = np.where((np.arange(n) // period) % 2 == 1, -s, s)
    return X, 2.0 + 3.0 * s + 0.1 * rng.standard_normal(n)


def settings(case):
    n_features, kwargs = CASES[case]
    return n_features, {**SHARED, **kwargs}


def one_network(hyperplanes):
    """The learner's hyperplanes (as ``nctl.NCTL.hyperplanes``: per network, per layer ``(normals, offsets)``)
    of its one network, as float32 arrays."""
    assert len(hyperplanes) == 1, "a regressor has one network"
    return [(np.asarray(normals, np.float32), np.asarray(offsets, np.float32)) for normals, offsets in hyperplanes[0]]


def run_reference(case, planes):
    """(means, variances, pool events after STEPS // 2 steps, pool events after STEPS, closest call) of the
    reference. The closest call: over every comparison of §4.8 (winner, refine, skip) that is not an exact
    tie, the smallest distance of ``(a - b - margin) / max(1, |a|, |b|)`` from the tie tolerance, the room
    float32 rounding has before it flips a decision (a diagnostic for unequal event counts)."""
    n_features, kwargs = settings(case)
    X, y = recurring_stream(STEPS, n_features)
    reference_kwargs = {k: v for k, v in kwargs.items() if k not in ("reservoir_size", "seed")}
    # §6.3: D_max, the largest depth the learner is sized for: its depth, or 20 when it grows
    max_depth = kwargs["depth"] if kwargs["depth"] is not None else 20
    net = LiteralNCTLRegressor(planes, n_features=n_features, max_depth=max_depth, **reference_kwargs)
    distances = [np.inf]
    exceeds = fmn_reference.exceeds

    def watched(a, b, margin, tolerance):
        if a - b - margin != 0.0:  # an exact tie is exact in float32 too: the same state on the same records
            distances.append(abs((a - b - margin) / max(1.0, abs(a), abs(b)) - tolerance))
        return exceeds(a, b, margin, tolerance)

    half = STEPS // 2
    with mock.patch.object(fmn_reference, "exceeds", watched):
        means, variances = net.run(X[:half], y[:half])
        events_half = net.pool_events()
        rest = net.run(X[half:], y[half:])
    return (np.concatenate([means, rest[0]]), np.concatenate([variances, rest[1]]), events_half, net.pool_events(),
            min(distances))


def assert_same_events(got, want, when, closest):
    got = [[np.asarray(layer) for layer in network] for network in got]
    assert len(got) == len(want), when
    for k, (got_net, want_net) in enumerate(zip(got, want)):
        assert len(got_net) == len(want_net), when
        for i, (g, w) in enumerate(zip(got_net, want_net)):
            assert g.shape == w.shape, (when, k, i)
            assert np.array_equal(g, w), (f"{when}: layer {i}: got\n{g}\nreference\n{w} ({EVENT_KINDS}); the "
                                          f"reference's closest decision was {closest:.2g} (relative) from a tie")


# the JAX engine's code paths (docs/algorithm.md §6.2, §6.3; Gaussian rows never use the CPU kernel): its
# default on every case; as large layers (slot by slot; pool decisions one neuron at a time; frozen
# predictions from each pool entry once) for a case with a pool and a bounded one, and XLA's loop over chunks
# of 3 live slots for one case; and the native engine (§6.12) on every case in exact mode
PER_SLOT = ["k3-grow-L4-joint-spacing", "k2-D7-L1-bounded1"]
CHUNKED = ["k3-D7-L2"]
NATIVE = [case for case in CASES if CASES[case][1].get("trained_members") is None]


@pytest.mark.parametrize("case, code_path", [(case, "default") for case in CASES]
                         + [(case, "per-slot") for case in PER_SLOT] + [(case, "chunked") for case in CHUNKED]
                         + [(case, "native") for case in NATIVE])
def test_nctl_regressor_matches_the_literal_network(case, code_path, monkeypatch):
    from nctl.core.engine import config, decisions, layer

    monkeypatch.setenv("NCTL_ENGINE", "native" if code_path == "native" else "jax")
    if code_path == "per-slot":
        monkeypatch.setattr(config, "VECTORISED_LAYER_BYTES", 0)
        monkeypatch.setattr(layer, "LANE_PREDICTION_BYTES", 0)
        monkeypatch.setattr(decisions, "SCORE_BYTES", 0)
    if code_path == "chunked":
        monkeypatch.setattr(config, "CHUNKED_SLOT_BYTES", 0)
        monkeypatch.setattr(config, "SLOT_CHUNK", 3)
    n_features, kwargs = settings(case)
    learner = nctl.NCTLRegressor(**with_pool(kwargs, nctl.NCTLRegressor.pool))  # created after the code path is chosen
    if code_path != "native":
        layers = learner.engine_config(n_features).layers
        assert all(shape.vectorised == (code_path != "per-slot") for shape in layers)
        assert all((shape.slot_chunk == 3) == (code_path == "chunked") for shape in layers)
    X, y = recurring_stream(STEPS, n_features)
    planes = one_network(learner.hyperplanes(n_features))
    want_means, want_variances, events_half, events_end, closest = run_reference(case, planes)
    means, variances = np.zeros(STEPS), np.zeros(STEPS)
    for t in range(STEPS):
        if t == STEPS // 2:
            assert_same_events(learner.pool_events(), events_half, f"after {t} steps", closest)
        mean, variance = learner.predict_distribution_many(X[t:t + 1])  # before learning y_t
        means[t], variances[t] = mean[0], variance[0]
        learned = np.asarray(learner.learn_many(X[t:t + 1], y[t:t + 1]))  # its pre-update mean
        np.testing.assert_allclose(learned, mean, rtol=1e-6, atol=1e-6, err_msg=f"step {t + 1}")
    np.testing.assert_allclose(means, want_means, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(variances, want_variances, rtol=1e-4, atol=1e-5)
    assert_same_events(learner.pool_events(), events_end, f"after {STEPS} steps", closest)
    assert learner.engine_ == ("native" if code_path == "native" else "jax")


# ----------------------------------------------------------------------------- the reference itself


def random_planes(n_features, layer_sizes, bits, seed):
    """Gating hyperplanes drawn here (no engine): per layer normals [N, s, d] and offsets [N, s], float32."""
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal((size, bits, n_features)).astype(np.float32),
             (0.3 * rng.standard_normal((size, bits))).astype(np.float32)) for size in layer_sizes]


@pytest.mark.parametrize("layer_sizes", [(2, 1), (1,)])
def test_the_reference_with_one_level_and_no_pool_is_the_gaussian_gln(layer_sizes):
    """No pool and depth 0: every neuron's FMN is one node with one (fresh) member, weight 1, so the
    network is the Gaussian GLN of ``gaussian_gln.py`` on the standardised targets (up to the rounding of
    ``1/(1/lambda)`` in the moment match), and the raw predictions are its means mapped back with the
    statistics of the targets before each step (checked against numpy's mean and population std)."""
    n_features = 3
    X, y = recurring_stream(STEPS, n_features, seed=5)
    planes = random_planes(n_features, layer_sizes, 2, seed=7)
    net = LiteralNCTLRegressor(planes, layer_sizes=layer_sizes, n_features=n_features, context_bits=2,
                               pool_size=0, min_segment=1, depth=0, **ROWS)
    means, variances = net.run(X, y)
    targets = [record["target"] for record in net.records]
    gln = GaussianGLN(planes, n_features, Settings(*ROWS.values()))
    want = gln.run(X, targets)  # [n, (mean, precision)]
    np.testing.assert_allclose(np.array(net.outputs), want, rtol=1e-12, atol=0)
    # the standardisation, independently: targets by the statistics including y_t, predictions by those before
    shifts = np.array([y[:t].mean() if t else 0.0 for t in range(STEPS)])
    scales = np.array([y[:t].std() if t > 1 else 1.0 for t in range(STEPS)])
    np.testing.assert_allclose(targets, (y - np.append(shifts[1:], y.mean())) / np.append(scales[1:], y.std()),
                               rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(means, shifts + scales * want[:, 0], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(variances, scales**2 / want[:, 1], rtol=1e-12)
    assert all(event == 0 for neuron in net.neurons() for event in neuron.fmn.events.values())


def test_the_cases_exercise_every_pool_event():
    """On hyperplanes drawn here, the cases between them refine, skip, add and evict, and every case with a
    pool adds states: the stream and the settings reach every pool rule."""
    totals = np.zeros(len(EVENT_KINDS), np.int64)
    for case in CASES:
        n_features, kwargs = settings(case)
        planes = random_planes(n_features, kwargs["layer_sizes"], kwargs["context_bits"], seed=11)
        events = run_reference(case, planes)[3]
        case_totals = sum(layer.sum(axis=0) for network in events for layer in network)
        assert kwargs["pool_size"] == 0 or case_totals[EVENT_KINDS.index("add")] > 0, case
        totals += case_totals
    assert np.all(totals > 0), dict(zip(EVENT_KINDS, totals))
