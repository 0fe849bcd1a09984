"""Where an NCTL step's time goes, in a throughput benchmark network (``--network``, Split MNIST's by default), as JSON.

Times the two compiled programs of ``nctl.core.engine`` separately (``run_steps``: the steps;
``boundary``: the pool updates every ``P`` steps) over windows of the throughput benchmark, then takes
a JAX profile of one window and lists the XLA operations that took the most time (exclusive), per step,
with the count of operations run per step and their summed time, per program and per engine region.
``--tabular`` profiles the river adapter's defaults instead (``nctl.NCTL.tabular()``, 8 features, after
1,024 rows), where a step is small and the count of operations decides its time; it also times river's
pattern, ``predict_proba_one`` then ``learn_one`` per row (one compiled call per row, docs/algorithm.md
§6.9), and a call that learns no row (the fixed cost of a call), and counts the operations of one row's
frozen prediction. The host work per row is that pattern's time outside the step and boundary programs,
for the learner and for river's ``StandardScaler() | NCTLClassifier()`` on feature dicts (the river
adapter, scaler and pipeline included).

    python tools/step_profile.py [--windows 3] [--window-steps 256] [--top 12] [--tabular]
"""

import argparse
import collections
import gzip
import json
import os
import re
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace

import jax
import numpy as np
from river import preprocessing

import nctl
from nctl import compilation
from nctl.core import engine
from nctl.experiments.run import cpu_name
from nctl.river import NCTLClassifier
from xla_call_costs import entry_operations

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))  # throughput.py, the windows timed
from throughput import NETWORKS, jump_to, nctl_window, window_start  # noqa: E402


def timed(name: str, fn, totals: dict):
    def run(*args, **kwargs):
        start = time.perf_counter()
        out = jax.block_until_ready(fn(*args, **kwargs))
        totals[name] += time.perf_counter() - start
        return out

    return run


@contextmanager
def timed_engine(totals: dict):
    """Inside the block, the engine's two compiled programs add their time (each waited for) to
    ``totals["run_steps"]`` and ``totals["boundary"]``."""
    run_steps, boundary_program = engine.driver.run_steps, engine.driver.boundary_program
    engine.driver.run_steps = timed("run_steps", run_steps, totals)
    # learn calls the boundary compiled ahead, as boundary_program(state, cfg).program()
    engine.driver.boundary_program = lambda state, cfg: SimpleNamespace(
        program=lambda: timed("boundary", boundary_program(state, cfg).program(), totals))
    try:
        yield
    finally:
        engine.driver.run_steps, engine.driver.boundary_program = run_steps, boundary_program


def host_ms_per_row(loop, rows: int) -> float:
    """Milliseconds per row that ``loop()`` spends outside the engine's step and boundary programs: the
    Python of the learner (input checks, rows kept back, outputs) and of the engine's entry point, and
    the one-row prediction made after each pool boundary (once per ``P`` rows)."""
    totals = {"run_steps": 0.0, "boundary": 0.0}
    with timed_engine(totals):
        start = time.perf_counter()
        loop()
        elapsed = time.perf_counter() - start
    return 1e3 * (elapsed - sum(totals.values())) / rows


def operation_times(trace_dir: Path) -> tuple:
    """Exclusive time (us; a loop's span minus the operations inside it) and call count of every XLA
    operation in the profile, as two Counters by (program, operation name)."""
    trace = next(trace_dir.rglob("perfetto_trace.json.gz"))
    events = json.load(gzip.open(trace))
    events = events["traceEvents"] if isinstance(events, dict) else events
    by_thread = collections.defaultdict(list)
    for event in events:
        if event.get("ph") == "X" and "dur" in event:
            by_thread[event.get("pid"), event.get("tid")].append(event)
    total, calls = collections.Counter(), collections.Counter()  # by (program, operation)
    for spans in by_thread.values():
        spans.sort(key=lambda e: (e["ts"], -e["dur"]))
        open_spans = []
        for event in spans:
            key = event.get("args", {}).get("hlo_module"), event["name"]
            while open_spans and open_spans[-1][1]["ts"] + open_spans[-1][1]["dur"] <= event["ts"]:
                open_spans.pop()
            if open_spans:  # nested: its time is not its parent's own
                total[open_spans[-1][0]] -= event["dur"]
            total[key] += event["dur"]
            calls[key] += 1
            open_spans.append((key, event))
    # XLA operations only (lower-case HLO names such as "dot.33"), not Python frames or runtime spans
    keys = [key for key in total if re.fullmatch(r"[a-z][\w.-]*", key[1])]
    return collections.Counter({k: total[k] for k in keys}), collections.Counter({k: calls[k] for k in keys})


