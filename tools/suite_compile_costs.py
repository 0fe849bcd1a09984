"""Where the test suite's time goes: a pytest plugin that logs, per test, its wall time, the seconds
JAX spent tracing, lowering and compiling during it and the NCTL engine configurations it was the
first of its process to run (each compiles the engine's programs); and, run as a script, their sums
as JSON, with the configurations counted per file and the JAX seconds summed per program (``boundary``,
``run_steps``, ...: the function JAX names with each event).

    NCTL_COMPILE_LOG=DIR PYTHONPATH=tools python -m pytest -p suite_compile_costs
    python tools/suite_compile_costs.py DIR [--top 20]

Each worker process appends one JSON line per test to ``DIR/<pid>.jsonl``. The sums add the workers'
time, so they exceed the suite's wall time; the JAX seconds also count compilations in compile-ahead
threads (docs/algorithm.md §6.8), which overlap the test that started them.
"""

import argparse
import collections
import hashlib
import json
import os
import time
from pathlib import Path

import pytest

from compile_costs import EVENTS, event_kind

LOG = "NCTL_COMPILE_LOG"

_current: collections.Counter = collections.Counter()
_programs: collections.Counter = collections.Counter()  # "program kind" -> seconds in this test
_configurations: list = []  # engine configurations this test was the first of its process to run
_seen: set = set()


def _on_duration(event, duration, fun_name=None, **_):
    kind = event_kind(event)
    if kind is not None:
        _current[kind] += duration
        _programs[f"{program_name(fun_name)} {kind}"] += duration
        if kind == "compile_s":
            _current["compilations"] += 1


def pytest_configure(config):
    import jax

    if not os.environ.get(LOG):
        raise pytest.UsageError(f"-p suite_compile_costs logs into the folder named by {LOG}; set it")
    Path(os.environ[LOG]).mkdir(parents=True, exist_ok=True)
    jax.monitoring.register_event_duration_secs_listener(_on_duration)
    _log_engine_configurations()


def _log_engine_configurations() -> None:
    """Note each configuration that reaches ``engine.driver.boundary_program``, which every call of the engine's
    ``learn`` passes through first, once per process."""
    from nctl.core import engine

    program = engine.ahead.boundary_program

    def logged(state, cfg):
        if cfg not in _seen:
            _seen.add(cfg)
            _configurations.append(hashlib.sha256(repr(cfg).encode()).hexdigest()[:12])
        return program(state, cfg)

    engine.driver.boundary_program = logged


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    _current.clear()
    _programs.clear()
    _configurations.clear()
    start = time.perf_counter()
    yield
    line = {"test": item.nodeid, "wall_s": round(time.perf_counter() - start, 3),
            **{k: round(v, 3) for k, v in _current.items()}, "configurations": list(_configurations),
            "programs": {k: round(v, 3) for k, v in _programs.items()}}
    with open(Path(os.environ[LOG]) / f"{os.getpid()}.jsonl", "a") as log:
        log.write(json.dumps(line) + "\n")


def summary(folder: Path, top: int) -> dict:
    tests = [json.loads(line) for path in sorted(folder.glob("*.jsonl")) for line in path.read_text().splitlines()]
    total = lambda key, rows=tests: round(sum(t.get(key, 0) for t in rows), 1)  # noqa: E731
    keys = ["wall_s", *EVENTS.values(), "compilations"]
    files = collections.defaultdict(list)
    for t in tests:
        files[t["test"].split("::")[0]].append(t)
    configurations = lambda rows: [c for t in rows for c in t.get("configurations", [])]  # noqa: E731
    by_file = {name: {**{key: total(key, rows) for key in keys}, "configurations": len(configurations(rows))}
               for name, rows in sorted(files.items(), key=lambda kv: -total("wall_s", kv[1]))}
    slowest = sorted(tests, key=lambda t: -t["wall_s"])[:top]
    engine = {"configurations": len(configurations(tests)), "distinct": len(set(configurations(tests)))}
    return {"tests": len(tests), **{key: total(key) for key in keys}, "engine": engine,
            "by_program": by_program(tests, top), "by_file": by_file, "slowest": slowest}


def program_name(fun_name) -> str:
    """``boundary`` for JAX's ``boundary`` (tracing) and ``jit(boundary)`` (lowering, compiling)."""
    name = str(fun_name)
    return name[4:-1] if name.startswith("jit(") and name.endswith(")") else name


def by_program(tests: list, top: int) -> dict:
    """``{program: {trace_s, lower_s, compile_s}}`` summed over the tests, the ``top`` costliest first."""
    sums = collections.defaultdict(lambda: dict.fromkeys(EVENTS.values(), 0.0))
    for t in tests:
        for key, seconds in t.get("programs", {}).items():
            name, kind = key.rsplit(" ", 1)
            sums[name][kind] += seconds
    ranked = sorted(sums.items(), key=lambda kv: -sum(kv[1].values()))[:top]
    return {name: {kind: round(s, 1) for kind, s in kinds.items()} for name, kinds in ranked}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--top", type=int, default=20)
    args = parser.parse_args()
    print(json.dumps(summary(args.folder, args.top), indent=1))


if __name__ == "__main__":
    main()
