"""Inside NCTL: saliency maps, traced learning and change points, pool provenance, and the CLI."""

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import nctl
from nctl.cli import main
from nctl.core import gln, mixing, tree
from nctl.inspect import boundaries, pools, saliency
from nctl.pool import Pool
from nctl.streams import synthetic

SMALL = dict(layer_sizes=(4, 2, 1), context_bits=2, learning_rate=0.1,
             pool=Pool(size=4, min_segment=16, eviction="spacing", reservoir_size=8), depth=10)
SEGMENT = 256  # steps per concept of the synthetic stream: A B C A


@pytest.fixture(scope="module")
def stream():
    s = synthetic(seed=0, n_features=10, segment_length=SEGMENT, n_segments=4, label_noise=0.02)
    X, y, task = next(s.chunks(size=len(s)))
    return X, y, task


TRACED = 1000  # steps of the traced learner: mid-segment, so that its MAP members are trained ones


@pytest.fixture(scope="module")
def traced(stream):
    """A learner trained through boundaries.trace in two uneven calls, its predictions and its trace."""
    X, y, _ = stream
    learner = nctl.NCTL(**SMALL)
    p1, t1 = boundaries.trace(learner, X[:37], y[:37])
    p2, t2 = boundaries.trace(learner, X[37:TRACED], y[37:TRACED])
    trace = boundaries.SegmentTrace.concatenate([t1, t2])
    return learner, np.concatenate([p1, p2]), trace


# ----------------------------------------------------------------------------- saliency


def test_saliency_is_the_gradient_of_the_map_networks_output_logit(traced):
    learner, _, _ = traced
    layers = saliency.map_network(learner)
    Z = 0.3 * np.random.default_rng(1).standard_normal((16, 10)).astype(np.float32)
    bound = mixing.logit_bound(mixing.PROB_EPS)
    for z in Z:  # precondition: nothing is clipped, so the logit is exactly linear in z within the cell
        u = np.append(z, 1.0)
        for layer in layers:
            normals, offsets = np.asarray(layer.gates.normals), np.asarray(layer.gates.offsets)
            contexts = (np.einsum("nsd,d->ns", normals, z) > offsets) @ (1 << np.arange(offsets.shape[1]))
            a = np.asarray(layer.weights)[np.arange(len(contexts)), contexts] @ u
            assert np.max(np.abs(a)) < bound - 0.1
            u = np.append(a, 1.0)
    ggm = learner.cfg_.rows

    def output_logit(z):
        p = gln.predict(layers, z, ggm)
        return jnp.log(p) - jnp.log1p(-p)

    grads = np.asarray(jax.jit(jax.vmap(jax.grad(output_logit)))(jnp.asarray(Z)))
    maps = saliency.saliency(learner, Z)
    assert np.max(np.abs(grads)) > 0.1  # a trained, non-trivial network
    np.testing.assert_allclose(maps, grads, rtol=1e-5, atol=1e-5)


def test_map_network_of_a_root_only_nctl_is_the_gln(stream):
    """With all prior mass on one segment and no pool, the MAP member of every neuron is the fresh GGM
    trained from step 1: the plain GLN (docs/algorithm.md §5.1)."""
    X, y, _ = stream
    shared = dict(layer_sizes=(4, 2, 1), context_bits=2, learning_rate=0.1)
    learner = nctl.NCTL(**shared, pool=Pool(size=0), split_prob=0.0, depth=8)
    learner.learn_many(X[:200], y[:200])
    plain = nctl.GLN(**shared)
    plain.learn_many(X[:200], y[:200])
    for ours, theirs in zip(saliency.map_network(learner), plain.state_):
        np.testing.assert_allclose(np.asarray(ours.weights), np.asarray(theirs.weights[0]), rtol=1e-5, atol=1e-6)
    assert all(np.all(born == 0) for born in saliency.map_born(learner))  # fresh members: recalled from nothing


def test_pseudo_task_networks_draw_stored_entries_independently_per_neuron(traced):
    learner, _, _ = traced
    picks = []
    for seed in range(4):
        layers = saliency.pool_sample_network(learner, jax.random.PRNGKey(seed))
        chosen = []
        for index, (layer, shape) in enumerate(zip(layers, learner.cfg_.layers)):
            pool_w = np.asarray(learner.state_.nets.arena.pool_rows[index][0])  # [N_i, C, E, K]
            valid = np.asarray(learner.state_.nets.pool.in_pool[0])[:, shape.offset:shape.offset + shape.neurons]  # [E, N_i]
            for n in range(pool_w.shape[0]):
                hits = [e for e in range(pool_w.shape[2])
                        if valid[e, n] and np.array_equal(pool_w[n, :, e], np.asarray(layer.weights[n]))]
                assert hits, "every neuron uses one of its own valid pool entries"
                chosen.append(hits[0])
        picks.append(tuple(chosen))
    assert len(set(picks)) > 1
    assert saliency.saliency_maps(layers, np.zeros((3, 10), np.float32)).shape == (3, 10)


