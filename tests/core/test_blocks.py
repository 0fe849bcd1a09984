"""Blocks created at a pool boundary are filled from their members' source rows (docs/algorithm.md
§6.2, §6.4): in one pass where one round holds every item, else in compacted rounds; either way every
chosen block holds exactly its sources and no other block changes."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import nctl
from nctl.core import engine
from nctl.core.engine import pool_update, records
from nctl.pool import Pool
from nctl.sequence import FMN


def test_blocks_filled_in_rounds_or_in_one_pass_hold_their_sources(monkeypatch):
    cfg = nctl.NCTL(layer_sizes=(3, 1), context_bits=2, pool=Pool(size=2, min_segment=2), depth=6).engine_config(4)
    net = jax.tree.map(lambda a: jnp.asarray(a[0]), engine.init(cfg, 0, 6).nets)  # the binary network
    shape, W, slot = cfg.layers[0], cfg.pool.lanes, 0
    rng = np.random.default_rng(0)
    pool_rows = rng.normal(size=net.arena.pool_rows[0].shape).astype(np.float32)  # stored states to copy from
    entries = rng.integers(-1, cfg.entries, net.slots.source[slot].shape, dtype=np.int32)  # -1: a fresh row
    source = net.slots.source.at[slot].set(entries)
    net = net.with_arena(pool_rows=(jnp.asarray(pool_rows),) + net.arena.pool_rows[1:]).with_slots(source=source)
    local, contexts = jnp.arange(shape.neurons)[:, None], jnp.arange(cfg.contexts)[None, :]
    new = net.slots.block_of[slot, shape.offset + local, contexts] < 0
    chosen = new & jnp.asarray(rng.random(new.shape) < 0.7)  # a sparse mask: compaction has work to do
    assert 0 < int(jnp.sum(chosen)) < int(jnp.sum(new))
    # blocks for all the new items, filled for the chosen ones
    net, block = jax.jit(lambda net: engine.arena.allocate(net, 0, cfg, new, slot, local, contexts))(net)

    def filled(round_bytes):  # each traced (and compiled whole, not op by op) with its round size
        monkeypatch.setattr(engine.arena, "FILL_ROUND_BYTES", round_bytes)
        return jax.jit(lambda net: engine.arena.fill_blocks(net, 0, cfg, slot, local, contexts, block, chosen))(net).arena.blocks[0]

    assert engine.arena.fill_round(shape, W) >= chosen.size  # the default: one pass
    one_pass = filled(engine.arena.FILL_ROUND_BYTES)
    rounds = filled(0)
    assert engine.arena.fill_round(shape, W) == shape.neurons < int(jnp.sum(chosen))  # several rounds
    np.testing.assert_array_equal(np.asarray(rounds), np.asarray(one_pass))

    members = jnp.arange(W)
    sources = np.asarray(engine.members.source_weights(net, 0, cfg, slot, members, local[..., None], contexts[..., None]))
    ids = np.asarray(block)[np.asarray(chosen)]
    np.testing.assert_array_equal(np.asarray(one_pass)[ids], sources[np.asarray(chosen)])
    untouched = np.setdiff1d(np.arange(shape.blocks), ids)
    np.testing.assert_array_equal(np.asarray(one_pass)[untouched], np.asarray(net.arena.blocks[0])[untouched])
    left = np.asarray(block)[np.asarray(new & ~chosen)]  # allocated, not chosen: still not their sources
    assert not np.array_equal(np.asarray(one_pass)[left], sources[np.asarray(new & ~chosen)])


def test_detached_lineages_are_marked_whatever_their_count():
    """§6.5: the records of every detached member's lineage (its first ``lineage_n`` ids) are marked held,
    no other row; with no detached member, fewer than one chunk, several chunks and all members."""
    rng = np.random.default_rng(5)
    members, R, rows = 75, 6, 300  # 75 members: two full chunks of 32 and a partial one
    mark = jax.jit(records.mark_detached)
    for share in (0.0, 0.1, 0.6, 1.0):
        detached = rng.random(members) < share
        lineage = rng.integers(0, rows, (members, R)).astype(np.int32)
        lineage_n = rng.integers(0, R + 1, members).astype(np.int32)
        held = rng.random(rows) < 0.2
        want = held.copy()
        for m in np.flatnonzero(detached):
            want[lineage[m, :lineage_n[m]]] = True
        got = mark(jnp.asarray(held), jnp.asarray(detached), jnp.asarray(lineage), jnp.asarray(lineage_n))
        np.testing.assert_array_equal(np.asarray(got), want, err_msg=f"share {share}")


def test_the_first_unheld_rows_are_found_in_order_whatever_their_spread():
    """§6.5: the first ``P`` rows not held, in row order, -1 past the last free one: free rows packed in
    one block, spread one per block, fewer than ``P`` in all, none, and an arena shorter than a block."""
    rng = np.random.default_rng(3)
    cases = [(5000, rng.random(5000) > 0.02), (5000, rng.random(5000) > 0.0005),
             (2 * records.FREE_SEARCH_BLOCK * 40, np.arange(2 * records.FREE_SEARCH_BLOCK * 40) % 509 != 3),
             (1000, np.ones(1000, bool)), (100, rng.random(100) > 0.5), (1200, np.arange(1200) < 1190)]
    for rows, held in cases:
        want = np.flatnonzero(~held)[:32]
        want = np.concatenate([want, np.full(32 - len(want), -1)])
        got = np.asarray(jax.jit(records.first_unheld, static_argnums=1)(jnp.asarray(held), 32))
        np.testing.assert_array_equal(got, want, err_msg=f"{rows} rows, {int((~held).sum())} free")


def test_a_write_detaches_only_the_continuing_members_that_read_its_entry():
    """§6.4: before entry ``e`` of a neuron is overwritten, every continuing slot's attached member that reads
    ``e`` takes ``e``'s lineage and (exact mode) its slot gets that neuron's missing blocks filled from the
    sources as they are; a member of a slot past the continuing ones, a member reading another entry and
    the other neurons keep theirs; a write no continuing member reads changes nothing."""
    cfg = nctl.NCTL(layer_sizes=(3, 1), context_bits=2, pool=Pool(size=2, min_segment=2), depth=6).engine_config(4)
    net = jax.tree.map(lambda a: jnp.asarray(a[0]), engine.init(cfg, 0, 6).nets)
    rng = np.random.default_rng(1)
    R, C = cfg.pool.reservoir_size, cfg.contexts
    pool_rows = jnp.asarray(rng.normal(size=net.arena.pool_rows[0].shape).astype(np.float32))
    source = net.slots.source.at[0, 0, 0].set(1).at[0, 1, 0].set(0).at[3, 0, 0].set(1)  # slot, member, neuron
    lineage = net.pool.lineage
    lineage = lineage._replace(ids=lineage.ids.at[1, 0, :5].set(jnp.arange(40, 45, dtype=jnp.int32)),
                               n=lineage.n.at[1, 0].set(5), seen=lineage.seen.at[1, 0].set(9))
    net = net.with_arena(pool_rows=(pool_rows,) + net.arena.pool_rows[1:]).with_slots(source=source).with_pool(lineage=lineage)
    detach = jax.jit(pool_update.detach, static_argnums=(3, 4))
    writes = jnp.zeros(cfg.neurons, bool).at[0].set(True)
    out = detach(net, writes, jnp.full(cfg.neurons, 1, jnp.int32), 2, cfg)  # slots 0 and 1 continue

    np.testing.assert_array_equal(np.asarray(out.slots.lineage.ids[0, 0, 0, :5]), np.arange(40, 45))
    assert (int(out.slots.lineage.n[0, 0, 0]), int(out.slots.lineage.seen[0, 0, 0])) == (5, 9)
    hit = np.zeros(net.slots.detached.shape, bool)
    hit[0, 0, 0] = True
    np.testing.assert_array_equal(np.asarray(out.slots.detached), np.asarray(net.slots.detached) | hit)
    for name in out.slots.lineage._fields:
        got, before = np.asarray(getattr(out.slots.lineage, name)), np.asarray(getattr(net.slots.lineage, name))
        np.testing.assert_array_equal(got[~hit], before[~hit], err_msg=name)
    blocks = np.asarray(out.slots.block_of[0, 0])  # slot 0, neuron 0: every context materialised
    assert np.all(blocks >= 0) and np.all(np.asarray(out.slots.block_of[1:]) == np.asarray(net.slots.block_of[1:]))
    for c in range(C):  # member 0 from the entry about to be overwritten, member 1 from entry 0
        np.testing.assert_array_equal(np.asarray(out.arena.blocks[0][blocks[c], 0]), np.asarray(pool_rows[0, c, 1]))
        np.testing.assert_array_equal(np.asarray(out.arena.blocks[0][blocks[c], 1]), np.asarray(pool_rows[0, c, 0]))

    unread = detach(net, writes, jnp.full(cfg.neurons, 2, jnp.int32), 2, cfg)  # no continuing member reads entry 2
    for got, before in zip(jax.tree.leaves(unread), jax.tree.leaves(net)):
        np.testing.assert_array_equal(np.asarray(got), np.asarray(before))


def test_bounded_lanes_rank_members_in_top_k_order_ties_to_the_lower_member():
    """``top_members`` (bounded mode's lane ranking, §5.3) gives ``lax.top_k``'s indices: largest first,
    ties (equal log weights, absent members at -inf) to the lower member."""
    rng = np.random.default_rng(0)
    for trial in range(40):
        members = int(rng.integers(1, 18))
        count = int(rng.integers(1, members + 1))
        if trial % 2:  # few distinct values: many ties
            weights = rng.choice([-np.inf, -3.0, 0.0, 2.5], size=(3, 5, members))
        else:
            weights = rng.standard_normal((3, 5, members))
        expected = jax.lax.top_k(jnp.asarray(weights, jnp.float32), count)[1]
        np.testing.assert_array_equal(np.asarray(engine.posterior.top_members(jnp.asarray(weights, jnp.float32), count)),
                                      np.asarray(expected))


def test_a_free_stack_counts_the_blocks_it_takes_back_in_order():
    rng = np.random.default_rng(1)
    for length in (1, 2, 5, 255, 2560):
        flags = rng.random(length) < 0.3
        np.testing.assert_array_equal(np.asarray(engine.arena.running_count(jnp.asarray(flags))), np.cumsum(flags))


@pytest.mark.parametrize("bounded", [False, True])
def test_a_fresh_state_in_numpy_has_the_shapes_it_is_planned_with(bounded):
    """``engine.init`` makes the state in numpy; ``jax.eval_shape`` of the same function with ``jax.numpy``
    gives the shapes that memory is planned with (``state_bytes``): the two agree leaf by leaf, and an
    initial pool fills its entries and the members' prior as the pool rule says (§4.4)."""
    learner = nctl.NCTL(layer_sizes=(3, 1), context_bits=2, pool=Pool(size=3, trained_members=2 if bounded else None),
                        n_classes=3, depth=4)
    cfg = learner.engine_config(5)
    state = engine.init(cfg, 7, 4)
    shapes = jax.eval_shape(lambda: engine.init(cfg, 7, 4, xp=jnp))
    made, planned = jax.tree.leaves(state), jax.tree.leaves(shapes)
    assert [(a.shape, a.dtype) for a in made] == [(a.shape, a.dtype) for a in planned]
    assert all(isinstance(a, np.ndarray) and a.flags.writeable for a in made)
    assert learner.state_bytes(5) >= sum(a.nbytes for a in made)


def test_an_initial_pool_fills_its_entries_and_the_members_prior():
    """An FMN given two stored states starts with them in entries 0 and 1 of its pool, in pool order, and
    the prior of §4.4: each stored member 1/(2 x 2), the fresh one 1/2, no member beyond them."""
    cfg = FMN(pool=Pool(size=3)).config(64)
    state = engine.init(cfg, 0, 0, np.array([[1.0, 2.0], [3.0, 0.5]]))
    np.testing.assert_array_equal(state.nets.arena.pool_rows[0][0, 0, 0, :2], [[1.0, 2.0], [3.0, 0.5]])
    np.testing.assert_array_equal(state.nets.pool.in_pool[0, :, 0], [True, True] + [False] * (cfg.entries - 2))
    np.testing.assert_array_equal(state.nets.pool.roster[0, :, 0], [0, 1, -1])
    prior = state.nets.slots.logprior[0, 0, :, 0]
    np.testing.assert_array_equal(prior, [np.log(0.25), np.log(0.25), -np.inf, np.log(0.5)])
    np.testing.assert_array_equal(state.nets.slots.source[0, 0, :, 0], [0, 1, -1])