# the engine's named scopes (jax.named_scope in nctl.core), innermost first wins
REGIONS = ("posterior", "assign_lanes", "allocate", "fill_blocks", "train_rows", "source_predictions", "layer_pass",
           "record", "restart", "free_blocks", "advance", "pool_update", "reserve_records")


def regions_of(programs: dict) -> dict:
    """``(program, operation) -> region``: the innermost engine scope in each operation's name stack, from
    the compiled programs' HLO (``programs``: profile module name -> compiled program). XLA drops the
    name stack of some operations it rewrites (the dot products of a slot's rows, a loop's counter):
    those take the region that most named operations of their computation (a loop body, a fusion) have.
    "other" is the rest: the glue between scopes and the copies XLA adds."""
    regions = {}
    for module, compiled in programs.items():
        computation, members = None, collections.defaultdict(list)  # computation -> [(operation, region or None)]
        for line in compiled.as_text().splitlines():
            header = re.match(r"(?:ENTRY )?%?([\w.-]+) .*\{$", line)
            if header:
                computation = header.group(1)
                continue
            found = re.match(r"\s*(?:ROOT )?%?([\w.-]+) = ", line)
            if found and computation is not None:
                named = re.search(r'op_name="([^"]+)"', line)
                region = None  # XLA dropped its name stack
                if named:
                    scopes = [part for part in named.group(1).split("/") if part in REGIONS]
                    region = scopes[-1] if scopes else "other"
                members[computation].append((found.group(1), region))
        for operations in members.values():
            known = collections.Counter(region for _, region in operations if region not in (None, "other"))
            fallback = known.most_common(1)[0][0] if known else "other"
            for name, region in operations:
                regions[module, name] = fallback if region is None else region
    return regions


def profile_summary(trace_dir: Path, steps: int, top: int, programs: dict) -> dict:
    """The ``top`` XLA operations by exclusive time, in ms per step with their call counts; the
    operations run per step with their summed time; and both per engine region (``regions_of``)."""
    total, calls = operation_times(trace_dir)
    regions = regions_of(programs)
    by_region = collections.defaultdict(lambda: [0.0, 0.0])
    for key, us in total.items():
        region = by_region[regions.get(key, "other")]
        region[0] += calls[key] / steps
        region[1] += us / 1e3 / steps
    by_program = collections.defaultdict(lambda: [0.0, 0.0])
    for key, us in total.items():  # operations outside a named program: transfers between the calls
        by_program[key[0] or "outside programs"][0] += calls[key] / steps
        by_program[key[0] or "outside programs"][1] += us / 1e3 / steps
    return {"operations_per_step": round(sum(calls.values()) / steps, 1),
            "operations_ms_per_step": round(sum(total.values()) / 1e3 / steps, 3),
            "by_program": {name: {"operations_per_step": round(n, 1), "ms_per_step": round(ms, 3)}
                           for name, (n, ms) in sorted(by_program.items(), key=lambda item: -item[1][1])},
            "by_region": {name: {"operations_per_step": round(n, 1), "ms_per_step": round(ms, 3)}
                          for name, (n, ms) in sorted(by_region.items(), key=lambda item: -item[1][1])},
            "top_operations": [{"program": key[0], "op": key[1], "region": regions.get(key, "other"),
                                "ms_per_step": round(us / 1e3 / steps, 3), "calls": calls[key]}
                               for key, us in total.most_common(top)]}


def main() -> None:
    # the stored programs that the default cache turns on run as calls of their exports, every one named
    # "jit_call" in a profile; without them each program keeps its own name
    os.environ.setdefault(compilation.CACHE_ENV, "off")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--windows", type=int, default=3)
    parser.add_argument("--window-steps", type=int, default=256)
    parser.add_argument("--top", type=int, default=12)
    parser.add_argument("--tabular", action="store_true", help="profile the river adapter's defaults instead")
    parser.add_argument("--network", choices=sorted(NETWORKS), default="split-mnist", help="throughput.py's network")
    parser.add_argument("--trained-members", type=int, default=None, help="bounded mode's B (default: exact)")
    args = parser.parse_args()
    if args.tabular:
        return tabular_profile(args)
    net = NETWORKS[args.network]
    model, X, y = nctl_window(args.window_steps, np.random.default_rng(0), args.trained_members, net=net)
    model.learn_many(X[:64], y[:64])  # compile

    totals = {"run_steps": 0.0, "boundary": 0.0}
    with timed_engine(totals):
        for w in range(args.windows):
            jump_to(model, window_start(w, args.windows, net.stream), pool=net.pool)
            model.learn_many(X, y)
    steps = args.windows * args.window_steps

    profile = profiled(model, X, y, args.top)
    print(json.dumps({"cpu": cpu_name(), "network": args.network, "trained_members": args.trained_members, "steps": steps,
                      **{f"{name}_ms_per_step": round(1e3 * s / steps, 3) for name, s in totals.items()},
                      "profiled_window_start": model.t_ - len(X) + 1, **profile}, indent=2))


