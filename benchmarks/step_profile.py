"""Where an NCTL step's time goes, in the throughput benchmark's Split MNIST configuration, as JSON.

Times the two compiled programs of ``nctl.core.engine`` separately (``run_steps``: the steps;
``boundary``: the pool updates every ``P`` steps) over windows of the throughput benchmark, then takes
a JAX profile of one window and lists the XLA operations that took the most time (exclusive), per step.

    python benchmarks/step_profile.py [--windows 3] [--window-steps 256] [--top 12]
"""

import argparse
import collections
import gzip
import json
import re
import tempfile
import time
from pathlib import Path

import jax
import numpy as np

from nctl.core import engine
from nctl.experiments.run import cpu_name
from throughput import jump_to, nctl_window, window_start


def timed(name: str, fn, totals: dict):
    def run(*args, **kwargs):
        start = time.perf_counter()
        out = jax.block_until_ready(fn(*args, **kwargs))
        totals[name] += time.perf_counter() - start
        return out

    return run


def top_operations(trace_dir: Path, steps: int, top: int) -> list:
    """The ``top`` XLA operations by exclusive time in the profile (a loop's span minus the operations
    inside it), in ms per step, with their call counts."""
    trace = next(trace_dir.rglob("perfetto_trace.json.gz"))
    events = json.load(gzip.open(trace))
    events = events["traceEvents"] if isinstance(events, dict) else events
    by_thread = collections.defaultdict(list)
    for event in events:
        if event.get("ph") == "X" and "dur" in event:
            by_thread[event.get("pid"), event.get("tid")].append(event)
    total, calls = collections.Counter(), collections.Counter()
    for spans in by_thread.values():
        spans.sort(key=lambda e: (e["ts"], -e["dur"]))
        open_spans = []
        for event in spans:
            while open_spans and open_spans[-1]["ts"] + open_spans[-1]["dur"] <= event["ts"]:
                open_spans.pop()
            if open_spans:  # nested: its time is not its parent's own
                total[open_spans[-1]["name"]] -= event["dur"]
            total[event["name"]] += event["dur"]
            calls[event["name"]] += 1
            open_spans.append(event)
    # XLA operations only (lower-case HLO names such as "dot.33"), not Python frames or runtime spans
    ops = [(name, us) for name, us in total.most_common() if re.fullmatch(r"[a-z][\w.-]*", name)]
    return [{"op": name, "ms_per_step": round(us / 1e3 / steps, 3), "calls": calls[name]} for name, us in ops[:top]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--windows", type=int, default=3)
    parser.add_argument("--window-steps", type=int, default=256)
    parser.add_argument("--top", type=int, default=12)
    args = parser.parse_args()
    model, X, y = nctl_window(args.window_steps, np.random.default_rng(0))
    model.learn_many(X[:64], y[:64])  # compile

    totals = {"run_steps": 0.0, "boundary": 0.0}
    programs = engine.run_steps, engine.boundary
    engine.run_steps, engine.boundary = (timed(name, fn, totals) for name, fn in zip(totals, programs))
    try:
        for w in range(args.windows):
            jump_to(model, window_start(w, args.windows))
            model.learn_many(X, y)
    finally:
        engine.run_steps, engine.boundary = programs
    steps = args.windows * args.window_steps

    with tempfile.TemporaryDirectory() as folder:
        jax.profiler.start_trace(folder, create_perfetto_trace=True)
        model.learn_many(X, y)
        jax.profiler.stop_trace()
        ops = top_operations(Path(folder), args.window_steps, args.top)
    print(json.dumps({"cpu": cpu_name(), "steps": steps,
                      **{f"{name}_ms_per_step": round(1e3 * s / steps, 3) for name, s in totals.items()},
                      "profiled_window_start": model.t_ - args.window_steps + 1, "top_operations": ops}, indent=2))


if __name__ == "__main__":
    main()
