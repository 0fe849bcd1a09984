"""Every setting of an experiment checked before any data is read or any seed runs: ValueError naming
the setting, the value and what is allowed (``nctl run`` calls ``check`` first)."""

from __future__ import annotations

import inspect
from collections.abc import Sequence

from nctl import params, streams
from nctl.baselines import RIVER_MODELS, MLPLearner
from nctl.evaluate import ADAPT50, FROZEN
from nctl.experiments import configs
from nctl.experiments.configs import Experiment
from nctl.experiments.runners import LEARNERS

NETWORK_KEYS = tuple(k for k in params.GLN_RULES if k not in ("n_classes", "seed"))  # set per stream and seed
NCTL_KEYS = tuple(k for k in params.NCTL_RULES if k not in params.GLN_RULES)
STREAM_SET_BY_RUNNER = ("data_dir", "seed", "n_distractors", "n_sources")  # the conditions choose the last two
MLP_PARAMETERS = {k: p for k, p in inspect.signature(MLPLearner).parameters.items()
                  if k not in ("n_features", "n_classes", "seed", "regulariser")}


def check(exp: Experiment) -> None:
    """Raise ValueError unless every field of ``exp`` is valid and read by its kind of experiment."""
    if exp.kind not in configs.KINDS:
        raise ValueError(f"kind must be one of {', '.join(configs.KINDS)}, got {exp.kind!r}")
    rivers = tuple(f"river:{model}" for model in RIVER_MODELS)
    _names("learners", exp.learners, LEARNERS + rivers)
    if exp.kind == configs.TASK_MATRIX:
        _names("variants", exp.variants, (FROZEN, ADAPT50))
    params.check_int("seeds", exp.seeds, 1)
    for name in ("eval_every", "max_test", "steps_per_task", "max_steps"):
        value = params.check_optional_int(name, getattr(exp, name), 1)
        if value is not None and exp.kind not in configs.USED_BY[name]:
            raise ValueError(f"{name} does not apply to {exp.kind} experiments such as {exp.name} "
                             f"(it applies to {', '.join(configs.USED_BY[name])})")
    params.check_int("window", exp.window, 1)
    params.check_int("curve_points", exp.curve_points, 1)
    if not isinstance(exp.conditions, Sequence) or isinstance(exp.conditions, str):
        raise ValueError(f"conditions must be a list of integers, got {exp.conditions!r}")
    for i, condition in enumerate(exp.conditions):
        params.check_int(f"conditions[{i}]", condition, 0)
    constructor = getattr(streams, exp.stream, None)
    if not callable(constructor):
        raise ValueError(f"stream must name a stream of nctl.streams, got {exp.stream!r}")
    stream_parameters = {k: p for k, p in inspect.signature(constructor).parameters.items()
                         if k not in STREAM_SET_BY_RUNNER}
    for group, parameters in (("stream_args", stream_parameters), ("mlp", MLP_PARAMETERS)):
        _keys(group, getattr(exp, group), tuple(parameters))
        for key, value in getattr(exp, group).items():
            _like_default(f"{group}.{key}", value, parameters[key].default)
    _keys("network", exp.network, NETWORK_KEYS)
    _keys("nctl", exp.nctl, NCTL_KEYS)
    for group, rules in (("network", params.GLN_RULES), ("nctl", params.NCTL_RULES)):
        for key, value in getattr(exp, group).items():
            rules[key](f"{group}.{key}", value)
    if not hasattr(exp.anchors, "keys"):
        raise ValueError(f"anchors must be a mapping, got {exp.anchors!r}")


def _names(field: str, value, allowed: Sequence[str]) -> None:
    """``value`` must be a non-empty list of names from ``allowed``."""
    example = f"e.g. --set {field}='[\"{allowed[0]}\"]'"
    if isinstance(value, str) or not isinstance(value, Sequence) or not value:
        raise ValueError(f"{field} must be a non-empty list of names ({example}), got {value!r}")
    unknown = [name for name in value if name not in allowed]
    if unknown:
        raise ValueError(f"{field}: unknown name(s) {', '.join(map(repr, unknown))}; known: {', '.join(allowed)}")


def _like_default(name: str, value, default) -> None:
    """``value`` must be of the kind of ``default``: an integer, a number, True or False, text or a list
    (after a None default anything goes: the stream or learner checks it)."""
    if isinstance(default, bool):
        params.check_bool(name, value)
    elif isinstance(default, int):
        params.check_int(name, value)
    elif isinstance(default, float):
        params.check_float(name, value)
    elif isinstance(default, str) and not isinstance(value, str):
        raise ValueError(f"{name} must be text, got {value!r}")
    elif isinstance(default, tuple) and (isinstance(value, str) or not isinstance(value, Sequence)):
        raise ValueError(f"{name} must be a list, got {value!r}")


def _keys(group: str, values, allowed: Sequence[str]) -> None:
    """``values`` must be a mapping whose keys are all in ``allowed``."""
    if not hasattr(values, "keys"):
        raise ValueError(f"{group} must be a mapping of settings, got {values!r}")
    unknown = sorted(set(values) - set(allowed))
    if unknown:
        settings = ", ".join(f"{group}.{key}" for key in unknown)
        raise ValueError(f"unknown setting(s) {settings}; valid: {', '.join(f'{group}.{k}' for k in allowed)}")
