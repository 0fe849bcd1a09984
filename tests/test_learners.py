"""The object API: equivalences, persistence, input checking and behaviour of GLN and NCTL."""

import json
from dataclasses import replace

import jax
import numpy as np
import pytest

import nctl
from nctl.core import engine
from nctl.learners import engine_learner
from nctl.pool import Pool
from nctl.streams import synthetic

SMALL = dict(layer_sizes=(4, 3, 1), context_bits=2, learning_rate=0.05)
SMALL_NCTL = dict(SMALL, pool=Pool(size=3, min_segment=8, reservoir_size=8), depth=9)


def stream_arrays(n, n_features=6, seed=0, n_classes=2):
    stream = synthetic(seed=seed, n_features=n_features, segment_length=60, n_segments=max(1, n // 60 + 1))
    X, y, _ = next(stream.chunks(size=n))
    if n_classes > 2:
        y = np.digitize(X[:, 0] + X[:, 1], np.linspace(-1, 1, n_classes - 1))
    return X, y


LEARNERS = [
    pytest.param(lambda: nctl.GLN(**SMALL), 2, id="gln"),
    pytest.param(lambda: nctl.NCTL(**SMALL_NCTL), 2, id="nctl"),
    pytest.param(lambda: nctl.NCTL(**SMALL_NCTL, n_classes=3), 3, id="nctl-3-classes"),
]


@pytest.mark.parametrize("make, n_classes", LEARNERS)
def test_learn_many_equals_a_loop_of_predict_then_learn_one(make, n_classes):
    X, y = stream_arrays(70, n_classes=n_classes)
    batch = make().learn_many(X, y)
    one = make()
    loop = []
    for x, label in zip(X, y):
        loop.append(one.predict_proba_one(x))
        one.learn_one(x, label)
    np.testing.assert_array_equal(np.array(loop), batch)
    assert one.t_ == len(X)


def test_the_river_defaults_predict_one_row_as_learning_predicts_it():
    """The river path's frozen prediction of each next row is the pre-update prediction ``learn_many``
    returns for it, to the last bit, on the network the river and scikit-learn adapters use (before
    the small layers predicted as they learn, 61 of these 200 rows differed in their last bits)."""
    X, y = stream_arrays(200)
    batch = nctl.NCTL.tabular().learn_many(X, y)
    one, loop = nctl.NCTL.tabular(), []
    for x, label in zip(X, y):
        loop.append(one.predict_proba_one(x))
        one.learn_one(x, label)
    np.testing.assert_array_equal(np.array(loop), batch)


@pytest.mark.parametrize("make, n_classes", LEARNERS)
def test_rows_kept_back_by_learn_one_are_learned_before_anything_reads_the_learner(make, n_classes, tmp_path):
    X, y = stream_arrays(100, n_classes=n_classes)  # more rows than learn_one keeps back at once
    batch = make()
    batch.learn_many(X, y)
    one = make()
    for x, label in zip(X, y):
        one.learn_one(x, label)
    assert one.t_ == len(X)
    twin = one.copy()
    one.save(tmp_path / "model.npz")
    for reader in (one, twin, nctl.load(tmp_path / "model.npz")):
        np.testing.assert_array_equal(reader.predict_proba_many(X[:9]), batch.predict_proba_many(X[:9]))
    for mine, theirs in zip(jax.tree.leaves(one.state_), jax.tree.leaves(batch.state_)):
        np.testing.assert_array_equal(mine, theirs)
    np.testing.assert_array_equal(one.learn_many(X[:30], y[:30]), batch.learn_many(X[:30], y[:30]))


@pytest.mark.parametrize("make, n_classes", LEARNERS)
def test_save_then_load_mid_stream_continues_exactly(make, n_classes, tmp_path):
    X, y = stream_arrays(90, n_classes=n_classes)
    straight = make()
    want = straight.learn_many(X, y)
    first = make()
    head = first.learn_many(X[:37], y[:37])
    first.save(tmp_path / "model.npz")
    resumed = nctl.load(tmp_path / "model.npz")
    tail = resumed.learn_many(X[37:], y[37:])
    np.testing.assert_array_equal(np.concatenate([head, tail]), want)
    np.testing.assert_array_equal(resumed.predict_proba_many(X[:5]), straight.predict_proba_many(X[:5]))
    # a restored state has exactly the types of a live one: the same abstract types for JAX, so nothing is
    # compiled again; the same writable host arrays for the native engine
    assert resumed.engine_ == straight.engine_
    kinds = ((lambda a: (jax.typeof(a), a.weak_type)) if straight.engine_ == "jax" else
             (lambda a: (type(a), a.shape, a.dtype, a.flags.writeable)))
    assert [kinds(a) for a in jax.tree.leaves(resumed.state_)] == [kinds(a) for a in jax.tree.leaves(straight.state_)]


def test_a_split_probability_grid_saves_loads_and_a_grid_of_one_is_that_probability(tmp_path):
    X, y = stream_arrays(90)
    grid = nctl.NCTL(**SMALL_NCTL, split_prob=(0.1, 0.5, 0.9))
    want = grid.learn_many(X, y)
    first = nctl.NCTL(**SMALL_NCTL, split_prob=[0.1, 0.5, 0.9])
    head = first.learn_many(X[:37], y[:37])
    first.save(tmp_path / "grid.npz")
    resumed = nctl.load(tmp_path / "grid.npz")
    assert resumed.split_prob == (0.1, 0.5, 0.9)
    np.testing.assert_array_equal(np.concatenate([head, resumed.learn_many(X[37:], y[37:])]), want)
    plain = nctl.NCTL(**SMALL_NCTL, split_prob=0.5).learn_many(X, y)
    np.testing.assert_array_equal(nctl.NCTL(**SMALL_NCTL, split_prob=(0.5,)).learn_many(X, y), plain)
    assert not np.array_equal(want, plain)


def test_load_refuses_a_save_whose_arrays_do_not_fit_the_learner(tmp_path):
    X, y = stream_arrays(20)
    model = nctl.GLN(**SMALL)
    model.learn_many(X, y)
    model.save(tmp_path / "model.npz")
    with np.load(tmp_path / "model.npz") as data:
        arrays = {key: data[key] for key in data.files}
    arrays["leaf_0"] = arrays["leaf_0"][..., :-1]  # one weight column lost
    np.savez(tmp_path / "cut.npz", **arrays)
    with pytest.raises(ValueError, match="array 0 has shape"):
        nctl.load(tmp_path / "cut.npz")



@pytest.mark.parametrize("fmt", [3, 4, 5, 6])
def test_an_older_save_loads_and_continues_exactly(tmp_path, fmt, monkeypatch):
    """Format 3 kept each block's W lanes as one row of W * width; formats 3 and 4 kept one PTW weight
    per tree level (no split-probability axis); formats 3 to 5 kept no contexts per record (the loader
    computes them from the records); formats 3 to 6 kept every layer's blocks in a free-stack arena and
    did not say so. The learner here would now keep its first layer's blocks at fixed places."""
    X, y = stream_arrays(60)
    settings = dict(SMALL_NCTL, context_bits=1)
    assert nctl.NCTL(**settings).engine_config(6).layers[0].fixed
    monkeypatch.setattr(engine.config, "FIXED_BLOCKS_SLACK", 0.0)  # the layout of the older saves
    monkeypatch.setattr(engine.config, "FIXED_PLACES_SHARE", 0.0)
    model = nctl.NCTL(**settings)
    model.learn_many(X[:30], y[:30])
    model.save(tmp_path / "model.npz")
    monkeypatch.undo()
    with np.load(tmp_path / "model.npz") as data:
        arrays = {key: data[key] for key in data.files}
    meta = json.loads(str(arrays.pop("meta")))
    assert meta["shapes"].pop("fixed_blocks") == [False, False, False]
    paths = [jax.tree_util.keystr(path) for path, _ in jax.tree_util.tree_leaves_with_path(model.state_)]
    changed, old_arrays = [], []
    for i, path in enumerate(paths):
        a = arrays[f"leaf_{i}"]
        if ".blocks[" in path and fmt == 3:
            a = a.reshape(a.shape[:-2] + (-1,))
            changed.append(path)
        if path.endswith(".log_b") and fmt < 5:
            a = a[:, :, 0]
            changed.append(path)
        if path.endswith(".record_contexts") and fmt < 6:
            changed.append(path)
            continue
        old_arrays.append(a)
    assert len(changed) == (fmt < 6) + (fmt < 5) + (len(SMALL["layer_sizes"]) if fmt == 3 else 0)
    meta["format"] = fmt
    np.savez(tmp_path / "old.npz", meta=np.array(json.dumps(meta)),
             **{f"leaf_{i}": a for i, a in enumerate(old_arrays)})
    old = nctl.load(tmp_path / "old.npz")
    assert not any(shape.fixed for shape in old.cfg_.layers)
    np.testing.assert_array_equal(old.learn_many(X[30:], y[30:]), model.learn_many(X[30:], y[30:]))


def test_small_layers_keep_their_blocks_at_fixed_places_and_large_ones_in_free_stacks():
    """``engine.configure`` (docs/algorithm.md §6.2): a 16-8-1 network with 4 contexts would fill 94% of its
    fixed places at full depth, so it keeps them; the Split MNIST network's first layer has an arena that
    grows with the tree, and its two small layers keep fixed places, which add under 1/64 to its rows."""
    small = nctl.NCTL.tabular(layer_sizes=(16, 8, 1), context_bits=2)
    tabular = small.engine_config(8)
    assert all(shape.fixed and shape.blocks == tabular.slots * shape.neurons * tabular.contexts
               for shape in tabular.layers)
    assert tabular.layers[0].blocks <= engine.config.FIXED_BLOCKS_SLACK * engine.config.block_bound(
        tabular.max_depth, tabular.contexts, tabular.chunk, tabular.layers[0].neurons)
    split = nctl.NCTL.paper_split_mnist().engine_config(784)
    assert [shape.fixed for shape in split.layers] == [False, True, True]
    assert split.arena_depth < split.max_depth
    bounds = [engine.config.block_bound(split.max_depth, split.contexts, split.chunk, s.neurons) for s in split.layers]
    extra = sum((shape.blocks - bound) * shape.width for shape, bound in zip(split.layers[1:], bounds[1:]))
    assert 0 < extra < sum(bound * shape.width for shape, bound in zip(split.layers, bounds)) / 64
    forced = small.engine_config(8, fixed_blocks=(False, True, False))
    assert [shape.fixed for shape in forced.layers] == [False, True, False]


def test_a_learner_with_fixed_blocks_saves_and_continues_exactly(tmp_path):
    X, y = stream_arrays(60)
    model = nctl.NCTL(**dict(SMALL_NCTL, context_bits=1))
    assert [shape.fixed for shape in model.engine_config(6).layers] == [True, True, True]
    model.learn_many(X[:30], y[:30])
    model.save(tmp_path / "model.npz")
    resumed = nctl.load(tmp_path / "model.npz")
    assert resumed.cfg_ == model.cfg_
    np.testing.assert_array_equal(resumed.learn_many(X[30:], y[30:]), model.learn_many(X[30:], y[30:]))


# a growing tree on 3 features, whose engine for 2^20 steps two tests compare with
GROWING = dict(layer_sizes=(3, 1), context_bits=1, pool=Pool(size=2, min_segment=2, reservoir_size=4), seed=2)


@pytest.mark.parametrize("fixed", [True, False])
def test_a_tree_that_outgrows_its_depth_learns_exactly_like_a_deeper_one(fixed, monkeypatch):
    """A growing tree past ``2^max_depth`` steps: the engine is enlarged by a level mid-stream (more
    slots: fixed places for them after the others', or a longer free stack), and it predicts as an
    engine sized for the deeper tree from the start (to the last bits of a sum over more slots). The
    deeper engine keeps its blocks at fixed places in both cases (the layout changes no prediction), so
    both cases and test_arenas_that_grow_with_the_tree_learn_exactly_like_full_ones compile it once."""
    from nctl.learners import engine_learner

    X, y = stream_arrays(44, n_features=3)
    expected = nctl.NCTL(**GROWING).learn_many(X, y)
    if not fixed:
        monkeypatch.setattr(engine.config, "FIXED_BLOCKS_SLACK", 0.0)
        monkeypatch.setattr(engine.config, "FIXED_PLACES_SHARE", 0.0)
    monkeypatch.setattr(engine_learner, "DEFAULT_MAX_DEPTH", 5)
    shallow = nctl.NCTL(**GROWING)
    got = shallow.learn_many(X, y)
    assert shallow.cfg_.max_depth == 6 and [shape.fixed for shape in shallow.cfg_.layers] == [fixed, fixed]
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12)


@pytest.mark.parametrize("make, n_classes", LEARNERS)
def test_contract_valid_probabilities_seeded_and_inputs_untouched(make, n_classes):
    X, y = stream_arrays(40, n_classes=n_classes)
    X_before, y_before = X.copy(), y.copy()
    fresh = make().predict_proba_many(X[:3])
    expected = 0.5 if n_classes == 2 else 1.0 / n_classes
    np.testing.assert_allclose(fresh, expected)  # zero weights: every neuron predicts 1/2
    a, b = make(), make()
    pa, pb = a.learn_many(X, y), b.learn_many(X, y)
    np.testing.assert_array_equal(pa, pb)
    assert np.all((pa > 0) & (pa < 1)) and np.all(np.isfinite(pa))
    if n_classes > 2:
        np.testing.assert_allclose(pa.sum(axis=1), 1.0)
    np.testing.assert_array_equal(X, X_before)
    np.testing.assert_array_equal(y, y_before)


@pytest.mark.parametrize("make, n_classes", LEARNERS)
def test_copy_is_an_independent_snapshot(make, n_classes):
    X, y = stream_arrays(50, n_classes=n_classes)
    model = make()
    model.learn_many(X[:30], y[:30])
    before = model.predict_proba_many(X[30:])
    twin = model.copy()
    twin.learn_many(X[30:], y[30:])
    np.testing.assert_array_equal(model.predict_proba_many(X[30:]), before)
    assert not np.array_equal(twin.predict_proba_many(X[30:]), before)


def assert_same_learner(a, b):
    """Every array of the two states equal, the block arenas compared where a slot reads them: a free
    block's content is never read (it is refilled when allocated), nor, in bounded mode, a lane's row
    that no member holds or that is older than its member's hold (§5.3: it is refilled from the
    member's source when next trained)."""
    sa, sb = a.state_, b.state_
    nets_a, nets_b = sa.nets.with_arena(blocks=None), sb.nets.with_arena(blocks=None)
    for x, z in zip(jax.tree.leaves((sa.schedule, nets_a, sa.records, sa.key)),
                    jax.tree.leaves((sb.schedule, nets_b, sb.records, sb.key))):
        np.testing.assert_array_equal(x, z)
    block_of = np.asarray(sa.nets.slots.block_of)
    for layer, shape in enumerate(a.cfg_.layers):
        for net in range(block_of.shape[0]):
            cols = slice(shape.offset, shape.offset + shape.neurons)
            blocks = block_of[net, :, cols]  # [S, N_i, C]
            used = blocks >= 0
            read = np.broadcast_to(used[..., None], used.shape + (a.cfg_.pool.lanes,))  # [S, N_i, C, W]
            if a.cfg_.pool.bounded:
                stamps = np.asarray(sa.nets.arena.stamps[layer][net])[np.maximum(blocks, 0)]
                held = np.asarray(sa.nets.slots.lanes[net])[:, cols, None] >= 0
                read = read & held & (stamps >= np.asarray(sa.nets.slots.lane_since[net])[:, cols, None])
            rows_a = np.asarray(sa.nets.arena.blocks[layer][net])[np.maximum(blocks, 0)]  # [S, N_i, C, W, width]
            rows_b = np.asarray(sb.nets.arena.blocks[layer][net])[np.maximum(blocks, 0)]
            np.testing.assert_array_equal(rows_a[read], rows_b[read])


FIXED_PLACES = pytest.param(lambda: nctl.NCTL(**dict(SMALL_NCTL, context_bits=1)), 2, id="nctl-fixed-places")  # §6.2
BOUNDED = pytest.param(lambda: nctl.NCTL(**dict(SMALL_NCTL, pool=replace(SMALL_NCTL["pool"], trained_members=2))), 2,
                       id="nctl-bounded")  # §5.3


@pytest.mark.parametrize("make, n_classes", LEARNERS[1:] + [FIXED_PLACES, BOUNDED])
def test_fork_reads_as_a_copy_would_and_gives_the_learner_back_exactly(make, n_classes):
    X, y = stream_arrays(400, n_classes=n_classes, seed=4)
    test_rows = X[300:340]
    forked, plain = make(), make()
    fixed = [shape.fixed for shape in forked.engine_config(X.shape[1]).layers]
    if n_classes == 2 and forked.context_bits == 1:
        assert fixed == [True] * 3
    else:  # free stacks in the large layers; the output layer's places add under 1/64 to the rows (§6.2)
        assert fixed == [False, False, True]
    forked.learn_many(X[:200], y[:200])
    plain.learn_many(X[:200], y[:200])
    copy = plain.copy()
    copy.learn_many(X[350:357], y[350:357])
    # rows from elsewhere in the stream, as an evaluation's adaptation rows are: the steps after the fork
    # read blocks at contexts its rows do not reach, in slots that its restarts close
    with forked.fork(X[350:357], y[350:357]) as adapted:  # steps 201-207: no pool boundary (P = 8)
        assert adapted is forked and adapted.t_ == 207  # the journal, not a copy
        np.testing.assert_array_equal(adapted.predict_proba_many(test_rows), copy.predict_proba_many(test_rows))
        with pytest.raises(RuntimeError, match="only predicts"):
            adapted.learn_one(X[0], y[0])
    assert forked.t_ == 200
    np.testing.assert_array_equal(forked.learn_many(X[200:300], y[200:300]), plain.learn_many(X[200:300], y[200:300]))
    assert_same_learner(forked, plain)
    copy = plain.copy()
    copy.learn_many(X[350:370], y[350:370])
    with forked.fork(X[350:370], y[350:370]) as adapted:  # three pool boundaries among the rows
        assert adapted is forked
        np.testing.assert_array_equal(adapted.predict_proba_many(test_rows), copy.predict_proba_many(test_rows))
    np.testing.assert_array_equal(forked.learn_many(X[300:400], y[300:400]), plain.learn_many(X[300:400], y[300:400]))
    assert_same_learner(forked, plain)


@pytest.mark.parametrize("trained_members, pool_copy", [(None, "memory"), (2, "memory"), (None, "disk")],
                         ids=["exact", "bounded", "exact-pool-on-disk"])
def test_forks_on_rows_from_elsewhere_give_the_learner_back_exactly(trained_members, pool_copy, monkeypatch):
    """Slots of short segments close within a fork's rows and their blocks go back to the free stack,
    from which the fork's new slots take them for any context. Steps after the fork read those slots
    at contexts the fork's rows need not reach (the rows come from elsewhere in the stream, as adaptation
    rows do), so the journal keeps every block of the slots the fork closes (§6.7). A fork every 7
    rows, four of them with a pool boundary among their rows (P = 32), whose journals copy the pool
    entries, in memory or to a temporary file, and undo reads back the cells the boundary wrote; a
    file serves every fork from the same state."""
    monkeypatch.setenv("NCTL_ENGINE", "jax")  # the JAX engine's journals (the native engine's forks keep a copy)
    monkeypatch.setattr(engine_learner, "POOL_COPY_SHARE", 0.0 if pool_copy == "disk" else np.inf)
    journals, take = [], engine.journal
    monkeypatch.setattr(engine, "journal", lambda *args, **kw: journals.append(take(*args, **kw)) or journals[-1])
    X, y = stream_arrays(700)
    pool = replace(SMALL_NCTL["pool"], min_segment=32, trained_members=trained_members)
    make = lambda: nctl.NCTL(**dict(SMALL_NCTL, pool=pool))
    forked, plain = make(), make()
    forks = 2 if pool_copy == "disk" else 1  # the second fork from the same state reuses the first's file
    for t in range(0, 140, 7):
        np.testing.assert_array_equal(forked.learn_many(X[t:t + 7], y[t:t + 7]), plain.learn_many(X[t:t + 7], y[t:t + 7]))
        for fork in range(forks):
            other = (175 + 13 * t + 50 * fork) % 600
            with forked.fork(X[other:other + 7], y[other:other + 7]) as adapted:
                assert adapted is forked
    pools = [kept.pool for kept in journals if kept.pool is not None]
    assert len(journals) == 20 * forks and len(pools) == 4 * forks
    assert all(isinstance(rows, np.memmap) == (pool_copy == "disk") for pool in pools for rows in pool)
    if pool_copy == "disk":
        assert all(second is first for first, second in zip(pools[::2], pools[1::2]))
        assert len({id(pool) for pool in pools}) == 4  # a state that learned since copies its pool anew
    np.testing.assert_array_equal(forked.learn_many(X[140:240], y[140:240]), plain.learn_many(X[140:240], y[140:240]))
    assert_same_learner(forked, plain)


def test_a_fork_whose_boundaries_run_the_record_arena_short_puts_the_old_arena_back(monkeypatch):
    """A pool boundary reserves the record rows of the next P steps; where the arena might not have them
    (fewer than (boundaries + 1) P rows unheld) the fork's rows may double it. The journal holds the
    record arrays and undo puts them back, shapes and all; only where a growing tree's block arenas
    could be enlarged with them is the fork a copy (§6.5, §6.7). The JAX engine's journals: its learners run
    on JAX here."""
    monkeypatch.setenv("NCTL_ENGINE", "jax")
    monkeypatch.setattr(engine.config, "initial_record_rows", lambda cfg: 6 * cfg.chunk)  # doubled within 60 rows
    X, y = stream_arrays(300)
    make = lambda: nctl.NCTL(**SMALL_NCTL)
    forked, plain = make(), make()
    rows = forked.engine_config(X.shape[1]).record_rows
    journaled, doubled = [], []
    for t in range(0, 70, 7):
        np.testing.assert_array_equal(forked.learn_many(X[t:t + 7], y[t:t + 7]), plain.learn_many(X[t:t + 7], y[t:t + 7]))
        held = forked.cfg_.record_rows
        copy = forked.copy()
        copy.learn_many(X[200 + t:207 + t], y[200 + t:207 + t])
        with forked.fork(X[200 + t:207 + t], y[200 + t:207 + t]) as adapted:
            journaled.append(adapted is forked)
            doubled.append(adapted.cfg_.record_rows > held)
            np.testing.assert_array_equal(adapted.predict_proba_many(X[280:290]), copy.predict_proba_many(X[280:290]))
        assert forked.cfg_.record_rows == held
    assert all(journaled) and any(doubled) and plain.cfg_.record_rows > rows
    np.testing.assert_array_equal(forked.learn_many(X[70:170], y[70:170]), plain.learn_many(X[70:170], y[70:170]))
    assert_same_learner(forked, plain)
    # a growing tree whose block arenas are not at full depth: a doubled record arena may take them along
    monkeypatch.setattr(engine.config, "EAGER_ARENA_BYTES", 0)  # every arena starts lean
    monkeypatch.setattr(engine.config, "MIN_ARENA_DEPTH", 0)  # and small
    monkeypatch.setattr(engine.driver, "enlarge_ahead", lambda *args: None)
    X, y = stream_arrays(50, n_features=3)
    growing = nctl.NCTL(**GROWING)
    growing.learn_many(X[:3], y[:3])
    assert growing.cfg_.arena_depth < growing.cfg_.max_depth
    with growing.fork(X[40:43], y[40:43]) as adapted:
        assert adapted is growing  # the record arena has room: a journal
    monkeypatch.setattr(engine.forks, "unheld_records", lambda state, cfg: 0)  # every boundary may run short
    with growing.fork(X[40:43], y[40:43]) as adapted:
        assert adapted is not growing


def test_candidate_contexts_hold_the_engines_contexts_and_both_sides_of_a_gate_on_its_threshold():
    from nctl.core import gating

    model = nctl.NCTL(**SMALL_NCTL)
    X, y = stream_arrays(40)
    model.learn_many(X[:1], y[:1])
    normals, offsets = np.asarray(model.state_.nets.gates.normals[0]), np.asarray(model.state_.nets.gates.offsets[0])
    on_gate = offsets[0, 0] * normals[0, 0]  # neuron 0's first hyperplane passes through this point
    rows = np.vstack([X, on_gate]).astype(np.float32)
    reach = engine.forks.candidate_contexts(normals[None], offsets[None], rows)[0]  # [N, C]
    for row in rows[:-1]:
        chosen = np.asarray(gating.contexts(gating.Gates(normals, offsets), row))
        assert reach[np.arange(len(chosen)), chosen].all()
    alone = engine.forks.candidate_contexts(normals[None], offsets[None], on_gate[None].astype(np.float32))[0, 0]
    assert alone.sum() == 2 and np.flatnonzero(alone)[1] - np.flatnonzero(alone)[0] == 1  # bit 0 either way


@pytest.mark.parametrize(
    "x, label, message",
    [
        (np.zeros(5), 1, "6 features"),
        (np.array([0, 0, 0, np.nan, 0, 0]), 1, "NaN"),
        (np.array([0, 0, 0, np.inf, 0, 0]), 1, "NaN or infinity"),
        (np.zeros(6), 2, "0 or 1"),
        (np.zeros(6), 0.5, "0 or 1"),
        (np.array(["a"] * 6), 1, "dtype"),
        (np.zeros((2, 6)), 1, "1-D feature vector"),
        (np.zeros(6), [1, 0], "single label"),
    ],
)
def test_bad_input_raises_and_leaves_the_learner_unchanged(x, label, message):
    X, y = stream_arrays(20)
    model = nctl.NCTL(**SMALL_NCTL)
    model.learn_many(X, y)
    before = model.predict_proba_many(X)
    with pytest.raises(ValueError, match=message):
        model.learn_one(x, label)
    assert model.t_ == 20
    np.testing.assert_array_equal(model.predict_proba_many(X), before)


def test_nctl_with_all_prior_mass_on_one_segment_is_a_gln():
    X, y = stream_arrays(120)
    gln = nctl.GLN(**SMALL).learn_many(X, y)
    single_segment = nctl.NCTL(**SMALL_NCTL, split_prob=0.0).learn_many(X, y)
    np.testing.assert_allclose(single_segment, gln, rtol=0, atol=1e-5)


def test_nctl_remembers_a_task_that_returns_better_than_gln():
    stream = synthetic(seed=3, n_features=6, n_concepts=2, segment_length=400, n_segments=4, label_noise=0.0)
    X, y, _ = next(stream.chunks(size=len(stream)))
    losses = {}
    # spacing: with the authors' FIFO pruning a boundary where more segments close than the pool holds
    # empties it (docs/algorithm.md §4.7, §7); on this stream FIFO's loss is 0.44 against GLN's 0.53
    nctl_model = nctl.NCTL(**dict(SMALL_NCTL, depth=11, pool=replace(SMALL_NCTL["pool"], eviction="spacing")))
    for name, model in [("gln", nctl.GLN(**SMALL)), ("nctl", nctl_model)]:
        p = model.learn_many(X, y)
        loss = -np.log(np.where(y == 1, p, 1 - p))
        losses[name] = loss[800:].mean()  # tasks A and B both come back
    assert losses["nctl"] < 0.8 * losses["gln"]


def test_long_stream_stays_finite_with_flat_memory():
    rng = np.random.default_rng(0)
    # L_min 16: thousands of pool decisions and evictions, a quarter of the host round trips of L_min 4
    model = nctl.NCTL(layer_sizes=(2, 1), context_bits=1, pool=Pool(size=2, min_segment=16, reservoir_size=4),
                      learning_rate=0.1, depth=17)
    sizes = []
    for block in range(10):  # 100,000 steps: two concepts swapping every 3,000 steps
        X = rng.standard_normal((10_000, 2)).astype(np.float32)
        concept = (np.arange(10_000) + block * 10_000) // 3000 % 2
        y = np.where(concept == 0, X[:, 0] > 0, X[:, 1] > 0).astype(int)
        p = model.learn_many(X, y)
        assert np.all(np.isfinite(p)) and np.all((p > 0) & (p < 1))
        sizes.append(sum(a.nbytes for a in __import__("jax").tree.leaves(model.state_)))
    assert model.t_ == 100_000
    assert sizes[-1] == sizes[2]  # nothing grows once the arena has settled
    assert np.all(model.pool_events()[0][0][:, 3] > 1000)  # the pool was full and kept changing


def test_hyperplanes_are_the_states_and_a_glns_of_the_same_seed():
    """``hyperplanes`` reports the gates the learner's state holds, bit for bit, and a GLN of the same
    seed and layers draws the same ones (both come from ``gln.network_gates``)."""
    model, twin = nctl.NCTL(**SMALL_NCTL, n_classes=3), nctl.GLN(**SMALL, n_classes=3)
    X, y = stream_arrays(4, n_classes=3)
    model.learn_many(X, y)
    twin.learn_many(X, y)
    reported = model.hyperplanes(X.shape[1])
    for part, held in enumerate((model.state_.nets.gates.normals, model.state_.nets.gates.offsets)):  # normals, offsets
        assert np.array_equal(np.stack([np.concatenate([layer[part] for layer in net]) for net in reported]),
                              np.asarray(held))
        assert all(np.array_equal(np.asarray(layer.gates[part]), np.stack([net[i][part] for net in reported]))
                   for i, layer in enumerate(twin.state_))


@pytest.mark.parametrize("make", [lambda: nctl.GLN(layer_sizes=(4, 1), n_classes=3),
                                  lambda: nctl.NCTL(**SMALL_NCTL, n_classes=3)])  # the engine of LEARNERS' third
def test_state_bytes_is_the_size_of_the_state_the_learner_then_creates(make):
    learner = make()
    predicted = learner.state_bytes(6)
    assert learner.state_ is None  # computed from shapes: nothing created
    learner.learn_one(np.zeros(6, np.float32), 1)
    assert predicted == sum(leaf.nbytes for leaf in jax.tree.leaves(learner.state_))
    assert make().state_bytes(12) > predicted  # more inputs, bigger first-layer weights


def test_arenas_that_grow_with_the_tree_learn_exactly_like_full_ones(monkeypatch):
    rng = np.random.default_rng(5)
    # 200 steps: the lean arenas (trees of 2^4 steps) are enlarged once, to trees of 2^8 steps; every
    # arena size is an engine of its own to compile
    X = rng.standard_normal((200, 3)).astype(np.float32)
    y = (X[:, 0] * np.sign(np.arange(200) % 100 - 50) > 0).astype(int)
    full = nctl.NCTL(**GROWING)
    expected = full.learn_many(X, y)
    monkeypatch.setattr(engine.config, "EAGER_ARENA_BYTES", 0)  # every arena starts lean
    monkeypatch.setattr(engine.config, "MIN_ARENA_DEPTH", 0)  # and small
    # enlarged when needed, not compiled ahead (tests/test_compilation.py checks that): the test compiles
    # only the arenas the stream uses
    monkeypatch.setattr(engine.driver, "enlarge_ahead", lambda *args: None)
    lean = nctl.NCTL(**GROWING)
    first = lean.learn_many(X[:10], y[:10])
    start_depth = lean.cfg_.arena_depth
    rest = lean.learn_many(X[10:], y[10:])
    assert start_depth < lean.cfg_.arena_depth < full.cfg_.arena_depth == full.cfg_.max_depth
    np.testing.assert_array_equal(np.concatenate([first, rest]), expected)


def test_reserved_arenas_are_sized_once_and_learn_exactly_like_growing_ones(monkeypatch):
    rng = np.random.default_rng(5)
    X = rng.standard_normal((200, 3)).astype(np.float32)
    y = (X[:, 0] * np.sign(np.arange(200) % 100 - 50) > 0).astype(int)
    monkeypatch.setattr(engine.config, "EAGER_ARENA_BYTES", 0)  # every arena starts lean
    monkeypatch.setattr(engine.config, "MIN_ARENA_DEPTH", 0)  # and small
    monkeypatch.setattr(engine.driver, "enlarge_ahead", lambda *args: None)
    growing = nctl.NCTL(**GROWING)
    expected = growing.learn_many(X, y)
    reserved = nctl.NCTL(**GROWING)
    reserved.reserve(200)
    first = reserved.learn_many(X[:10], y[:10])
    sized = reserved.cfg_
    rest = reserved.learn_many(X[10:], y[10:])
    assert reserved.cfg_ == sized and sized.arena_depth == engine.lean_arena_depth(sized, 200)  # never enlarged
    assert sized.arena_depth < sized.max_depth  # room for the stream asked for, not for 2^max_depth steps
    np.testing.assert_array_equal(np.concatenate([first, rest]), expected)
    twin = nctl.NCTL(**GROWING)
    twin.reserve(200)
    twin = twin.copy()  # a copy made before the first example keeps the reservation
    twin.learn_many(X[:10], y[:10])
    assert twin.cfg_ == sized
    # reserved once the state exists: enlarged at once
    late = nctl.NCTL(**GROWING)
    first = late.learn_many(X[:10], y[:10])
    start = late.cfg_.arena_depth
    late.copy().reserve(200)
    assert late.cfg_.arena_depth == start  # the copy's reservation leaves this learner alone
    late.reserve(200)
    assert start < late.cfg_.arena_depth == sized.arena_depth
    rest = late.learn_many(X[10:], y[10:])
    assert late.cfg_.arena_depth == sized.arena_depth
    np.testing.assert_array_equal(np.concatenate([first, rest]), expected)
    for bad in (-1, 2.5, True, "200"):
        with pytest.raises(ValueError, match=r"reserve: n_steps must be an integer >= 0, got"):
            late.reserve(bad)
    assert late.cfg_.arena_depth == sized.arena_depth and late.t_ == 200


def test_an_enlargement_reuses_the_buffers_of_the_arrays_it_does_not_grow(recwarn, monkeypatch):
    """A doubled record arena (§6.5) grows the records' arrays only: every other array of the state
    keeps its buffer (donated to the enlargement), so the process holds the state once, not twice (the
    JAX engine's enlargement: its learners run on JAX here)."""
    monkeypatch.setenv("NCTL_ENGINE", "jax")
    X, y = stream_arrays(60)
    model, twin = nctl.NCTL(**SMALL_NCTL), nctl.NCTL(**SMALL_NCTL)
    model.learn_many(X[:20], y[:20])
    twin.learn_many(X[:20], y[:20])
    state, cfg = model.state_, model.cfg_
    blocks, pools = state.nets.arena.blocks[0], state.nets.arena.pool_rows[0]
    pointers = (blocks.unsafe_buffer_pointer(), pools.unsafe_buffer_pointer())
    grown, new = engine.driver.enlarge(state, cfg, cfg._replace(record_rows=2 * cfg.record_rows))
    assert new.record_rows == grown.records.z.shape[0] == 2 * cfg.record_rows
    assert (grown.nets.arena.blocks[0].unsafe_buffer_pointer(), grown.nets.arena.pool_rows[0].unsafe_buffer_pointer()) \
        == pointers and blocks.is_deleted()
    assert not [w for w in recwarn if "donated" in str(w.message)]
    model.state_, model.cfg_ = grown, new
    np.testing.assert_array_equal(model.learn_many(X[20:], y[20:]), twin.learn_many(X[20:], y[20:]))


def test_a_boundary_writes_a_winner_one_neuron_at_a_time():
    """A winner goes into its pool cell one neuron at a time (§6.3): the boundary program's scratch
    memory is less than one layer's rows at every context (which the process would otherwise allocate,
    and fault in, at every boundary)."""
    X, y = stream_arrays(20, n_features=200)
    model = nctl.NCTL(layer_sizes=(16, 1), context_bits=6, pool=Pool(size=3, min_segment=8, reservoir_size=8), depth=9)
    model.learn_many(X[:10], y[:10])
    program = engine.compiled.pool_boundary.lower(model.state_, model.cfg_).compile()
    layer_rows = 16 * 2 ** 6 * 201 * 4  # N_i x C x (inputs + bias) x 4 B
    assert program.memory_analysis().temp_size_in_bytes < layer_rows


def test_presets_are_the_papers_settings_that_the_experiments_use_and_take_overrides():
    from nctl.experiments import configs

    split = nctl.NCTL.paper_split_mnist(seed=3)
    assert (split.layer_sizes, split.context_bits, split.learning_rate) == ((50, 25, 1), 4, 1e-3)
    assert (split.pool.eviction, split.pool.size, split.pool.min_segment, split.seed) == ("fifo", 15, 32, 3)
    permuted = nctl.NCTL.paper_permuted_mnist()
    assert (permuted.layer_sizes, permuted.context_bits, permuted.n_classes) == ((10, 5, 1), 6, 10)
    assert nctl.NCTL.paper_electricity().learning_rate == 0.1
    for preset, experiment in [("split_mnist", "split-mnist"), ("permuted_mnist", "permuted-mnist"),
                               ("electricity", "elec2-5")]:
        assert dict(configs.get(experiment).network) == dict(nctl.learners.PAPER_NETWORKS[preset])
    tabular = nctl.NCTL.tabular(seed=1)
    assert all(getattr(tabular, name) == value for name, value in nctl.learners.TABULAR.items())
    with pytest.raises(ValueError, match="learning_rate"):
        nctl.NCTL.tabular(learning_rate=-1.0)


@pytest.mark.parametrize("make, n_classes", LEARNERS)
def test_predicting_leaves_the_state_and_the_save_file_as_they_were(make, n_classes, tmp_path):
    X, y = stream_arrays(48, n_classes=n_classes)
    model = make()
    model.learn_many(X[:32], y[:32])  # t = 32: a pool boundary (L_min 8) has just been processed
    model.save(tmp_path / "before.npz")
    before = [np.asarray(leaf).copy() for leaf in jax.tree.leaves(model.state_)]
    model.predict_proba_one(X[40])
    model.predict_proba_many(X[32:])
    model.predict_one(X[33])
    assert all(np.array_equal(a, np.asarray(b)) for a, b in zip(before, jax.tree.leaves(model.state_)))
    assert model.t_ == 32
    model.save(tmp_path / "after.npz")
    with np.load(tmp_path / "before.npz") as old, np.load(tmp_path / "after.npz") as new:
        assert old.files == new.files and all(np.array_equal(old[key], new[key]) for key in old.files)


@pytest.mark.parametrize("n_features", [256, 784])
def test_nctl_with_no_pool_runs_at_the_benchmarks_widths(n_features):
    """Pool size 0 (PTW over each neuron's GGM) on wide inputs, where the layer runs through the CPU kernels:
    with all prior mass on one segment it is the GLN, learning and predicting."""
    rng = np.random.default_rng(n_features)
    X = rng.standard_normal((40, n_features)).astype(np.float32)
    y = (X[:, :3].sum(axis=1) > 0).astype(int)
    gln, no_pool = nctl.GLN(**SMALL), nctl.NCTL(**SMALL, pool=Pool(size=0), split_prob=0.0, depth=6)
    np.testing.assert_allclose(no_pool.learn_many(X[:32], y[:32]), gln.learn_many(X[:32], y[:32]), rtol=0, atol=1e-5)
    np.testing.assert_allclose(no_pool.predict_proba_many(X[32:]), gln.predict_proba_many(X[32:]), rtol=0, atol=1e-5)
