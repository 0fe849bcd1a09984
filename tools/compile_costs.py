"""What a new NCTL configuration costs to compile, program by program, as JSON: the test suite's
time is mostly this (each test configuration compiles its own programs).

Creates a small learner of the kind the tests use (a 3-1 network, 3 features, ``k = 2``, ``P = 4``),
learns 40 rows, then predicts batches of 1, 3, 9, 40, 130 and 300 rows, and waits for the programs
compiled ahead (algorithm §6.8). JAX reports each tracing, lowering and XLA compilation with its
duration; they are summed per program, with the count of XLA compilations of each.

With ``--kernels``, XLA also writes each optimised program into a temporary folder, and the count of
the kernels it compiled for it (fusions and the gathers, scatters, sorts and dynamic-update-slices
left outside them: XLA:CPU compiles each one on its own, so a program's compile time follows this
count) is reported per program, and for the pool boundary and the step, the kernels that each
function of ``nctl.core`` contributed to (from the call stacks XLA keeps with each operation: a
kernel counts once for every function on its stack, so nested functions overlap). ``--layer-sizes``
sets the network (default ``3 1``).

    python tools/compile_costs.py [--kernels] [--layer-sizes 3 1]
"""

import argparse
import collections
import json
import os
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

if "--kernels" in sys.argv:  # before JAX starts its backend, which reads XLA_FLAGS once
    DUMP = tempfile.mkdtemp(prefix="nctl-xla-dump-")
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} --xla_dump_to={DUMP} --xla_dump_hlo_as_text".strip()

import jax  # noqa: E402
import numpy as np  # noqa: E402

import nctl  # noqa: E402
from nctl.core import engine  # noqa: E402
from nctl.experiments.run import cpu_name  # noqa: E402
from nctl.pool import Pool

EVENTS = {"jaxpr_trace_duration": "trace_s", "jaxpr_to_mlir_module_duration": "lower_s",
          "backend_compile_duration": "compile_s"}


def event_kind(event: str) -> str | None:
    """``trace_s``, ``lower_s`` or ``compile_s`` for JAX's duration event of that stage, else None."""
    return EVENTS.get(event.rsplit("/", 1)[-1])


PREDICTION_SIZES = (1, 3, 9, 40, 130, 300)
KERNEL = re.compile(r"= \S+ (fusion|gather|scatter|sort|dynamic-update-slice)\(")


def kernels(folder: Path) -> dict:
    """Kernels per program in XLA's dump: the largest count among a program's compilations."""
    counts = collections.Counter()
    for path in folder.glob("*.cpu_after_optimizations.txt"):
        counts[_program(path)] = max(counts[_program(path)], len(KERNEL.findall(path.read_text())))
    return dict(counts.most_common())


def _program(path: Path) -> str:
    return re.sub(r"^module_\d+\.jit_", "", path.name).removesuffix(".cpu_after_optimizations.txt")


def _table(lines: list, title: str) -> list:
    """The rows of one of the dump's tables (``FileNames``, ``StackFrames``, ...) after its title line."""
    start = lines.index(title) + 1
    end = next((i for i in range(start, len(lines)) if not re.match(r"^\s*\d+ ", lines[i])), len(lines))
    return [line.strip().split(" ", 1) for line in lines[start:end]]


def kernels_by_function(path: Path) -> dict:
    """``{"module.py:function": kernels}`` for the functions of ``nctl.core`` on the call stacks of one
    optimised program's kernels, most first (kernels without a stack are not counted). Stack frames
    name their parent by its index + 1."""
    lines = path.read_text().splitlines()
    files = {int(i): Path(name.strip('"')).name for i, name in _table(lines, "FileNames")}
    functions = {int(i): name.strip('"') for i, name in _table(lines, "FunctionNames")}
    where = {}
    for i, fields in _table(lines, "FileLocations"):
        file_id, function_id = (int(re.search(f"{key}=(\\d+)", fields).group(1))
                                for key in ("file_name_id", "function_name_id"))
        where[int(i)] = f"{files[file_id]}:{functions[function_id]}"
    frames = {}
    for i, fields in _table(lines, "StackFrames"):
        parent = re.search(r"parent_frame_id=(\d+)", fields)
        location = int(re.search(r"file_location_id=(\d+)", fields).group(1))
        frames[int(i)] = (location, int(parent.group(1)) - 1 if parent else 0)
    ours = {f.name for f in Path(engine.__file__).parents[1].rglob("*.py")}  # nctl.core
    counts, stacks = collections.Counter(), 0
    for line in lines:
        frame = re.search(r"stack_frame_id=(\d+)", line)
        if not (KERNEL.search(line) and frame):
            continue
        on_stack, frame_id = set(), int(frame.group(1))
        while frame_id in frames:
            location, frame_id = frames[frame_id]
            on_stack.add(where[location])
        counts.update(name for name in on_stack if name.split(":")[0] in ours)
        stacks += 1
    # functions on every stack are the program's entry: left out
    return {name: n for name, n in counts.most_common() if n < stacks}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernels", action="store_true")
    parser.add_argument("--layer-sizes", type=int, nargs="+", default=[3, 1])
    args = parser.parse_args()
    costs = collections.defaultdict(lambda: collections.Counter())

    def listener(event, duration, fun_name=None, **_):
        kind = event_kind(event)
        if kind is not None:
            name = str(fun_name).removeprefix("jit(").removesuffix(")")
            costs[name][kind] += duration
            if kind == "compile_s":
                costs[name]["compilations"] += 1

    jax.monitoring.register_event_duration_secs_listener(listener)
    X = np.random.default_rng(0).normal(size=(300, 3)).astype(np.float32)
    start = time.perf_counter()
    model = nctl.NCTL(layer_sizes=tuple(args.layer_sizes), context_bits=1, pool=Pool(size=2, min_segment=4), depth=9,
                      seed=3)
    model.learn_many(X[:40], (X[:40, 0] > 0).astype(int))
    learned = time.perf_counter()
    for size in PREDICTION_SIZES:
        model.predict_proba_many(X[:size])
    engine.finish_compiling()
    end = time.perf_counter()
    seconds = {name: sum(v for k, v in c.items() if k != "compilations") for name, c in costs.items()}
    programs = {name: {k: round(v, 3) for k, v in sorted(costs[name].items())}
                for name in sorted(seconds, key=seconds.get, reverse=True) if seconds[name] >= 0.05}
    out = {"cpu": cpu_name(), "jax": jax.__version__, "layer_sizes": args.layer_sizes,
           "prediction_sizes": PREDICTION_SIZES, "first_learn_s": round(learned - start, 2),
           "predictions_s": round(end - learned, 2), "programs": programs}
    if args.kernels:
        out["kernels"] = kernels(Path(DUMP))
        # per program its largest dump (the dict keeps the last of each name, in order of size)
        dumps = {_program(path): path for path in sorted(Path(DUMP).glob("*.cpu_after_optimizations.txt"),
                                                         key=lambda path: path.stat().st_size)}
        out["kernels_by_function"] = {name: kernels_by_function(dumps[name]) for name in ("boundary", "run_steps")}
        shutil.rmtree(DUMP)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