def profiled(model, X, y, top: int) -> dict:
    """``profile_summary`` of ``model`` learning the rows of ``X``."""
    Z = np.zeros((engine.LEARN_BLOCK, X.shape[1]), np.float32)
    labels = np.zeros(engine.LEARN_BLOCK, np.int32)
    programs = {"jit_run_steps": engine.compiled.run_steps.lower(model.state_, Z, labels, 1, model.cfg_, None, Z[0], False).compile(),
                "jit_pool_boundary": engine.ahead.boundary_program(model.state_, model.cfg_).program()}  # the program run
    with tempfile.TemporaryDirectory() as folder:
        jax.profiler.start_trace(folder, create_perfetto_trace=True)
        model.learn_many(X, y)
        jax.profiler.stop_trace()
        return profile_summary(Path(folder), len(X), top, programs)


def tabular_profile(args) -> None:
    rng = np.random.default_rng(0)
    X = rng.standard_normal((1024 + 4 * args.window_steps, 8)).astype(np.float32)
    y = (X[:, 0] > 0).astype(int)
    model = nctl.NCTL.tabular()
    model.learn_many(X[:1024], y[:1024])
    window = slice(1024, 1024 + args.window_steps)
    start = time.perf_counter()
    model.learn_many(X[window], y[window])
    learn_many_ms = 1e3 * (time.perf_counter() - start) / args.window_steps
    pairs = [slice(window.stop + i * args.window_steps, window.stop + (i + 1) * args.window_steps) for i in range(3)]

    def river_pattern(learner, xs, labels):
        for x, label in zip(xs, labels):
            learner.predict_proba_one(x)
            learner.learn_one(x, label)

    river_pattern(model, X[pairs[0]][:8], y[pairs[0]][:8])  # compiles the pattern's program: not timed
    start = time.perf_counter()
    river_pattern(model, X[pairs[0]], y[pairs[0]])
    river_pair_ms = 1e3 * (time.perf_counter() - start) / args.window_steps
    host_ms = host_ms_per_row(lambda: river_pattern(model, X[pairs[1]], y[pairs[1]]), args.window_steps)
    # river's own pattern: feature dicts through StandardScaler() | NCTLClassifier() (the river adapter)
    pipeline = preprocessing.StandardScaler() | NCTLClassifier()
    dicts, flags = [dict(zip("abcdefgh", map(float, x))) for x in X], [bool(label) for label in y]
    river_pattern(pipeline, dicts[:1024], flags[:1024])
    pipeline_host_ms = host_ms_per_row(lambda: river_pattern(pipeline, dicts[pairs[2]], flags[pairs[2]]),
                                       args.window_steps)
    Z = np.zeros((engine.LEARN_BLOCK, 8), np.float32)
    labels = np.zeros(engine.LEARN_BLOCK, np.int32)
    state, calls = model.state_, 200
    start = time.perf_counter()
    for _ in range(calls):  # a call that learns no row: the fixed cost of a call
        state = engine.compiled.run_steps(state, Z, labels, 0, model.cfg_, None, Z[0], False)[0]
    jax.block_until_ready(state)
    empty_call_ms = 1e3 * (time.perf_counter() - start) / calls
    model.state_ = state
    # one row's prediction: XLA takes it out of the program's loop over rows, into the entry computation
    prediction = engine.compiled.predict_rows.lower(model.state_, X[:1], 1, model.cfg_).compile()
    profile = profiled(model, X[window], y[window], args.top)
    print(json.dumps({"cpu": cpu_name(), "config": "NCTL.tabular(), 8 features", "window_steps": args.window_steps,
                      "learn_many_ms_per_row": round(learn_many_ms, 3), "predict_then_learn_one_ms_per_row": round(river_pair_ms, 3),
                      "predict_then_learn_one_host_ms_per_row": round(host_ms, 3),
                      "river_pipeline_host_ms_per_row": round(pipeline_host_ms, 3),
                      "empty_call_ms": round(empty_call_ms, 3), "one_row_prediction_operations": entry_operations(prediction),
                      **profile}, indent=2))


if __name__ == "__main__":
    main()
