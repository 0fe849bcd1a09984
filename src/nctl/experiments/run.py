"""Run the seeds of an experiment, in parallel processes if asked, and write the results files.

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
leave a file that lists all ten. Every file is written whole or not at all (``nctl._atomic``) and
is strict JSON: an undefined number (NaN, infinity) is stored as null. Seed files and checkpoints of
the earlier layout (``NAME/seeds/``, ``NAME/checkpoints/seed-0007-HASH/``) are still picked up.
"""

from __future__ import annotations

import concurrent.futures as futures
import hashlib
import json
import math
import multiprocessing
import os
import platform
import shutil
import sys
import time
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from nctl import _atomic
from nctl.evaluate import summarize_seeds
from nctl.experiments import validate
from nctl.experiments.configs import TASK_MATRIX, Experiment
from nctl.experiments.runners import run_seed

NOT_SUMMARISED = {"seed", "params", "curve_steps", "tasks", "target", "steps", "window", "log_loss_eps"}
RESULTS = "results.json"
LOCK = ".lock"  # in the experiment's folder: held while a results file is rebuilt


def versions() -> dict:
    import jax

    import nctl

    return {"nctl": nctl.__version__, "jax": jax.__version__, "numpy": np.__version__,
            "python": platform.python_version(), "platform": platform.platform(), "device": str(jax.devices()[0])}


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
        stored = json.loads(path.read_text())
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
                _write_seed(folder, seed, key, result)
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


def _write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    _atomic.write_text(path, json.dumps(_stored(data), allow_nan=False))


def _write_seed(folder: Path, seed: int, key: str, result: dict) -> None:
    _write_json(_seed_path(folder, seed), {"config_hash": key, "result": result})


def run(exp: Experiment, seeds: Iterable[int], out: str | Path, data_dir=None, workers: int = 1,
        progress: bool = True, resumable: bool = False) -> dict:
    """Run every seed not already finished under ``out``, then rebuild and return the results of every
    finished seed of this configuration; ``resumable``: save task-matrix learners at every task end
    and resume unfinished seeds there. The settings are checked and ``out`` is made and tested for
    writing before any seed runs."""
    if resumable and exp.kind != TASK_MATRIX:
        raise ValueError(f"--resumable applies to task-matrix experiments; {exp.name} is {exp.kind}")
    seeds = list(seeds)
    if not seeds or any(not isinstance(s, int) or s < 0 for s in seeds):
        raise ValueError(f"seeds must be one or more integers >= 0, got {seeds}")
    validate.check(exp)
    key = config_hash(exp)
    folder = _atomic.check_writable(config_folder(out, exp))
    finished = _load_finished(folder, seeds, key)
    pending = [s for s in seeds if s not in finished]
    bar = _progress_bar(len(seeds), len(finished), exp.name, progress)
    start = time.perf_counter()

    def checkpoints(seed: int) -> Path | None:
        if not resumable:
            return None
        path, earlier = _checkpoint_path(folder, seed), folder.parent / "checkpoints" / f"seed-{seed:04d}-{key}"
        if earlier.is_dir() and not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            os.replace(earlier, path)
        return path

    def record(seed: int, result: dict) -> None:
        finished[seed] = result
        _write_seed(folder, seed, key, result)
        shutil.rmtree(_checkpoint_path(folder, seed), ignore_errors=True)
        if bar is not None:
            bar.update(1)
            steps = sum(_steps(r) for r in finished.values())
            bar.set_postfix(examples_per_s=f"{steps / max(time.perf_counter() - start, 1e-9):.0f}")

    interrupted = False
    one_process = workers <= 1 or len(pending) <= 1
    steps_bar = _StepBar() if one_process and bar is not None and exp.kind == TASK_MATRIX else None
    try:
        if one_process:
            for seed in pending:
                record(seed, run_seed(exp, seed, data_dir, checkpoints(seed), steps_bar))
        else:
            context = multiprocessing.get_context("spawn")  # JAX must not be forked after it started
            with futures.ProcessPoolExecutor(workers, mp_context=context) as pool:
                jobs = {pool.submit(run_seed, exp, seed, data_dir, checkpoints(seed)): seed for seed in pending}
                try:
                    for job in futures.as_completed(jobs):
                        record(jobs[job], job.result())
                except KeyboardInterrupt:
                    for job in jobs:
                        job.cancel()
                    raise
    except KeyboardInterrupt:
        interrupted = True
    finally:
        for shown in (steps_bar, bar):
            if shown is not None:
                shown.close()
    results = write_results(exp, folder, interrupted)
    if interrupted:
        raise KeyboardInterrupt(f"interrupted: {len(finished)} of {len(seeds)} seeds kept in {folder}")
    return results


def write_results(exp: Experiment, folder: Path, interrupted: bool = False) -> dict:
    """Rebuild ``folder/results.json`` from every seed file in ``folder`` (the configuration of ``exp``)
    and copy it to the experiment's ``results.json``, under the experiment's lock; returns it."""
    key = config_hash(exp)
    with _atomic.locked(folder.parent / LOCK):
        stored = (_read_seed(path, key) for path in (folder / "seeds").glob("seed-*.json"))
        seed_results = sorted((r for r in stored if r is not None), key=lambda r: r["seed"])
        results = _stored(aggregate(exp, seed_results, interrupted))
        _write_json(folder / RESULTS, results)
        _write_json(folder.parent / RESULTS, results)
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
