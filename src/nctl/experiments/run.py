"""Run the seeds of experiments on an executor (this process, local processes or Ray tasks:
``nctl.experiments.executors``) and write the results files. This process, the driver, writes the seed
and results files wherever the seeds ran; a ``resumable`` seed's checkpoints are written where it runs.

Layout under ``out``, one folder per experiment and in it one per configuration (``HASH``, the
first 16 hex digits of the SHA-256 of the resolved configuration, ``config_hash``)::

    NAME/results.json               the configuration run last into NAME (a copy of its HASH/results.json)
    NAME/HASH/results.json          every finished seed of that configuration, and their summary
    NAME/HASH/seeds/seed-0007.json  one finished seed: {"config_hash": HASH, "result": {...}}
    NAME/HASH/checkpoints/seed-0007/  a ``resumable`` task-matrix seed's learners at its last task end,
                                    deleted when the seed finishes

A run with other settings writes into another ``HASH`` folder and never touches this one's seeds; a
later run of the same configuration reuses its finished seeds. A results file holds the resolved
configuration, the package versions, every finished seed's numbers and a summary (mean, std and 95%
confidence interval over seeds of every number and curve). It is rebuilt from the seed files, under
a lock, at the end of every run, so runs of one configuration side by side (seeds 0-4 and 5-9, say)
leave a file that lists all ten. Every file is written whole or not at all (``nctl.atomic``) and
is strict JSON: an undefined number (NaN, infinity) is stored as null. Seed files and checkpoints of
the earlier layout (``NAME/seeds/``, ``NAME/checkpoints/seed-0007-HASH/``) are still picked up.

A seed store (``seed_store``, ``nctl run --seed-store DIR``) keeps finished seeds of one configuration
apart from ``out``, in a folder that can be committed: ``DIR/NAME-seed-0007.json`` holds the seed's
numbers with everything that says what they are (``SEED_FORMAT``, the experiment, the configuration
and its hash, the package versions and CPU of the run that stored it); no learner state. A run reuses
the store's seeds of its configuration, copies there each seed it finishes (and each finished seed of
``out`` missing there), and refuses, before anything runs, a store holding a seed file of the
experiment with another configuration, or claimed by a run of another configuration now (runs of one
configuration share a store): such a file is never overwritten nor mixed in. ``stored_results``
merges seed files, from any number of runs, into the results of each configuration.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib.metadata
import json
import math
import os
import platform
import re
import shutil
import sys
import time
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

import numpy as np

from nctl import atomic
from nctl.evaluate import summarize_seeds
from nctl.experiments import executors, schema, validate
from nctl.experiments.configs import TASK_MATRIX, Experiment
from nctl.experiments.runners import run_seed

NOT_SUMMARISED = {"seed", "params", "curve_steps", "tasks", "target", "steps", "window", "log_loss_eps",
                  "concept_segments"}
RESULTS = "results.json"
SEED_FORMAT = "nctl seed 1"  # the "format" of a seed store's file
STORED_SEED = re.compile(r"(?P<name>.+)-seed-(?P<seed>\d+)\.json")  # NAME-seed-0007.json
LOCK = ".lock"  # in the experiment's folder: held while a results file is rebuilt


def cpu_name() -> str:
    """The CPU's model name (``/proc/cpuinfo``, as ``lscpu`` shows it), else what ``platform`` knows."""
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def versions() -> dict:
    """Package versions and the machine, stored with every result (timings differ between CPUs); the device
    is JAX's where the run imported JAX, else the CPU of the native engine."""
    import nctl

    jax = sys.modules.get("jax")
    return {"nctl": nctl.__version__, "jax": importlib.metadata.version("jax"), "numpy": np.__version__,
            "python": platform.python_version(), "platform": platform.platform(), "cpu": cpu_name(),
            "device": str(jax.devices()[0]) if jax is not None else "cpu (native engine)"}


def config_hash(exp: Experiment) -> str:
    return hashlib.sha256(json.dumps(exp.to_json(), sort_keys=True).encode()).hexdigest()[:16]