# ----------------------------------------------------------------------------- boundaries


def test_traced_learning_advances_the_learner_exactly_like_learn_many(stream, traced):
    X, y, _ = stream
    learner, probs, trace = traced
    plain = nctl.NCTL(**SMALL)
    np.testing.assert_array_equal(plain.learn_many(X[:TRACED], y[:TRACED]), probs)
    assert plain.t_ == learner.t_ == TRACED
    for a, b in zip(jax.tree.leaves(plain.state_), jax.tree.leaves(learner.state_)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    np.testing.assert_array_equal(trace.steps, np.arange(1, TRACED + 1))


def test_segment_posterior_is_a_distribution_over_live_starts(traced):
    learner, _, trace = traced
    np.testing.assert_allclose(trace.mass.sum(axis=2), 1.0, atol=1e-9)
    for layer in range(3):
        start, mass = boundaries.next_segment_posterior(learner, layer)
        np.testing.assert_allclose(mass.sum(), 1.0, atol=1e-9)
        assert np.all(np.diff(start) > 0) and start[0] == 1 and start[-1] <= learner.t_ + 1  # a segment may start next
    assert np.all(trace.map_start() <= trace.steps)


def test_change_probability_rises_after_a_switch_and_stays_low_when_stationary(traced):
    """First layer, window 64. Measured on this stream: peaks of 1.0 within 128 steps of each switch,
    at most 0.19 over the last 100 steps before it (stream seeds 1, 2: peaks >= 0.76, quiet <= 0.18)."""
    _, _, trace = traced
    c = trace.change_probability(window=64)
    for b in (SEGMENT, 2 * SEGMENT, 3 * SEGMENT):
        after = c[b: b + 128].max()
        quiet = c[b - 100: b].max()
        assert after > 0.6 and quiet < 0.3 and after - quiet > 0.5, (b, after, quiet)
    found = boundaries.detect(trace, window=64, threshold=0.5)
    result = boundaries.score(found, [0, SEGMENT, 2 * SEGMENT, 3 * SEGMENT], len(c), tolerance=128)
    assert result["recall"] == 1.0 and result["precision"] == 1.0


def test_detect_and_score_on_a_hand_made_posterior():
    """Two slots: an old segment (start 1) and a recent one whose mass jumps at steps 300 and 320
    (one change, refractory) and at 700 (a second change)."""
    n = 1000
    steps = np.arange(1, n + 1)
    start = np.stack([np.ones(n, int), np.where(steps >= 700, 690, 295)], axis=1)
    recent = np.zeros(n)
    recent[299:305] = recent[319:330] = recent[699:720] = 0.9
    trace = boundaries.SegmentTrace(steps, start, np.stack([1 - recent, recent], axis=1)[:, None, :])
    found = boundaries.detect(trace, window=50, threshold=0.5)
    np.testing.assert_array_equal(found.index, [299, 699])
    np.testing.assert_array_equal(found.estimate, [294, 689])
    np.testing.assert_array_equal(trace.map_start()[[0, 299, 800]], [1, 295, 1])
    result = boundaries.score(found, [0, 290, 600, 900], n, tolerance=50)
    # 299 hits 290; 699 is 99 steps after 600: a miss; 900 is never detected
    assert (result["hits"], result["detections"], result["boundaries"]) == (1, 2, 3)
    assert result["precision"] == 0.5 and result["recall"] == pytest.approx(1 / 3)
    assert result["chance_precision"] == pytest.approx(3 * 51 / n)
    assert result["delay"] == 9 and result["estimate_error"] == 4
    twice = boundaries.score(boundaries.Detections(np.array([295, 299]), np.array([290, 290])), [290], n, 50)
    assert (twice["hits"], twice["precision"]) == (1, 0.5)  # a boundary is matched at most once


# ----------------------------------------------------------------------------- pool history


def expected_pool_updates(steps: int, chunk: int) -> int:
    """Closing segments of length >= P per neuron over ``steps`` steps: after each step ``t`` that is a
    multiple of P, ``ctz(t) - log2 P + 1`` of them (docs/algorithm.md §4.4)."""
    log_p = chunk.bit_length() - 1
    return sum(int(tree.trailing_zeros(t)) - log_p + 1 for t in range(chunk, steps + 1, chunk))


def test_pool_history_counters_add_up_and_entries_know_their_origin(stream, tmp_path):
    X, y, task = stream
    learner = nctl.NCTL(**SMALL)
    history = pools.record(learner, X, y)
    P, k = learner.cfg_.chunk, SMALL["pool"].size
    assert list(history.steps) == list(range(0, len(X) + 1, P))
    updates = expected_pool_updates(len(X), P)
    for layer in range(3):
        events = history.events[layer][-1]  # [N, 4]: refine, skip, add, evict
        refine, skip, add, evict = events.T
        np.testing.assert_array_equal(refine + skip + add, updates)
        np.testing.assert_array_equal(history.valid[layer][-1].sum(axis=0), np.minimum(add, k))
        np.testing.assert_array_equal(evict, np.maximum(add - k, 0))
        born = history.born[layer][-1][history.valid[layer][-1]]
        # born: the step the pool was prepared for when the state was stored, one after a multiple of P
        assert born.min() >= P + 1 and born.max() <= len(X) + 1 and np.all((born - 1) % P == 0)
        origin = pools.origin_tasks(history, layer, task)
        assert set(np.unique(origin)) <= {-1, 0, 1, 2}
        np.testing.assert_array_equal(origin >= 0, history.valid[layer])
        shares = pools.task_shares(history, layer, task, 3)
        np.testing.assert_allclose(shares.sum(axis=1), history.valid[layer].sum(axis=1).mean(axis=1) / k)
        table = pools.events_per_task(history, layer, task, 3)
        np.testing.assert_allclose(table.sum(axis=0), events.mean(axis=0))
    assert pools.task_shares(history, 0, task, 3)[-1, 0] > 0  # concept A is back in the last segment
    learner.save(tmp_path / "model.npz")  # the provenance fields round-trip
    restored = nctl.load(tmp_path / "model.npz")
    np.testing.assert_array_equal(restored.state_.nets.pool.born, learner.state_.nets.pool.born)
    np.testing.assert_array_equal(restored.state_.nets.pool.events, learner.state_.nets.pool.events)


def test_record_needs_a_chunk_aligned_learner(stream):
    X, y, _ = stream
    learner = nctl.NCTL(**SMALL)
    learner.learn_many(X[:5], y[:5])
    with pytest.raises(ValueError, match="multiple of its chunk"):
        pools.record(learner, X[5:40], y[5:40])


# ----------------------------------------------------------------------------- command line

TINY = ["--layer-sizes", "2", "1", "--context-bits", "1", "--pool-size", "2", "--min-segment", "16", "--depth", "9",
        "--eviction", "spacing",  # FIFO empties a pool when more segments close at once than it holds (§4.7)
        "--learning-rate", "0.001"]  # one engine for every command (boundaries' default is 0.01)


@pytest.mark.data
def test_cli_saliency_transition(mnist_dir, tmp_path, capsys):
    args = ["saliency", "transition", "--steps-per-task", "48", "--every", "16", "--examples", "8"]
    assert main(args + TINY + ["--data-dir", str(mnist_dir), "--out", str(tmp_path)]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert (tmp_path / "saliency-transition.png").stat().st_size > 0
    assert summary["rows"] == ["1v3", "5v9", "1v8", "1v8 alone"]
    assert np.array(summary["steps"]).tolist()[2] == [112, 128, 144]
    assert summary["correlation_with_first_task"][0][-1] == pytest.approx(1.0)


@pytest.mark.data
def test_cli_saliency_pseudo_tasks(mnist_dir, tmp_path, capsys):
    args = ["saliency", "pseudo-tasks", "--steps-per-task", "64", "--samples", "3", "--examples", "8",
            "--eval-examples", "300"]
    assert main(args + TINY + ["--data-dir", str(mnist_dir), "--out", str(tmp_path)]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert (tmp_path / "saliency-pseudo-tasks.png").stat().st_size > 0
    assert len(summary["samples"]) == 3 and all(0 <= s["accuracy"] <= 1 for s in summary["samples"])


@pytest.mark.data
def test_cli_boundaries(mnist_dir, tmp_path, capsys):
    args = ["boundaries", "--sequences", "2", "--steps", "320", "--plot-sequences", "1"]
    assert main(args + TINY + ["--data-dir", str(mnist_dir), "--out", str(tmp_path)]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert (tmp_path / "boundaries.png").stat().st_size > 0
    pooled = summary["pooled"]
    assert pooled["steps"] == 640 and 0 <= pooled["precision"] <= 1 and 0 <= pooled["recall"] <= 1
    assert pooled["boundaries"] == sum(s["boundaries"] for s in summary["per_sequence"]) > 0
    assert set(summary["pooled_by_layer"]) == {"1", "2"}


@pytest.mark.data
def test_cli_pool_history(mnist_dir, tmp_path, capsys):
    args = ["pool-history", "--examples-per-task", "64"]
    assert main(args + TINY + ["--data-dir", str(mnist_dir), "--out", str(tmp_path)]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert (tmp_path / "pool-history.png").stat().st_size > 0
    assert summary["tasks"] == ["0 vs 1", "2 vs 3", "4 vs 5", "6 vs 7", "8 vs 9"]
    for shares in summary["final_shares"].values():
        assert 0 < sum(shares.values()) <= 1
