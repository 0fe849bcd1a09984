"""Digests of what learners compute, to show that a change moves no bit, as JSON lines.

For six networks (binary and multi-class, 2 to 784 inputs): an NCTL and a GLN of the same seed learn
the same 70 random rows; prints SHA-256 prefixes of the NCTL state, its predictions, the GLN state and
its predictions, and the NCTL's ``state_bytes``; then NCTL in bounded mode (``trained_members=2``) on
two of them; then an FMN over 100 bits with an initial pool; last, the Split MNIST network (784 inputs,
50-25-1, C = 16, k = 15, R = 100, L_min = 32) on 6,000 rows of a rule that flips every 128 rows, whose
first layer is scored one neuron at a time with the CPU kernel and whose record arena is swept and
reused, which the small networks never reach (about a minute); and the Permuted MNIST experiment's ten
networks, exact and bounded, on 2,048 rows. Run
at two commits (``PYTHONPATH=<checkout>/src``) and compare the lines. The records' contexts (kept since
save format 6, derived from the records) are left out of the NCTL state's digest, so that it compares
with commits before them; ``nctl_rows`` digests that state with the blocks in (slot, neuron, context)
order and without the free stacks, so that it compares across block layouts (fixed places or free
stacks, docs/algorithm.md §6.2).

    python tools/state_digests.py
"""

import hashlib
import json

import jax
import numpy as np

import nctl
from nctl.pool import Pool
from nctl.sequence import FMN

NETWORKS = [((50, 25, 1), 784, 4, 2, 0), ((6, 3, 1), 784, 1, 10, 3), ((4, 3, 1), 6, 2, 3, 11), ((2, 1), 3, 2, 2, 3),
            ((1,), 2, 2, 3, 3), ((16, 8, 1), 8, 2, 2, 0)]  # layers, inputs, context bits, classes, seed


def digest(tree) -> str:
    return hashlib.sha256(b"".join(np.asarray(a).tobytes() for a in jax.tree.leaves(tree))).hexdigest()[:16]


def nctl_state(model):
    """The learner's state without the records' contexts (where it has them)."""
    nets = model.state_.nets
    if "record_contexts" in nets._fields:
        nets = nets._replace(record_contexts=None)
    return model.state_._replace(nets=nets)


def nctl_rows(model):
    """``nctl_state`` in (slot, neuron, context) order (``in_place_order``)."""
    return in_place_order(nctl_state(model), model.cfg_)


def in_place_order(state, cfg):
    """``state`` with each layer's blocks (and their stamps, in bounded mode) put in (slot, neuron,
    context) order for the live slots, zero where no block is held, whether a block is held in place of
    the block ids, and without the free stacks: the same whether a layer keeps its blocks in a
    free-stack arena or at fixed places (docs/algorithm.md §6.2). In bounded mode only the current lanes
    are kept (a member, and filled since the member took the lane, §6.6): the others are never read and
    hold whatever their storage held before, which depends on the layout."""
    live = np.arange(cfg.slots) < int(state.schedule.size)
    block_of = np.where(live[None, :, None, None], np.asarray(state.nets.slots.block_of), -1)  # [nets, S, N, C]

    def ordered(per_block):  # [nets, A, ...] of each layer -> [nets, S N_i C, ...]
        out = []
        for shape, arena in zip(cfg.layers, per_block):
            ids = block_of[:, :, shape.offset:shape.offset + shape.neurons].reshape(block_of.shape[0], -1)
            arena = np.asarray(arena)
            index = np.maximum(ids, 0).reshape(ids.shape + (1,) * (arena.ndim - 2))
            held = (ids >= 0).reshape(index.shape)
            out.append(np.where(held, np.take_along_axis(arena, index, axis=1), 0))
        return tuple(out)

    nets = state.nets.with_arena(blocks=ordered(state.nets.arena.blocks), free=None, n_free=None)
    nets = nets.with_slots(block_of=block_of >= 0)
    if state.nets.arena.stamps is not None:  # bounded mode
        stamps, blocks = [], []
        for shape, stamp, rows in zip(cfg.layers, ordered(nets.arena.stamps), nets.arena.blocks):
            cols = slice(shape.offset, shape.offset + shape.neurons)
            member = np.asarray(state.nets.slots.lanes)[:, :, cols, None, :]  # [nets, S, N_i, 1, W]
            since = np.asarray(state.nets.slots.lane_since)[:, :, cols, None, :]
            held = (block_of[:, :, cols] >= 0)[..., None]
            current = (held & (member >= 0) & (stamp.reshape(held.shape[:4] + (-1,)) >= since)).reshape(stamp.shape)
            stamps.append(np.where(current, stamp, -1))
            blocks.append(np.where(current[..., None], rows, 0))
        nets = nets.with_arena(blocks=tuple(blocks), stamps=tuple(stamps))
    return state._replace(nets=nets)


