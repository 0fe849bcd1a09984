"""The structure of a results file, checked when ``nctl report`` or ``nctl plot`` loads one: every field
the tables and figures read is there and of its type, so that a damaged or hand-edited file is refused
with one line naming the field (``summary.learners.nctl.variants`` is missing, say) instead of failing
half-way through a table.

A number is an integer, a float or null (an undefined number; files of earlier versions hold bare NaN
tokens, read as NaN). A summary of a number (``STAT``) holds mean, std, ci_low, ci_high and n; a
summary of a curve holds mean, n and, with two seeds or more, half_width.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from nctl.experiments import configs

TYPE_NAMES = {dict: "an object", list: "a list", str: "text", int: "an integer", bool: "true or false"}
MAX_DEPTH = 64  # lists and objects in a file: results files nest 10 deep, and the checks and copies recurse


def read_json(path: str | Path) -> Any:
    """The JSON value in the file ``path``; ValueError for text that is not JSON or nests lists and
    objects deeper than MAX_DEPTH (the parser recurses, and so do the checks and copies of the value)."""
    too_deep = ValueError(f"lists and objects nested more than {MAX_DEPTH} deep")
    try:
        data = json.loads(Path(path).read_text())
    except RecursionError:
        raise too_deep from None
    level = [data]  # the values at one depth, walked without recursion
    for _ in range(MAX_DEPTH):
        level = [child for value in level if isinstance(value, (dict, list))
                 for child in (value.values() if isinstance(value, dict) else value)]
    if any(isinstance(value, (dict, list)) for value in level):
        raise too_deep
    return data


class StructureError(ValueError):
    """A results file whose structure is not that of ``nctl run``'s; the message names the field."""


