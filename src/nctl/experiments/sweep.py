"""A grid of settings: every combination of ``--grid`` values on top of the ``--set`` ones, each its own
configuration (its own results folder, ``nctl.experiments.run``), run in one batch on one executor,
and one table of every setting's headline numbers.

``--grid KEY=VALUES`` lists the values of one setting separated by commas, or by semicolons when the
text holds a semicolon (for values that hold commas, such as JSON lists); each value is read exactly as
``--set KEY=VALUE`` reads it::

    nctl sweep demo --grid nctl.pool_size=2,4,8 --grid 'network.layer_sizes=[10,1];[20,10,1]'

The table, ``OUT/NAME/sweep.md``, has one row per setting (the last ``--grid`` varies fastest): its
values, then the mean and 95% confidence interval over seeds of each learner's headline metrics
(``report.headline_rows``), the number of seeds and the configuration's folder. ``OUT/NAME/sweep.json``
holds the same numbers unformatted (accuracies as fractions).
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any, Iterable, Mapping

from nctl import atomic
from nctl.experiments import executors, report, validate
from nctl.experiments.configs import Experiment
from nctl.experiments.run import write_json, run_all

TABLE, NUMBERS = "sweep.md", "sweep.json"


def parse_grid(specs: Iterable[str]) -> dict[str, list[str]]:
    """``["KEY=V1,V2", ...]`` -> ``{KEY: [V1, V2]}``: the values as text, read later as ``--set`` reads
    them. ValueError for a malformed spec, an empty value, or a key or value given twice."""
    grid: dict[str, list[str]] = {}
    for spec in specs:
        key, sep, text = spec.partition("=")
        if not sep or not key or not text:
            raise ValueError(f"--grid expects KEY=VALUE,VALUE,..., got {spec!r}")
        if key in grid:
            raise ValueError(f"--grid {key} is given twice; list all its values in one --grid")
        values = text.split(";" if ";" in text else ",")
        if "" in values:
            raise ValueError(f"--grid {key}: an empty value in {text!r}")
        if len(set(values)) < len(values):
            raise ValueError(f"--grid {key}: a value is listed twice in {text!r}")
        grid[key] = values
    return grid


def configurations(base: Experiment, fixed: Mapping[str, str], grid: Mapping[str, list[str]]) -> list[Experiment]:
    """One checked configuration per combination of the grid's values (with the ``fixed`` settings),
    the last key varying fastest. ValueError naming the first setting that is invalid, or two settings
    that make one configuration."""
    both = sorted(set(fixed) & set(grid))
    if both:
        raise ValueError(f"{both[0]} is given in both --set and --grid")
    exps, settings_of = [], {}
    for values in itertools.product(*grid.values()):
        setting = dict(zip(grid, values))
        shown = " ".join(f"{key}={value}" for key, value in setting.items())
        try:
            exp = base.replace({**fixed, **setting})
            key = validate.canonical_key(exp)  # 1 and 1.0 of a number setting are one configuration
        except ValueError as error:
            raise ValueError(f"grid setting {shown}: {error}") from error
        if key in settings_of:
            raise ValueError(f"grid settings {settings_of[key]} and {shown} make the same configuration")
        settings_of[key] = shown
        exps.append(exp)
    return exps


def sweep(base: Experiment, fixed: Mapping[str, str], grid: Mapping[str, list[str]], seeds: Iterable[int],
          out: str | Path, data_dir=None, executor: executors.Executor = executors.in_process,
          progress: bool = True, resumable: bool = False) -> dict:
    """Run every setting of ``grid`` (``run_all``: every setting is checked before any seed runs),
    write ``OUT/NAME/sweep.json`` and ``sweep.md``, and return the numbers of ``sweep.json``."""
    exps = configurations(base, fixed, grid)
    results = run_all(exps, seeds, out, data_dir, executor, progress, resumable)
    numbers = {"experiment": base.name, "set": dict(fixed), "grid": dict(grid),
               "settings": [_entry(list(grid), r) for r in results]}
    folder = Path(out) / base.name
    write_json(folder / NUMBERS, numbers)
    atomic.write_text(folder / TABLE, markdown(numbers))
    return numbers


def _entry(keys: list[str], results: dict) -> dict:
    """One setting's line of ``sweep.json``: its resolved values and headline numbers."""
    metrics = [{"learner": row["learner"], "variant": row["variant"], "metric": row["metric"], **(row["stat"] or {}),
                "text": row["mean"] if row["ci95"] == "-" else f"{row['mean']} {row['ci95']}"}
               for row in report.headline_rows(results)]
    return {"setting": {key: _value(results["config"], key) for key in keys}, "config_hash": results["config_hash"],
            "results": f"{results['config_hash']}/results.json", "n_seeds": results["n_seeds"], "metrics": metrics}


def _value(config: dict, key: str) -> Any:
    """The resolved value of setting ``key`` (``group.entry`` or a field) in a stored configuration."""
    top, _, entry = key.partition(".")
    return config[top][entry] if entry else config[top]


def markdown(numbers: dict) -> str:
    """The table of ``sweep.json``: a row per setting, a column per (learner, variant, metric)."""
    keys = list(numbers["grid"])
    columns = list(dict.fromkeys(_column(m) for entry in numbers["settings"] for m in entry["metrics"]))
    header = [*keys, *columns, "seeds", "folder"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for entry in numbers["settings"]:
        cells = {_column(m): m["text"] for m in entry["metrics"]}
        values = [v if isinstance(v, str) else json.dumps(v) for v in entry["setting"].values()]
        lines.append("| " + " | ".join([*values, *(cells.get(c, "-") for c in columns), str(entry["n_seeds"]),
                                        entry["config_hash"]]) + " |")
    return "\n".join(lines) + "\n"


def _column(metric: dict) -> str:
    return f"{metric['learner']} {metric['variant']} {metric['metric']}"