def config_folder(out: str | Path, exp: Experiment) -> Path:
    """The folder of ``exp``'s configuration under ``out``: ``out/NAME/HASH``."""
    return Path(out) / exp.name / config_hash(exp)


def _seed_path(folder: Path, seed: int) -> Path:
    return folder / "seeds" / f"seed-{seed:04d}.json"


def _checkpoint_path(folder: Path, seed: int) -> Path:
    return folder / "checkpoints" / f"seed-{seed:04d}"


def _read_seed(path: Path, key: str) -> dict | None:
    """The result in seed file ``path`` if it holds configuration ``key``; None if there is none, or
    if the file is unreadable (said on stderr; a run of that seed replaces it)."""
    if not path.exists():
        return None
    try:
        stored = schema.read_json(path)
        return stored["result"] if stored["config_hash"] == key else None
    except (ValueError, KeyError, TypeError) as error:
        print(f"warning: seed file {path} is unreadable ({type(error).__name__}: {error}); it is left out, and "
              "a run of its seed replaces it", file=sys.stderr)
        return None


def _load_finished(folder: Path, seeds: Iterable[int], key: str) -> dict[int, dict]:
    """The finished seeds among ``seeds``; one found only in the earlier layout is copied over."""
    done = {}
    for seed in seeds:
        result = _read_seed(_seed_path(folder, seed), key)
        if result is None:
            result = _read_seed(_seed_path(folder.parent, seed), key)
            if result is not None:
                write_seed(folder, seed, key, result)
        if result is not None:
            done[seed] = result
    return done


STORED_DIGITS = 7  # significant digits of every float in a results file: far below any reported digit


