"""Blocks created at a pool boundary are filled from their members' source rows (docs/algorithm.md
§6.2, §6.4): in one pass where one round holds every item, else in compacted rounds; either way every
chosen block holds exactly its sources and no other block changes."""

import jax
import jax.numpy as jnp
import numpy as np

import nctl
from nctl.core import engine


def test_blocks_filled_in_rounds_or_in_one_pass_hold_their_sources(monkeypatch):
    cfg = nctl.NCTL(layer_sizes=(3, 1), context_bits=2, pool_size=2, min_segment=2, depth=6).engine_config(4)
    net = jax.tree.map(lambda a: a[0], engine.init(cfg, jax.random.PRNGKey(0), 6).nets)  # the binary network
    shape, W, slot = cfg.layers[0], cfg.pool.lanes, 0
    rng = np.random.default_rng(0)
    pool_rows = rng.normal(size=net.pool_rows[0].shape).astype(np.float32)  # stored states to copy from
    entries = rng.integers(-1, cfg.entries, net.source[slot].shape, dtype=np.int32)  # -1: a fresh row
    source = net.source.at[slot].set(entries)
    net = net._replace(pool_rows=(jnp.asarray(pool_rows),) + net.pool_rows[1:], source=source)
    local, contexts = jnp.arange(shape.neurons)[:, None], jnp.arange(cfg.contexts)[None, :]
    new = net.block_of[slot, shape.offset + local, contexts] < 0
    chosen = new & jnp.asarray(rng.random(new.shape) < 0.7)  # a sparse mask: compaction has work to do
    assert 0 < int(jnp.sum(chosen)) < int(jnp.sum(new))
    # blocks for all the new items, filled for the chosen ones
    net, block = jax.jit(lambda net: engine.allocate(net, 0, cfg, new, slot, local, contexts))(net)

    def filled(round_bytes):  # each traced (and compiled whole, not op by op) with its round size
        monkeypatch.setattr(engine, "FILL_ROUND_BYTES", round_bytes)
        return jax.jit(lambda net: engine.fill_blocks(net, 0, cfg, slot, local, contexts, block, chosen))(net).blocks[0]

    assert engine.fill_round(shape, W) >= chosen.size  # the default: one pass
    one_pass = filled(engine.FILL_ROUND_BYTES)
    rounds = filled(0)
    assert engine.fill_round(shape, W) == shape.neurons < int(jnp.sum(chosen))  # several rounds
    np.testing.assert_array_equal(np.asarray(rounds), np.asarray(one_pass))

    members = jnp.arange(W)
    sources = np.asarray(engine.source_weights(net, 0, cfg, slot, members, local[..., None], contexts[..., None]))
    ids = np.asarray(block)[np.asarray(chosen)]
    np.testing.assert_array_equal(np.asarray(one_pass)[ids], sources[np.asarray(chosen)])
    untouched = np.setdiff1d(np.arange(shape.blocks), ids)
    np.testing.assert_array_equal(np.asarray(one_pass)[untouched], np.asarray(net.blocks[0])[untouched])
    left = np.asarray(block)[np.asarray(new & ~chosen)]  # allocated, not chosen: still not their sources
    assert not np.array_equal(np.asarray(one_pass)[left], sources[np.asarray(new & ~chosen)])


def test_detached_lineages_are_marked_whatever_their_count():
    """§6.5: the records of every detached member's lineage (its first ``lineage_n`` ids) are marked held,
    no other row; with no detached member, fewer than one chunk, several chunks and all members."""
    from nctl.core import boundary

    rng = np.random.default_rng(5)
    members, R, rows = 75, 6, 300  # 75 members: two full chunks of 32 and a partial one
    mark = jax.jit(boundary._mark_detached)
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