def main() -> None:
    rng = np.random.default_rng(0)
    for layers, d, bits, classes, seed in NETWORKS:
        X, y = rng.standard_normal((70, d)).astype(np.float32), rng.integers(0, classes, 70)
        model = nctl.NCTL(layer_sizes=layers, context_bits=bits, n_classes=classes,
                          pool=Pool(size=3, min_segment=8, reservoir_size=8), depth=9, seed=seed)
        p = model.learn_many(X, y)
        gln = nctl.GLN(layer_sizes=layers, context_bits=bits, n_classes=classes, seed=seed)
        q = gln.learn_many(X, y)
        print(json.dumps({"network": [list(layers), d, bits, classes, seed], "nctl_state": digest(nctl_state(model)),
                          "nctl_rows": digest(nctl_rows(model)), "nctl_predictions": digest(p), "gln_state": digest(gln.state_), "gln_predictions": digest(q),
                          "state_bytes": model.state_bytes(d)}))
    for layers, d, bits, classes, seed in (NETWORKS[2], NETWORKS[5]):
        X, y = rng.standard_normal((70, d)).astype(np.float32), rng.integers(0, classes, 70)
        model = nctl.NCTL(layer_sizes=layers, context_bits=bits, n_classes=classes,
                          pool=Pool(size=3, min_segment=4, reservoir_size=8, trained_members=2), depth=9, seed=seed)
        p = model.learn_many(X, y)
        events = sum(np.asarray(layer).sum(axis=0) for net in model.pool_events() for layer in net)
        print(json.dumps({"bounded_network": [list(layers), d, bits, classes, seed], "nctl_state": digest(nctl_state(model)),
                          "nctl_rows": digest(nctl_rows(model)), "nctl_predictions": digest(p), "pool_events": events.tolist()}))
    run = FMN(pool=Pool(size=3, min_segment=2), initial_pool=((1.0, 2.0),)).run(rng.integers(0, 2, 100))
    print(json.dumps({"fmn_p1": digest(run.p1), "fmn_pool": run.pool}))
    print(json.dumps(split_mnist_network(6000)))
    for trained_members in (None, 4):
        print(json.dumps(permuted_mnist_network(2048, trained_members)))


def permuted_mnist_network(n: int, trained_members: int | None) -> dict:
    """Digests of the Permuted MNIST experiment's ten one-vs-all 10-5-1 networks (784 inputs, k = 15,
    spacing eviction; C = 64 and L_min = 64 so that ``n`` rows reach many pool boundaries), exact or
    bounded, after ``n`` rows of a ten-class rule whose classes permute every 256 rows."""
    rng = np.random.default_rng(1)
    X = rng.standard_normal((n, 784)).astype(np.float32)
    y = (np.argmax(X[:, :10], axis=1) + (np.arange(n) // 256) * 3) % 10
    pool = Pool(size=15, min_segment=64, eviction="spacing", trained_members=trained_members)
    model = nctl.NCTL(layer_sizes=(10, 5, 1), context_bits=6, n_classes=10, pool=pool, depth=11)
    p = model.learn_many(X, y)
    events = sum(np.asarray(layer).sum(axis=0) for net in model.pool_events() for layer in net)
    return {"permuted_mnist_network": n, "trained_members": trained_members, "nctl_state": digest(nctl_state(model)),
            "nctl_rows": digest(nctl_rows(model)), "nctl_predictions": digest(p), "pool_events": events.tolist()}


def split_mnist_network(n: int) -> dict:
    """Digests of the Split MNIST network after ``n`` rows of a rule that flips every 128 rows."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((n, 784)).astype(np.float32)
    rule = X[:, 0] + 0.5 * X[:, 1]
    y = (np.where((np.arange(n) // 128) % 2 == 1, -rule, rule) > 0).astype(np.int64)
    model = nctl.NCTL(layer_sizes=(50, 25, 1), context_bits=4, pool=Pool(size=15, min_segment=32), depth=16)
    p = model.learn_many(X, y)
    events = sum(np.asarray(layer).sum(axis=0) for net in model.pool_events() for layer in net)
    return {"split_mnist_network": n, "nctl_state": digest(nctl_state(model)), "nctl_rows": digest(nctl_rows(model)),
            "nctl_predictions": digest(p),
            "pool_events": events.tolist()}


if __name__ == "__main__":
    main()