def _name(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def field(data: dict, path: str, key: str, kind: type, optional: bool = False) -> Any:
    """``data[key]``, which must be of ``kind`` (an int is not a bool); None if ``optional`` and absent."""
    name = _name(path, key)
    if key not in data:
        if optional:
            return None
        raise StructureError(f"field {name} is missing")
    value = data[key]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise StructureError(f"field {name} must be {TYPE_NAMES[kind]}, got {_shown(value)}")
    return value


def number(data: dict, path: str, key: str, optional: bool = False) -> None:
    """``data[key]`` must be a number or null."""
    name = _name(path, key)
    if key not in data:
        if optional:
            return
        raise StructureError(f"field {name} is missing")
    value = data[key]
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
        raise StructureError(f"field {name} must be a number or null, got {_shown(value)}")


def array(data: dict, path: str, key: str, ndim: int) -> np.ndarray:
    """``data[key]``, a list of numbers (``ndim`` 1) or of equal-length lists of them (2), as floats."""
    name = _name(path, key)
    value = field(data, path, key, list)
    try:
        values = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        values = None
    if values is None or values.ndim != ndim:
        what = "a list of numbers" if ndim == 1 else "a list of equal-length lists of numbers"
        raise StructureError(f"field {name} must be {what}")
    return values


def objects(data: dict, path: str, key: str, optional: bool = False, empty: bool = False) -> dict[str, dict]:
    """``data[key]``, an object (non-empty unless ``empty``) whose every entry is an object ({} if
    ``optional`` and absent)."""
    value = field(data, path, key, dict, optional)
    if value is None:
        return {}
    if not value and not empty:
        raise StructureError(f"field {_name(path, key)} is empty")
    for entry in value:
        field(value, _name(path, key), entry, dict)
    return value


def stat(data: dict, path: str, key: str) -> None:
    """``data[key]``, if present and not null, is the summary of a number over seeds."""
    if data.get(key) is None:
        return
    value = field(data, path, key, dict)
    for entry in ("mean", "std", "ci_low", "ci_high"):
        number(value, _name(path, key), entry)
    field(value, _name(path, key), "n", int)


def curve_stat(data: dict, path: str, key: str, ndim: int) -> None:
    """``data[key]``, if present, is the summary of a curve (``ndim`` 1) or a matrix (2) over seeds."""
    if key not in data:
        return
    value, name = field(data, path, key, dict), _name(path, key)
    mean = array(value, name, "mean", ndim)
    if field(value, name, "n", int) > 1 and array(value, name, "half_width", ndim).shape != mean.shape:
        raise StructureError(f"field {name}.half_width must have the shape of {name}.mean")


SCALARS = {configs.PREQUENTIAL: ("accuracy", "log_loss", "kappa_temporal", "recurring_log_loss"),
           configs.ORACLES: ("log_loss", "accuracy"), configs.SUBSTRATE: ("test_accuracy",),
           configs.REGRESSION: ("mae", "rmse", "log_likelihood", "recurring_mae", "examples_per_s")}
CURVES = {configs.PREQUENTIAL: ("windowed_accuracy", "windowed_kappa_temporal"),
          configs.ORACLES: ("binned_log_loss",), configs.SUBSTRATE: (), configs.REGRESSION: ("binned_mae",)}


def check(results: Any) -> None:
    """Raise StructureError naming the first field of ``results`` (a loaded results file) that
    ``nctl report`` or ``nctl plot`` would read and cannot."""
    if not isinstance(results, dict):
        raise StructureError(f"a results file holds an object, got {_shown(results)}")
    field(results, "", "experiment", str)
    kind = field(results, "", "kind", str)
    if kind not in configs.KINDS:
        raise StructureError(f"field kind must be one of {', '.join(configs.KINDS)}, got {kind!r}")
    config = field(results, "", "config", dict)
    for metric, table in objects(config, "config", "anchors", optional=True, empty=True).items():
        for name in table:
            number(table, f"config.anchors.{metric}", name)
    field(results, "", "interrupted", bool, optional=True)
    summary = field(results, "", "summary", dict)
    seeds = field(results, "", "seeds", list)
    if field(results, "", "n_seeds", int) != len(seeds):
        raise StructureError(f"field n_seeds is {results['n_seeds']} but seeds lists {len(seeds)}")
    for i, seed in enumerate(seeds):
        if not isinstance(seed, dict):
            raise StructureError(f"field seeds[{i}] must be an object, got {_shown(seed)}")
        number(seed, f"seeds[{i}]", "wall_s", optional=True)
        number(seed, f"seeds[{i}]", "peak_rss_bytes", optional=True)
    if bool(summary) != bool(seeds):  # a summary is made of the seeds
        raise StructureError(f"field summary is {'empty' if seeds else 'not empty'} but seeds lists {len(seeds)}")
    if kind == configs.TASK_MATRIX:
        _task_matrix(summary, seeds)
    elif kind in (configs.BACKWARD, configs.FORWARD):
        _transfer(summary, seeds)
    else:
        _per_learner(kind, summary, seeds)


def _task_matrix(summary: dict, seeds: list[dict]) -> None:
    learners = objects(summary, "summary", "learners", optional=not seeds)
    for i, seed in enumerate(seeds):
        tasks = field(seed, f"seeds[{i}]", "tasks", list)
        if not all(isinstance(task, str) for task in tasks):
            raise StructureError(f"field seeds[{i}].tasks must be a list of task names")
        seed_learners = objects(seed, f"seeds[{i}]", "learners")
        for learner, entry in learners.items():
            path = f"seeds[{i}].learners"
            field(seed_learners, path, learner, dict)
            array(seed_learners[learner], f"{path}.{learner}", "curve_steps", 1)
            variants = objects(seed_learners[learner], f"{path}.{learner}", "variants")
            for variant in objects(entry, f"summary.learners.{learner}", "variants"):
                field(variants, f"{path}.{learner}.variants", variant, dict)
            for variant, metrics in variants.items():
                for key in ("matrix", "curve"):
                    array(metrics, f"{path}.{learner}.variants.{variant}", key, 2)
    for learner, entry in learners.items():
        for variant, metrics in objects(entry, f"summary.learners.{learner}", "variants").items():
            path = f"summary.learners.{learner}.variants.{variant}"
            for metric in ("acc", "bwt", "forgetting"):
                stat(metrics, path, metric)
            for key in ("matrix", "curve"):
                curve_stat(metrics, path, key, 2)


def _per_learner(kind: str, summary: dict, seeds: list[dict]) -> None:
    learners = objects(summary, "summary", "learners", optional=not seeds)
    for learner, entry in learners.items():
        for metric in SCALARS[kind]:
            stat(entry, f"summary.learners.{learner}", metric)
        for curve in CURVES[kind]:
            curve_stat(entry, f"summary.learners.{learner}", curve, 1)
    for i, seed in enumerate(seeds):
        seed_learners = objects(seed, f"seeds[{i}]", "learners")
        for learner in learners:
            entry = field(seed_learners, f"seeds[{i}].learners", learner, dict)
            path = f"seeds[{i}].learners.{learner}"
            if CURVES[kind]:
                array(entry, path, "curve_steps", 1)
            if kind == configs.PREQUENTIAL:
                field(entry, path, "window", int, optional=True)
            if kind == configs.ORACLES:  # each rival's log loss is compared with NCTL's, seed by seed
                number(entry, path, "log_loss")
                if learner != "nctl":
                    number(field(seed_learners, f"seeds[{i}].learners", "nctl", dict), f"seeds[{i}].learners.nctl",
                           "log_loss")


def _transfer(summary: dict, seeds: list[dict]) -> None:
    conditions = objects(summary, "summary", "conditions", optional=not seeds)
    for condition, entry in conditions.items():
        if not condition.isdigit():
            raise StructureError(f"field summary.conditions has {condition!r} where a count is expected")
        for learner, curves in objects(entry, f"summary.conditions.{condition}", "learners").items():
            path = f"summary.conditions.{condition}.learners.{learner}"
            field(curves, path, "target_log_loss", dict)
            curve_stat(curves, path, "target_log_loss", 1)
            for i, seed in enumerate(seeds):
                seed_conditions = objects(seed, f"seeds[{i}]", "conditions")
                seed_entry = field(seed_conditions, f"seeds[{i}].conditions", condition, dict)
                seed_learners = objects(seed_entry, f"seeds[{i}].conditions.{condition}", "learners")
                field(seed_learners, f"seeds[{i}].conditions.{condition}.learners", learner, dict)
                array(seed_learners[learner], f"seeds[{i}].conditions.{condition}.learners.{learner}",
                      "target_log_loss", 1)
