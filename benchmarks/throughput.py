"""Training throughput of GLN and NCTL against the memory-bandwidth floor, as JSON.

``--network split-mnist`` (the default): the paper's Split MNIST network, 784 inputs, 50-25-1 neurons,
C = 16 contexts, pool k = 15, tree depth D = 16, L_min 32, random data. ``--network permuted-mnist``:
the Permuted MNIST experiment's learner, ten one-vs-all 10-5-1 networks on 784 inputs, C = 2^8, k = 15,
D = 16, spacing eviction, L_min 256 (``nctl.experiments.configs``), random data.

The cost of an NCTL step depends on ``t`` through the number of live tree slots
(``1 + popcount(t - 1)``), so NCTL is timed on windows spread evenly over a 60,000-step stream (one
task): the schedule is advanced to each window's start (bookkeeping only), the pool is marked full
(every mixture has k + 1 members and every closing segment runs the full pool tests), and the window's
steps are learned for real, pool updates included. The windows are learned twice, by two learners of
the same configuration, and only the second pass is timed: the first compiles every program the
stream needs, including those the engine compiles ahead in a background thread (a doubled record
arena, once half of it is held), which would otherwise take a core during the timed windows. The
physical floor of a step is reading and writing each live weight row once at the machine's copy
bandwidth, measured just before each timed window (a shared machine's bandwidth drifts by a quarter
within minutes; the ratio takes each window's steps against the bandwidth of their moment):
``live slots x trained members x networks x sum_i N_i K_i x 4 B x 2``. A step also reads, once each, every
neuron's gating hyperplanes and, in bounded mode, every pool entry at the neuron's context (which the
members without a lane predict with): ``read_floor_ms`` counts those bytes too, the least any
implementation of the step must move.

``--fresh-steps N`` also reports what a user's stream sees (``fresh``): a fresh learner of the same
configuration on real standardised MNIST digits (``--data-dir`` or ``$NCTL_DATA``), its first ``N``
steps in blocks of 256, first compilation and arena enlargements included, against the same floor
(the trained members' rows, B of them in bounded mode, at the live slots of those steps).

With ``--trained-members B`` NCTL runs in bounded mode (only the ``B`` most probable members of each
node learn; the floor then counts ``B`` trained rows per live slot and neuron). ``--min-segment``
overrides ``L_min``, which is also the spacing of the pool boundaries.

    python benchmarks/throughput.py [--network split-mnist|permuted-mnist] [--windows 8] [--window-steps 256]
                                    [--trained-members B] [--min-segment P] [--fresh-steps 8192]
"""

import argparse
import json
import resource
import time
from functools import lru_cache, partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

import nctl
from nctl.core import engine
from nctl.experiments.run import cpu_name
from nctl.pool import Pool


class Network(NamedTuple):
    """A benchmarked learner: its shape, pool settings and the stream its windows are spread over."""

    features: int
    layers: tuple
    context_bits: int
    classes: int  # 2: one binary network; K > 2: K one-vs-all networks
    pool: int
    depth: int
    stream: int
    min_segment: int
    eviction: str

    @property
    def nets(self) -> int:
        return self.classes if self.classes > 2 else 1

    def learner(self, trained_members: int | None = None, min_segment: int | None = None, **kwargs) -> "nctl.NCTL":
        pool = Pool(size=self.pool, trained_members=trained_members, eviction=self.eviction,
                    min_segment=min_segment or self.min_segment)
        return nctl.NCTL(layer_sizes=self.layers, context_bits=self.context_bits, pool=pool, n_classes=self.classes,
                         **kwargs)


NETWORKS = {
    "split-mnist": Network(784, (50, 25, 1), 4, 2, 15, 16, 60_000, 32, "fifo"),
    "permuted-mnist": Network(784, (10, 5, 1), 8, 10, 15, 16, 60_000, 256, "spacing"),
}
SPLIT_MNIST = NETWORKS["split-mnist"]


