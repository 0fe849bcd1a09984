"""Training throughput of GLN and NCTL in the paper's Split MNIST configuration, as JSON.

784 inputs, 50-25-1 neurons, C = 16 contexts, pool k = 15, tree depth D = 16, random data.

The cost of an NCTL step depends on ``t`` through the number of live tree slots
(``1 + popcount(t - 1)``), so NCTL is timed on windows spread evenly over a 60,000-step stream: the
schedule is advanced to each window's start (bookkeeping only), the pool is marked full (every
mixture has k + 1 members and every closing segment runs the full pool tests), and the window's
steps are learned for real, pool updates included. The windows are learned twice, by two learners of
the same configuration, and only the second pass is timed: the first compiles every program the
stream needs, including those the engine compiles ahead in a background thread (a doubled record
arena, once half of it is held), which would otherwise take a core during the timed windows. The
physical floor of a step is reading and writing each live weight row once at the machine's copy
bandwidth, measured just before each timed window (a shared machine's bandwidth drifts by a quarter
within minutes; the ratio takes each window's steps against the bandwidth of their moment).

With ``--trained-members B`` NCTL runs in bounded mode (only the ``B`` most probable members of each
node learn; the floor then counts ``B`` trained rows per live slot and neuron). ``--min-segment``
sets ``L_min``, which is also the spacing of the pool boundaries: 32 (the paper's, the default here)
or 256 (the Split MNIST experiment's, ``nctl.experiments.configs``).

    python benchmarks/throughput.py [--windows 8] [--window-steps 256] [--trained-members B] [--min-segment 32]
"""

import argparse
import json
import resource
import time
from functools import lru_cache, partial

import jax
import jax.numpy as jnp
import numpy as np

import nctl
from nctl.core import engine
from nctl.experiments.run import cpu_name

N_FEATURES, LAYERS, CONTEXT_BITS, POOL, DEPTH, STREAM = 784, (50, 25, 1), 4, 15, 16, 60_000


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


def gln_throughput(steps: int, rng) -> float:
    model = nctl.GLN(layer_sizes=LAYERS, context_bits=CONTEXT_BITS)
    X = rng.standard_normal((steps, N_FEATURES)).astype(np.float32)
    y = rng.integers(0, 2, steps)
    model.learn_many(X[:64], y[:64])  # compile
    start = time.perf_counter()
    model.learn_many(X, y)
    return steps / (time.perf_counter() - start)


def jump_to(model: "nctl.NCTL", t: int, engine=engine) -> None:
    """Move the learner to step ``t`` by the engine's own boundaries (no learning, no pool updates), with
    every neuron's pool holding ``POOL`` states, so that every mixture has k + 1 members. ``engine``: the
    learner's engine module (another checkout's, in ``interleaved.py``)."""
    state, cfg = model.state_, model.cfg_
    nets = state.nets
    in_pool = nets.in_pool.at[:, :POOL].set(True)
    roster = jnp.broadcast_to(jnp.arange(POOL, dtype=jnp.int32)[None, :, None], nets.roster.shape)
    state = state._replace(nets=nets._replace(in_pool=in_pool, roster=roster))
    advance = jax.jit(lambda s, n: jax.lax.fori_loop(0, n, lambda _, s: engine.advance(s, cfg, False), s))
    model.state_ = jax.block_until_ready(advance(state, t - int(state.schedule.t) + 1))  # not in the timed window
    model.t_ = t


def row_bytes_per_step(live_slots: float, trained: int = POOL + 1) -> float:
    """Weight bytes read and written per step: live slots x trained members x sum_i N_i K_i x 4 B x 2."""
    fan_ins = [N_FEATURES + 1] + [n + 1 for n in LAYERS[:-1]]
    return live_slots * trained * sum(n * k for n, k in zip(LAYERS, fan_ins)) * 4 * 2


def nctl_window(window_steps: int, rng, trained_members: int | None = None, min_segment: int = 32):
    """The benchmark's learner (bounded with ``trained_members``) and one window of random rows: (model, X, y)."""
    model = nctl.NCTL(layer_sizes=LAYERS, context_bits=CONTEXT_BITS, pool_size=POOL, depth=DEPTH,
                      trained_members=trained_members, min_segment=min_segment)
    X = rng.standard_normal((window_steps, N_FEATURES)).astype(np.float32)
    return model, X, rng.integers(0, 2, window_steps)


def window_start(w: int, windows: int) -> int:
    """Step at which window ``w`` of ``windows`` starts: spread evenly over the stream, 256-aligned."""
    return 256 * (w * STREAM // windows // 256) + 256


def nctl_throughput(windows: int, window_steps: int, rng, trained_members: int | None = None,
                    min_segment: int = 32) -> dict:
    model, X, y = nctl_window(window_steps, rng, trained_members, min_segment)
    start = time.perf_counter()
    model.learn_many(X[:64], y[:64])
    compile_seconds = time.perf_counter() - start
    learn_windows(model, X, y, windows)  # untimed: compiles what the stream compiles, ahead or not
    del model
    engine.finish_compiling()
    timed = nctl_window(window_steps, rng, trained_members, min_segment)[0]
    timed.learn_many(X[:64], y[:64])
    bandwidths = []
    seconds = learn_windows(timed, X, y, windows, lambda: bandwidths.append(copy_bandwidth(repeats=3)))
    slots = [[1 + bin(t - 1).count("1") for t in range(window_start(w, windows) + 1, window_start(w, windows) + window_steps + 1)]
             for w in range(windows)]
    touched = [window_steps * row_bytes_per_step(np.mean(s), trained_members or POOL + 1) for s in slots]
    steps = windows * window_steps
    return {"examples_per_s": steps / seconds, "step_ms": 1e3 * seconds / steps, "mean_live_slots": float(np.mean(slots)),
            "compile_s": compile_seconds, "touched_per_step": sum(touched) / steps,
            "floor_ms": 1e3 * sum(b / bw for b, bw in zip(touched, bandwidths)) / steps, "bandwidths": bandwidths}


def learn_windows(model: "nctl.NCTL", X, y, windows: int, before=None) -> float:
    """Learn ``X, y`` at each window's start in turn, calling ``before()`` first; the seconds spent
    learning (jumps and ``before`` excluded)."""
    seconds = 0.0
    for w in range(windows):
        jump_to(model, window_start(w, windows))
        if before is not None:
            before()
        start = time.perf_counter()
        model.learn_many(X, y)
        seconds += time.perf_counter() - start
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--windows", type=int, default=8)
    parser.add_argument("--window-steps", type=int, default=256)
    parser.add_argument("--gln-steps", type=int, default=20_000)
    parser.add_argument("--trained-members", type=int, default=None, help="bounded mode's B (default: exact)")
    parser.add_argument("--min-segment", type=int, default=32, help="L_min, the pool boundaries' spacing (default 32)")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    gln = gln_throughput(args.gln_steps, rng)
    result = nctl_throughput(args.windows, args.window_steps, rng, args.trained_members, args.min_segment)
    touched, floor_ms, bandwidths = result["touched_per_step"], result["floor_ms"], result["bandwidths"]
    print(json.dumps({
        "config": {"features": N_FEATURES, "layers": LAYERS, "contexts": 2**CONTEXT_BITS, "pool": POOL, "depth": DEPTH,
                   "stream": STREAM, "trained_members": args.trained_members,
                   "min_segment": args.min_segment},
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
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }, indent=2))


if __name__ == "__main__":
    main()
