"""Run the seeds of an experiment, in parallel processes if asked, and write the results file.

Layout under ``out``: ``NAME/seeds/seed-0007.json`` per finished seed (kept if the run is
interrupted, and reused by a later run of the same configuration) and ``NAME/results.json``: the
resolved configuration, the package versions, every seed's numbers and a summary (mean, std and
95% confidence interval over seeds of every number and curve). A ``resumable`` run also keeps
``NAME/checkpoints/seed-0007-HASH/``: the learners of an unfinished task-matrix seed at its last task
end, deleted when the seed finishes.
"""

from __future__ import annotations

import concurrent.futures as futures
import hashlib
import json
import multiprocessing
import platform
import shutil
import sys
import time
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from nctl.evaluate import summarize_seeds
from nctl.experiments.configs import TASK_MATRIX, Experiment
from nctl.experiments.runners import run_seed

NOT_SUMMARISED = {"seed", "params", "curve_steps", "tasks", "target", "steps", "window", "log_loss_eps"}


def versions() -> dict:
    import jax

    import nctl

    return {"nctl": nctl.__version__, "jax": jax.__version__, "numpy": np.__version__,
            "python": platform.python_version(), "platform": platform.platform(), "device": str(jax.devices()[0])}


def config_hash(exp: Experiment) -> str:
    return hashlib.sha256(json.dumps(exp.to_json(), sort_keys=True).encode()).hexdigest()[:16]


def _seed_path(folder: Path, seed: int) -> Path:
    return folder / "seeds" / f"seed-{seed:04d}.json"


def _checkpoint_path(folder: Path, seed: int, key: str) -> Path:
    return folder / "checkpoints" / f"seed-{seed:04d}-{key}"


def _load_finished(folder: Path, seeds: Iterable[int], key: str) -> dict[int, dict]:
    done = {}
    for seed in seeds:
        path = _seed_path(folder, seed)
        if path.exists():
            stored = json.loads(path.read_text())
            if stored.get("config_hash") == key:
                done[seed] = stored["result"]
    return done


STORED_DIGITS = 7  # significant digits of every float in a results file: far below any reported digit


def _rounded(data: Any) -> Any:
    """``data`` with each float x replaced by x rounded to STORED_DIGITS significant digits."""
    if isinstance(data, float):
        return float(f"{data:.{STORED_DIGITS}g}")
    if isinstance(data, dict):
        return {k: _rounded(v) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return [_rounded(v) for v in data]
    return data


def _write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(_rounded(data), allow_nan=True))
    tmp.replace(path)


def run(exp: Experiment, seeds: Iterable[int], out: str | Path, data_dir=None, workers: int = 1,
        progress: bool = True, resumable: bool = False) -> dict:
    """Run every seed not already finished under ``out`` and return (and write) the results;
    ``resumable``: save task-matrix learners at every task end and resume unfinished seeds there."""
    if resumable and exp.kind != TASK_MATRIX:
        raise ValueError(f"--resumable applies to task-matrix experiments; {exp.name} is {exp.kind}")
    seeds = list(seeds)
    folder = Path(out) / exp.name
    key = config_hash(exp)
    finished = _load_finished(folder, seeds, key)
    pending = [s for s in seeds if s not in finished]
    bar = _progress_bar(len(seeds), len(finished), exp.name, progress)
    start = time.perf_counter()

    def checkpoints(seed: int) -> Path | None:
        return _checkpoint_path(folder, seed, key) if resumable else None

    def record(seed: int, result: dict) -> None:
        finished[seed] = result
        _write_json(_seed_path(folder, seed), {"config_hash": key, "result": result})
        shutil.rmtree(_checkpoint_path(folder, seed, key), ignore_errors=True)
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
    results = aggregate(exp, [finished[s] for s in seeds if s in finished], interrupted)
    _write_json(folder / "results.json", results)
    if interrupted:
        raise KeyboardInterrupt(f"interrupted: {len(finished)} of {len(seeds)} seeds kept in {folder}")
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