@lru_cache(maxsize=1)
def _copy(megabytes: int) -> tuple:
    """A copy of ``megabytes`` in the memory the engine's state lives in (the host's, or an
    accelerator's), as a function, and the bytes it moves (read + write). The buffers are allocated
    once: a probe that allocated and freed them before every window made the window's own first
    allocations fault their pages in again."""
    if jax.default_backend() == "cpu":
        a = np.ones(megabytes * 2**20 // 4, np.float32)
        b = np.empty_like(a)
        copy = partial(np.copyto, b, a)
    else:
        a, copied = jnp.ones(megabytes * 2**20 // 4, jnp.float32), jax.jit(jnp.copy)

        def copy():
            copied(a).block_until_ready()
    copy()
    return copy, 2 * a.nbytes


def copy_bandwidth(megabytes: int = 256, repeats: int = 5) -> float:
    """Bytes moved per second by a large memory copy (``_copy``): the fastest of ``repeats`` copies."""
    copy, moved = _copy(megabytes)
    fastest = np.inf
    for _ in range(repeats):
        start = time.perf_counter()
        copy()
        fastest = min(fastest, time.perf_counter() - start)
    return moved / fastest


def gln_throughput(net: Network, steps: int, rng) -> float:
    model = nctl.GLN(layer_sizes=net.layers, context_bits=net.context_bits, n_classes=net.classes)
    X = rng.standard_normal((steps, net.features)).astype(np.float32)
    y = rng.integers(0, net.classes, steps)
    model.learn_many(X[:64], y[:64])  # compile
    start = time.perf_counter()
    model.learn_many(X, y)
    return steps / (time.perf_counter() - start)


def jump_to(model: "nctl.NCTL", t: int, engine=engine, pool: int = SPLIT_MNIST.pool) -> None:
    """Move the learner to step ``t`` by the engine's own boundaries (no learning, no pool updates), with
    every neuron's pool holding ``pool`` states, so that every mixture has k + 1 members. ``engine``: the
    learner's engine module (another checkout's, in ``interleaved.py``). The jump runs on JAX whichever
    engine runs the learner, which then adopts the state."""
    state, cfg = jax.device_put(model.state_), model.cfg_
    nets = state.nets
    in_pool = nets.pool.in_pool.at[:, :pool].set(True)
    roster = jnp.broadcast_to(jnp.arange(pool, dtype=jnp.int32)[None, :, None], nets.pool.roster.shape)
    state = state._replace(nets=nets.with_pool(in_pool=in_pool, roster=roster))
    model.state_ = None  # the state's buffers are donated to the jump: one copy of the arenas at a time
    advance = jax.jit(lambda s, n: jax.lax.fori_loop(0, n, lambda _, s: engine.step.advance(s, cfg, False), s),
                      donate_argnums=0)
    model.adopt(jax.block_until_ready(advance(state, t - int(state.schedule.t) + 1)), handed_over=True)  # untimed
    model.t_ = t


def member_weights(net: Network) -> int:
    """Weights of one member of one network: sum_i N_i K_i."""
    fan_ins = [net.features + 1] + [n + 1 for n in net.layers[:-1]]
    return sum(n * k for n, k in zip(net.layers, fan_ins))


def row_bytes_per_step(net: Network, live_slots: float, trained: int | None = None) -> float:
    """Weight bytes read and written per step: live slots x trained members x networks x sum_i N_i K_i
    x 4 B x 2."""
    trained = net.pool + 1 if trained is None else trained
    return live_slots * trained * net.nets * member_weights(net) * 4 * 2


def other_bytes_per_step(net: Network, entries: int, trained: int | None = None) -> float:
    """Bytes a step reads besides the trained rows, once each: every neuron's gating hyperplanes
    (``networks x sum_i N_i x s x d x 4 B``), and in bounded mode every pool entry of every neuron at
    its context (``networks x entries x sum_i N_i K_i x 4 B``), which the members without a lane predict
    with."""
    gates = net.nets * sum(net.layers) * net.context_bits * (net.features + 1) * 4
    pool = 0 if trained is None else net.nets * entries * member_weights(net) * 4
    return gates + pool


def live_slots(first: int, steps: int) -> list:
    """Live tree slots at steps ``first + 1 .. first + steps``: ``1 + popcount(t - 1)``."""
    return [1 + bin(t - 1).count("1") for t in range(first + 1, first + steps + 1)]


def nctl_window(window_steps: int, rng, trained_members: int | None = None, min_segment: int | None = None,
                net: Network = SPLIT_MNIST):
    """The benchmark's learner (bounded with ``trained_members``) and one window of random rows: (model, X, y)."""
    model = net.learner(trained_members, min_segment, depth=net.depth)
    X = rng.standard_normal((window_steps, net.features)).astype(np.float32)
    return model, X, rng.integers(0, net.classes, window_steps)


def window_start(w: int, windows: int, stream: int = SPLIT_MNIST.stream) -> int:
    """Step at which window ``w`` of ``windows`` starts: spread evenly over the stream, 256-aligned."""
    return 256 * (w * stream // windows // 256) + 256


def nctl_throughput(net: Network, windows: int, window_steps: int, rng, trained_members: int | None = None,
                    min_segment: int | None = None) -> dict:
    model, X, y = nctl_window(window_steps, rng, trained_members, min_segment, net)
    start = time.perf_counter()
    model.learn_many(X[:64], y[:64])
    compile_seconds = time.perf_counter() - start
    learn_windows(model, X, y, windows, net)  # untimed: compiles what the stream compiles, ahead or not
    del model
    engine.finish_compiling()
    timed = nctl_window(window_steps, rng, trained_members, min_segment, net)[0]
    timed.learn_many(X[:64], y[:64])
    bandwidths = []
    seconds = learn_windows(timed, X, y, windows, net, lambda: bandwidths.append(copy_bandwidth(repeats=3)))
    slots = [live_slots(window_start(w, windows, net.stream), window_steps) for w in range(windows)]
    touched = [window_steps * row_bytes_per_step(net, np.mean(s), trained_members) for s in slots]
    other = window_steps * other_bytes_per_step(net, timed.cfg_.entries, trained_members)
    steps = windows * window_steps
    return {"examples_per_s": steps / seconds, "step_ms": 1e3 * seconds / steps, "mean_live_slots": float(np.mean(slots)),
            "compile_s": compile_seconds, "touched_per_step": sum(touched) / steps, "other_per_step": other / window_steps,
            "floor_ms": 1e3 * sum(b / bw for b, bw in zip(touched, bandwidths)) / steps,
            "read_floor_ms": 1e3 * sum((b + other) / bw for b, bw in zip(touched, bandwidths)) / steps,
            "bandwidths": bandwidths}


def learn_windows(model: "nctl.NCTL", X, y, windows: int, net: Network = SPLIT_MNIST, before=None) -> float:
    """Learn ``X, y`` at each window's start in turn, calling ``before()`` first; the seconds spent
    learning (jumps and ``before`` excluded)."""
    seconds = 0.0
    for w in range(windows):
        jump_to(model, window_start(w, windows, net.stream), pool=net.pool)
        if before is not None:
            before()
        start = time.perf_counter()
        model.learn_many(X, y)
        seconds += time.perf_counter() - start
    return seconds


def fresh_stream(net: Network, steps: int, data_dir: str | None, trained_members: int | None = None,
                 min_segment: int | None = None, block: int = 256) -> dict:
    """A fresh learner's first ``steps`` steps on real standardised MNIST digits (all ten digits for ten
    classes, the digits 0 and 1 for two), compiles and enlargements included, against the floor."""
    from nctl.data import load_mnist

    images, labels = load_mnist("train", data_dir)
    X, Y = images.reshape(len(images), -1).astype(np.float32) / 255.0, labels.astype(np.int64)
    if net.classes == 2:
        keep = Y < 2
        X, Y = X[keep], Y[keep]
    X = (X - X.mean(axis=0)) / (X.std(axis=0) + 1e-6)
    X, Y = X[:steps], Y[:steps]
    model = net.learner(trained_members, min_segment)
    bandwidth = copy_bandwidth(repeats=3)
    block_seconds = []
    start = time.perf_counter()
    for first in range(0, len(X), block):
        began = time.perf_counter()
        model.learn_many(X[first:first + block], Y[first:first + block])
        block_seconds.append(time.perf_counter() - began)
    seconds = time.perf_counter() - start
    touched = row_bytes_per_step(net, np.mean(live_slots(0, len(X))), trained_members)
    floor_ms = 1e3 * touched / bandwidth
    return {"steps": len(X), "examples_per_s": round(len(X) / seconds, 1), "step_ms": round(1e3 * seconds / len(X), 3),
            "first_block_s": round(block_seconds[0], 2), "slowest_later_block_s": round(max(block_seconds[1:], default=0), 2),
            "bandwidth_floor_ms": round(floor_ms, 3), "step_time_over_floor": round(1e3 * seconds / len(X) / floor_ms, 2),
            "after_first_block_over_floor": round(1e3 * sum(block_seconds[1:]) / (len(X) - block) / floor_ms, 2)
            if len(X) > block else None}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--network", choices=sorted(NETWORKS), default="split-mnist")
    parser.add_argument("--windows", type=int, default=8)
    parser.add_argument("--window-steps", type=int, default=256)
    parser.add_argument("--gln-steps", type=int, default=20_000)
    parser.add_argument("--trained-members", type=int, default=None, help="bounded mode's B (default: exact)")
    parser.add_argument("--min-segment", type=int, default=None, help="L_min, the pool boundaries' spacing "
                        "(default: the network's)")
    parser.add_argument("--fresh-steps", type=int, default=0, help="also time a fresh learner's first steps on "
                        "real digits (needs MNIST)")
    parser.add_argument("--data-dir", default=None, help="MNIST's folder for --fresh-steps (default: $NCTL_DATA)")
    args = parser.parse_args()
    net = NETWORKS[args.network]
    rng = np.random.default_rng(0)
    gln = gln_throughput(net, args.gln_steps, rng)
    result = nctl_throughput(net, args.windows, args.window_steps, rng, args.trained_members, args.min_segment)
    fresh = fresh_stream(net, args.fresh_steps, args.data_dir, args.trained_members, args.min_segment) \
        if args.fresh_steps else None
    touched, floor_ms, bandwidths = result["touched_per_step"], result["floor_ms"], result["bandwidths"]
    print(json.dumps({
        "config": {"network": args.network, "features": net.features, "layers": net.layers, "classes": net.classes,
                   "contexts": 2**net.context_bits, "pool": net.pool, "depth": net.depth, "stream": net.stream,
                   "trained_members": args.trained_members, "min_segment": args.min_segment or net.min_segment,
                   "eviction": net.eviction},
        "jax": jax.__version__, "device": str(jax.devices()[0]), "cpu": cpu_name(),
        "gln_examples_per_s": round(gln, 1),
        "nctl_examples_per_s": round(result["examples_per_s"], 1),
        "nctl_step_ms": round(result["step_ms"], 3),
        "nctl_compile_s": round(result["compile_s"], 1),
        "mean_live_slots": round(result["mean_live_slots"], 2),
        "weight_bytes_touched_per_step": int(touched),
        "copy_bandwidth_gb_per_s": round(len(bandwidths) / sum(1 / b for b in bandwidths) / 1e9, 1),
        "copy_bandwidth_range_gb_per_s": [round(min(bandwidths) / 1e9, 1), round(max(bandwidths) / 1e9, 1)],
        "bandwidth_floor_ms": round(floor_ms, 3),
        "step_time_over_floor": round(result["step_ms"] / floor_ms, 2),
        "other_bytes_read_per_step": int(result["other_per_step"]),
        "read_floor_ms": round(result["read_floor_ms"], 3),
        "step_time_over_read_floor": round(result["step_ms"] / result["read_floor_ms"], 2),
        "fresh": fresh,
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }, indent=2))


if __name__ == "__main__":
    main()