def _stored(data: Any) -> Any:
    """``data`` as strict JSON values: each float rounded to STORED_DIGITS significant digits, NaN and
    infinity replaced by None."""
    if isinstance(data, float):
        return float(f"{data:.{STORED_DIGITS}g}") if math.isfinite(data) else None
    if isinstance(data, dict):
        return {k: _stored(v) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return [_stored(v) for v in data]
    return data


def write_json(path: Path, data: Any) -> None:
    """Write ``data`` as JSON (floats rounded to STORED_DIGITS, non-finite as null), atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic.write_text(path, json.dumps(_stored(data), allow_nan=False))


def write_seed(folder: Path, seed: int, key: str, result: dict) -> None:
    write_json(_seed_path(folder, seed), {"config_hash": key, "result": result})


class SeedsFailed(RuntimeError):
    """Seeds of a run that raised an error or lost their worker; the other seeds finished and are
    kept. ``failures``: (configuration, seed, error) of each, in the order of the run's tasks."""

    def __init__(self, message: str, failures: list[tuple[Experiment, int, Exception]]):
        super().__init__(message)
        self.failures = failures


def run(exp: Experiment, seeds: Iterable[int], out: str | Path, data_dir=None,
        executor: executors.Executor = executors.in_process, progress: bool = True, resumable: bool = False,
        seed_store: str | Path | None = None) -> dict:
    """Run every seed of ``exp`` not already finished under ``out`` or in ``seed_store``
    (``run_all`` of one configuration); returns its results."""
    return run_all([exp], seeds, out, data_dir, executor, progress, resumable, seed_store)[0]


def run_all(exps: Sequence[Experiment], seeds: Iterable[int], out: str | Path, data_dir=None,
            executor: executors.Executor = executors.in_process, progress: bool = True,
            resumable: bool = False, seed_store: str | Path | None = None) -> list[dict]:
    """Run every seed of every configuration in ``exps`` not already finished under ``out``, on
    ``executor`` (``nctl.experiments.executors``; by default in this process), writing each seed's
    file as soon as it returns; then rebuild and return each configuration's results (every finished
    seed). ``resumable``: save task-matrix learners at every task end and resume unfinished seeds
    there. ``seed_store`` (one configuration only): a folder of finished seeds to reuse and to add
    each finished seed to (module docstring). Every configuration and the seed store are checked and
    ``out`` is made and tested for writing before any seed runs. A seed that fails does not stop the
    others: once they are done and the results files are written, SeedsFailed names every failed seed
    (its cause: the first error)."""
    seeds = list(seeds)
    if not seeds or any(not isinstance(s, int) or s < 0 for s in seeds):
        raise ValueError(f"seeds must be one or more integers >= 0, got {seeds}")
    for exp in exps:
        if resumable and exp.kind != TASK_MATRIX:
            raise ValueError(f"--resumable applies to task-matrix experiments; {exp.name} is {exp.kind}")
        validate.check(exp)
    if seed_store is None:
        return _run_pending(exps, seeds, out, data_dir, executor, progress, resumable)
    if len(exps) != 1:
        raise ValueError(f"a seed store holds the seeds of one configuration; this run has {len(exps)}")
    store = atomic.check_writable(Path(seed_store))
    with _claimed(store, exps[0]) as stored:
        return _run_pending(exps, seeds, out, data_dir, executor, progress, resumable, store, stored)


def _run_pending(exps: Sequence[Experiment], seeds: list[int], out: str | Path, data_dir,
                 executor: executors.Executor, progress: bool, resumable: bool, store: Path | None = None,
                 stored: dict[int, dict] | None = None) -> list[dict]:
    """``run_all`` once the configurations are checked and seed store ``store`` (with its finished
    seeds ``stored``) is claimed."""
    folders = [atomic.check_writable(config_folder(out, exp)) for exp in exps]
    finished = [_load_finished(folder, seeds, config_hash(exp)) for exp, folder in zip(exps, folders)]
    if store is not None:
        _share(store, exps[0], folders[0], seeds, stored, finished[0])
    owners, tasks = [], []  # per pending seed: the index of its configuration, and run_seed's arguments
    for owner, (exp, folder) in enumerate(zip(exps, folders)):
        for seed in (s for s in seeds if s not in finished[owner]):
            owners.append(owner)
            tasks.append((exp, seed, data_dir, _checkpoints(folder, seed, config_hash(exp)) if resumable else None))
    total = len(exps) * len(seeds)
    bar = _progress_bar(total, total - len(tasks), exps[0].name, progress)
    steps_bar = None if bar is None else _StepBar()  # shown by executors that run seeds in this process
    start, steps_trained, failures, interrupted = time.perf_counter(), 0, {}, False
    outcomes = executor(run_seed, tasks, steps_bar)
    try:
        for index, outcome in outcomes:
            owner, (exp, seed, *_) = owners[index], tasks[index]
            if isinstance(outcome, Exception):
                failures[index] = outcome
            else:
                finished[owner][seed] = outcome
                write_seed(folders[owner], seed, config_hash(exp), outcome)
                if store is not None:
                    _write_stored_seed(store, exp, outcome)
                shutil.rmtree(_checkpoint_path(folders[owner], seed), ignore_errors=True)
                steps_trained += _steps(outcome)
            if bar is not None:
                bar.update(1)
                rate = f"{steps_trained / max(time.perf_counter() - start, 1e-9):.0f}"
                bar.set_postfix(examples_per_s=rate, **({"failed": len(failures)} if failures else {}))
    except KeyboardInterrupt:
        interrupted = True
    finally:
        outcomes.close()
        for shown in (steps_bar, bar):
            if shown is not None:
                shown.close()
    results = [write_results(exp, folder, interrupted) for exp, folder in zip(exps, folders)]
    if interrupted:
        kept = folders[0] if len(exps) == 1 else Path(out) / exps[0].name
        raise KeyboardInterrupt(f"interrupted: {sum(map(len, finished))} of {total} seeds kept in {kept}")
    if failures:
        failed = [(*tasks[index][:2], failures[index]) for index in sorted(failures)]
        raise SeedsFailed(_failure_message(failed, len(tasks), len(exps) > 1), failed) from failed[0][2]
    return results


def stored_seed_path(store: str | Path, name: str, seed: int) -> Path:
    """The file of ``seed`` of experiment ``name`` in seed store ``store``."""
    return Path(store) / f"{name}-seed-{seed:04d}.json"


def read_stored_seed(path: str | Path) -> dict:
    """A seed store's file, checked: ValueError naming the file and what is wrong with it."""
    path = Path(path)
    try:
        stored = schema.read_json(path)
        if not isinstance(stored, dict) or stored.get("format") != SEED_FORMAT:
            raise ValueError(f"no \"format\": \"{SEED_FORMAT}\"; not a seed file of `nctl run --seed-store`")
        for key, kind in (("experiment", str), ("config_hash", str), ("config", dict), ("result", dict)):
            schema.field(stored, "", key, kind)
        seed = schema.field(stored["result"], "result", "seed", int)
        named = STORED_SEED.fullmatch(path.name)
        if named is None or (named["name"], int(named["seed"])) != (stored["experiment"], seed):
            raise ValueError(f"it holds seed {seed} of {stored['experiment']} but is named {path.name} "
                             f"(expected {stored_seed_path('', stored['experiment'], seed)})")
        schema.check(_merged([stored]))
    except ValueError as error:
        raise ValueError(f"seed file {path} is unreadable ({error}); restore it (it may be under version "
                         "control) or move it out of the folder") from error
    return stored


def store_seeds(store: str | Path, exp: Experiment) -> dict[int, dict]:
    """The results of the seeds of ``exp`` in seed store ``store`` (none if there is no such folder);
    ValueError for an unreadable seed file of the experiment, or one of another configuration."""
    key, done = config_hash(exp), {}
    for path in sorted(Path(store).glob(f"{exp.name}-seed-*.json")):
        stored = read_stored_seed(path)
        if stored["experiment"] != exp.name:  # a longer name that begins with this one
            continue
        if stored["config_hash"] != key:
            raise ValueError(f"seed store {store} holds {path.name}, of another configuration of {exp.name} "
                             f"({_differences(stored['config'], exp.to_json())}); give each configuration "
                             "its own --seed-store folder")
        done[stored["result"]["seed"]] = stored["result"]
    return done


@contextlib.contextmanager
def _claimed(store: Path, exp: Experiment) -> Iterator[dict[int, dict]]:
    """Hold seed store ``store`` for the configuration of ``exp`` for the block, and give its finished
    seeds (``store_seeds``). ValueError, before the block, if the store holds a seed of another
    configuration of the experiment or a run of one holds it now: two runs that both found the store
    empty would each store their seeds, and the file written last would replace the other. Runs of
    one configuration share the store. A run holds a shared lock on its claim file ``.NAME-HASH.claim``
    while it runs; the last one to end removes it. Claims are taken and given up under a lock of the
    store folder."""
    key = config_hash(exp)
    claims = re.compile(rf"\.{re.escape(exp.name)}-(?P<key>[0-9a-f]{{16}})\.claim")
    with atomic.locked(store):
        stored = store_seeds(store, exp)
        for path in store.iterdir():
            other = claims.fullmatch(path.name)
            if other is None or other["key"] == key:
                continue
            if _held(path):
                raise ValueError(f"seed store {store} is being written by a run of another configuration of "
                                 f"{exp.name} ({other['key']}; this run's is {key}); give each configuration "
                                 "its own --seed-store folder")
            path.unlink()  # left by a run that was killed
        claim = open(store / f".{exp.name}-{key}.claim", "a")
        fcntl.flock(claim, fcntl.LOCK_SH)
    try:
        yield stored
    finally:
        with atomic.locked(store), claim:
            with contextlib.suppress(BlockingIOError):  # another run of this configuration holds it
                fcntl.flock(claim, fcntl.LOCK_EX | fcntl.LOCK_NB)
                os.unlink(claim.name)


def _held(path: Path) -> bool:
    """Whether a lock is held on the file ``path``."""
    with open(path, "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
    return False


def _differences(stored: dict, wanted: dict) -> str:
    """The settings where a stored configuration and this run's differ, as ``key: stored -> this run``."""
    def flat(config: dict) -> dict:
        entries = {}
        for top, value in config.items():
            if isinstance(value, dict) and value:
                entries.update({f"{top}.{key}": entry for key, entry in value.items()})
            else:
                entries[top] = value
        return entries

    before, after = flat(stored), flat(wanted)
    changed = [f"{key}: {json.dumps(before.get(key))} -> {json.dumps(after.get(key))}"
               for key in sorted(set(before) | set(after)) if before.get(key) != after.get(key)]
    return "; ".join(changed) or "same settings, other hash"


def _write_stored_seed(store: Path, exp: Experiment, result: dict) -> None:
    write_json(stored_seed_path(store, exp.name, result["seed"]),
               {"format": SEED_FORMAT, "experiment": exp.name, "kind": exp.kind, "description": exp.description,
                "config_hash": config_hash(exp), "config": exp.to_json(), "versions": versions(), "result": result})


def _share(store: Path, exp: Experiment, folder: Path, seeds: list[int], stored: dict[int, dict],
           finished: dict[int, dict]) -> None:
    """Each of ``seeds`` finished in the store but not in ``folder`` is copied into ``folder`` (and
    ``finished``), and each finished in ``folder`` but not in the store into the store."""
    for seed in seeds:
        if seed in stored and seed not in finished:
            finished[seed] = stored[seed]
            write_seed(folder, seed, config_hash(exp), stored[seed])
        elif seed in finished and seed not in stored:
            _write_stored_seed(store, exp, finished[seed])


def stored_results(paths: Iterable[str | Path]) -> list[dict]:
    """Seed files of seed stores merged into the results of each configuration they hold (as
    ``write_results`` makes them, with ``seed_files`` and each seed's ``versions``), in the order the
    configurations first appear. A seed given twice counts once; ValueError if its two files differ."""
    groups: dict[tuple[str, str], dict[int, tuple[Path, dict]]] = {}
    for path in map(Path, paths):
        stored = read_stored_seed(path)
        seeds = groups.setdefault((stored["experiment"], stored["config_hash"]), {})
        seed = stored["result"]["seed"]
        if seed in seeds and seeds[seed][1]["result"] != stored["result"]:
            raise ValueError(f"seed {seed} of {stored['experiment']} ({stored['config_hash']}) differs between "
                             f"{seeds[seed][0]} and {path}")
        seeds.setdefault(seed, (path, stored))
    merged = []
    for seeds in groups.values():
        files = [seeds[seed] for seed in sorted(seeds)]
        merged.append(_merged([stored for _, stored in files], [str(path) for path, _ in files]))
    return merged


def _merged(stored: list[dict], files: list[str] | None = None) -> dict:
    """The results of seed files ``stored`` of one configuration (sorted by seed)."""
    first, results = stored[0], [seed["result"] for seed in stored]
    return _stored({"experiment": first["experiment"], "kind": first.get("kind"),
                    "description": first.get("description", ""), "config": first["config"],
                    "config_hash": first["config_hash"], "versions": [seed.get("versions") for seed in stored],
                    "n_seeds": len(results), "interrupted": False, "summary": summarise(results), "seeds": results,
                    **({"seed_files": files} if files is not None else {})})


def _checkpoints(folder: Path, seed: int, key: str) -> Path:
    """The checkpoint folder of ``seed``; one of the earlier layout is moved there first."""
    path, earlier = _checkpoint_path(folder, seed), folder.parent / "checkpoints" / f"seed-{seed:04d}-{key}"
    if earlier.is_dir() and not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        os.replace(earlier, path)
    return path


def _failure_message(failed: list[tuple[Experiment, int, Exception]], n_run: int, several: bool) -> str:
    """One line: the failed seeds grouped by error (with their configuration's hash if ``several``)."""
    groups: dict[str, list[str]] = {}
    for exp, seed, error in failed:
        first_line = next(iter(str(error).splitlines()), "")
        label = f"{seed} ({config_hash(exp)})" if several else str(seed)
        groups.setdefault(f"{type(error).__name__}: {first_line}", []).append(label)
    listed = "; ".join(f"seed{'s' * (len(labels) > 1)} {', '.join(labels)}: {error}"
                       for error, labels in groups.items())
    return (f"{len(failed)} of {n_run} seeds failed ({listed}); finished seeds are kept, and a rerun runs only "
            "the missing ones")


def write_results(exp: Experiment, folder: Path, interrupted: bool = False) -> dict:
    """Rebuild ``folder/results.json`` from every seed file in ``folder`` (the configuration of ``exp``)
    and copy it to the experiment's ``results.json``, under the experiment's lock; returns it."""
    key = config_hash(exp)
    with atomic.locked(folder.parent / LOCK):
        stored = (_read_seed(path, key) for path in (folder / "seeds").glob("seed-*.json"))
        seed_results = sorted((r for r in stored if r is not None), key=lambda r: r["seed"])
        results = _stored(aggregate(exp, seed_results, interrupted))
        write_json(folder / RESULTS, results)
        write_json(folder.parent / RESULTS, results)
    return results


def _steps(result: dict) -> int:
    """Training steps a seed's result covers (all learners and conditions)."""
    if "conditions" in result:
        return sum(c["steps"] * len(c["learners"]) for c in result["conditions"].values())
    return result.get("steps", 0) * len(result.get("learners", {}))


def _progress_bar(total: int, done: int, name: str, enabled: bool):
    if not enabled:
        return None
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm(total=total, initial=done, desc=name, unit="seed", file=sys.stderr)


class _StepBar:
    """A bar of training steps under the seeds bar, restarted for each seed and learner (one process)."""

    def __init__(self):
        self.label, self.bar = None, None

    def __call__(self, label: str, trained: int, total: int) -> None:
        if label != self.label:
            self.close()
            from tqdm import tqdm

            self.label = label
            self.bar = tqdm(total=total, initial=trained, desc=label, unit="step", leave=False, file=sys.stderr)
        else:
            self.bar.update(trained - self.bar.n)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def aggregate(exp: Experiment, seed_results: list[dict], interrupted: bool = False) -> dict:
    return {
        "experiment": exp.name,
        "kind": exp.kind,
        "description": exp.description,
        "config": exp.to_json(),
        "config_hash": config_hash(exp),
        "versions": versions(),
        "n_seeds": len(seed_results),
        "interrupted": interrupted,
        "summary": summarise(seed_results),
        "seeds": seed_results,
    }


def summarise(results: list[dict]) -> Any:
    """Mean, std and 95% CI over seeds of every number, and mean and CI half-width of every array
    whose shape agrees across seeds; nested dictionaries keep their layout."""
    if not results:
        return {}
    first = results[0]
    if isinstance(first, dict):
        keys = [k for k in first if k not in NOT_SUMMARISED and all(isinstance(r, dict) and k in r for r in results)]
        out = {k: summarise([r[k] for r in results]) for k in keys}
        return {k: v for k, v in out.items() if v is not None}
    values = [np.asarray(r, dtype=float) if _numeric(r) else None for r in results]
    if any(v is None for v in values) or len({v.shape for v in values}) != 1:
        return None
    stats = summarize_seeds(np.stack(values))
    if np.ndim(stats.mean) == 0:
        return {"mean": float(stats.mean), "std": float(stats.std), "ci_low": float(stats.low),
                "ci_high": float(stats.high), "n": len(values)}
    return {"mean": np.asarray(stats.mean).tolist(), "half_width": np.asarray(stats.half_width).tolist(), "n": len(values)}


def _numeric(value: Any) -> bool:
    if isinstance(value, bool) or value is None:
        return False
    if isinstance(value, (int, float)):
        return True
    if isinstance(value, list) and value:
        try:
            return np.asarray(value, dtype=float).size > 0
        except (TypeError, ValueError):
            return False
    return False
