"""Every setting of an experiment checked before any data is read or any seed runs: ValueError naming
the setting, the value and what is allowed (``nctl run`` calls ``check`` first).

An integer setting takes integers only: ``300.0`` or ``3e2`` is refused rather than read as 300, so
that one configuration has one spelling and one results folder. A number setting takes integers too
(``learning_rate=1`` is 1.0): ``check`` returns the configuration with every value in its canonical
type, which is what tells two spellings of one configuration apart (``nctl sweep``).
"""

from __future__ import annotations

import dataclasses
import inspect
import json
from collections.abc import Sequence
from functools import partial
from typing import Any

from nctl import params, streams
from nctl.baselines import RIVER_MODELS, MLPLearner
from nctl.baselines.mlp_core import OPTIMIZERS
from nctl.baselines.river_models import RIVER_REGRESSORS
from nctl.evaluate import ADAPT50, FROZEN
from nctl.experiments import configs
from nctl.experiments.configs import Experiment
from nctl.experiments.runners import LEARNERS
from nctl.learners.regressor import REGRESSOR_RULES
from nctl.streams.electricity import FEATURE_SETS

NETWORK_KEYS = tuple(k for k in params.GLN_RULES if k not in ("n_classes", "seed"))  # set per stream and seed
NCTL_KEYS = tuple(k for k in params.NCTL_RULES if k not in params.GLN_RULES)
REGRESSOR_NETWORK_RULES = {k: rule for k, rule in REGRESSOR_RULES.items() if k != "seed"}  # the seed is the run's
STREAM_SET_BY_RUNNER = ("data_dir", "seed", "n_distractors", "n_sources")  # the conditions choose the last two
MLP_PARAMETERS = {k: p for k, p in inspect.signature(MLPLearner).parameters.items()
                  if k not in ("n_features", "n_classes", "seed", "regulariser")}
MAX_STEPS = 2**31 - 1  # learners count steps in 32 bits: no stream, count or size setting may exceed it
MNIST_TRAIN_EXAMPLES = 60_000  # the training split that each Permuted MNIST task passes over
# the transfer kinds read their own stream; every other kind reads one of TASK_STREAMS
TRANSFER_STREAMS = {configs.BACKWARD: "free_split_backward", configs.FORWARD: "free_split_forward"}
TASK_STREAMS = ("synthetic", "electricity", "split_mnist", "split_fashion_mnist", "permuted_mnist", "mnist_classes",
                "free_split_mnist")
# the regression kind reads one of these (nctl.streams.regression, nctl.streams.synthetic) and runs these learners
REGRESSION_STREAMS = ("friedman_gra", "trump_approval", "chick_weights", "synthetic_regression")
REGRESSION_LEARNERS = ("nctl", "gln", *(f"river:{model}" for model in RIVER_REGRESSORS))


def check_integer(name: str, value, low: int = 1, high: int = MAX_STEPS, optional: bool = False) -> int | None:
    """``value``, an int in ``[low, high]`` (None too if ``optional``); a float such as 300.0 or 1e3 is
    refused, not read as 300 or 1000."""
    if optional and value is None:
        return None
    kind = "None or an integer" if optional else "an integer"
    if isinstance(value, float) and value.is_integer():
        raise ValueError(f"{name} must be {kind}, got {value!r}: an integer setting is written without a decimal "
                         "point or exponent")
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} must be {kind}, got {value!r}")
    if value < low:
        raise ValueError(f"{name} must be {kind} >= {low}, got {value!r}")
    if value > high:
        raise ValueError(f"{name} must be {kind} <= {high}, got {value!r}")
    return value


def _positive_or_none(name: str, value) -> float | None:
    if value is None:
        return None
    try:
        return params.check_float(name, value, 0, low_open=True)
    except ValueError:
        raise ValueError(f"{name} must be null or a finite number > 0, got {value!r}") from None


def _feature_set(name: str, value) -> int:
    """The number of an Electricity feature set (``nctl.streams.electricity.FEATURE_SETS``)."""
    if not isinstance(value, int) or isinstance(value, bool) or value not in FEATURE_SETS:
        raise ValueError(f"{name} must be one of {', '.join(map(str, FEATURE_SETS))}, got {value!r}")
    return value


def _positions(name: str, value) -> tuple[int, ...]:
    """Two increasing steps > 0 (FriedmanDrift's drift positions)."""
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence) or len(value) != 2:
        raise ValueError(f"{name} must be a list of two increasing steps > 0, got {value!r}")
    first, second = (check_integer(f"{name}[{i}]", step) for i, step in enumerate(value))
    if second <= first:
        raise ValueError(f"{name} must be a list of two increasing steps > 0, got {value!r}")
    return first, second


def _widths(name: str, value) -> tuple[int, ...]:
    """A non-empty list of positive integers (hidden layer widths)."""
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence) or not value:
        raise ValueError(f"{name} must be a non-empty list of positive integers, got {value!r}")
    return tuple(check_integer(f"{name}[{i}]", width) for i, width in enumerate(value))


# a rule per parameter of every stream constructor (``STREAM_SET_BY_RUNNER`` aside), and of the MLP
STREAM_RULES: dict[str, params.Rule] = {
    "n_features": check_integer,
    "n_concepts": check_integer,
    "segment_length": check_integer,
    "n_segments": check_integer,
    "n_test": partial(check_integer, low=0),
    "label_noise": partial(params.check_float, low=0, high=0.5, high_open=True),
    "n_tasks": check_integer,
    "examples_per_task": partial(check_integer, high=MNIST_TRAIN_EXAMPLES, optional=True),
    "n_steps": check_integer,
    "deskewed": params.check_bool,
    "z_clip": _positive_or_none,
    "n_rows": check_integer,
    "position": _positions,
    "noise": partial(params.check_float, low=0),
}
STREAM_RULES_OF = {"electricity": {"n_features": _feature_set}}
MLP_RULES: dict[str, params.Rule] = {
    "hidden": _widths,
    "learning_rate": partial(params.check_float, low=0, low_open=True),
    "batch_size": check_integer,
    "optimizer": partial(params.check_choice, choices=tuple(OPTIMIZERS)),
}


def stream_steps(stream: str, args: dict) -> int | None:
    """Steps of a stream with settings ``args`` (every parameter given), where they follow from them."""
    if stream == "synthetic":
        return args["segment_length"] * args["n_segments"]
    if stream == "synthetic_regression":
        return args["segment_length"] * args["n_segments"]
    if stream == "friedman_gra":
        return args["n_rows"]
    if stream == "permuted_mnist":
        return args["n_tasks"] * (args["examples_per_task"] or MNIST_TRAIN_EXAMPLES)
    return None


def check(exp: Experiment) -> Experiment:
    """Raise ValueError unless every field of ``exp`` is valid and read by its kind of experiment;
    return ``exp`` with every value in its canonical type (integers of number settings as floats)."""
    if exp.kind not in configs.KINDS:
        raise ValueError(f"kind must be one of {', '.join(configs.KINDS)}, got {exp.kind!r}")
    if not isinstance(exp.description, str):
        raise ValueError(f"description must be text, got {exp.description!r}")
    rivers = tuple(f"river:{model}" for model in RIVER_MODELS)
    regression = exp.kind == configs.REGRESSION
    _names("learners", exp.learners, REGRESSION_LEARNERS if regression else LEARNERS + rivers)
    if exp.kind == configs.TASK_MATRIX:
        _names("variants", exp.variants, (FROZEN, ADAPT50))
    check_integer("seeds", exp.seeds)
    for name in ("eval_every", "max_test", "steps_per_task", "max_steps"):
        value = check_integer(name, getattr(exp, name), optional=True)
        if value is not None and exp.kind not in configs.USED_BY[name]:
            raise ValueError(f"{name} does not apply to {exp.kind} experiments such as {exp.name} "
                             f"(it applies to {', '.join(configs.USED_BY[name])})")
    check_integer("window", exp.window)
    check_integer("curve_points", exp.curve_points)
    if not isinstance(exp.conditions, Sequence) or isinstance(exp.conditions, str):
        raise ValueError(f"conditions must be a list of integers, got {exp.conditions!r}")
    for i, condition in enumerate(exp.conditions):
        check_integer(f"conditions[{i}]", condition, 0)
    streams_read = ((TRANSFER_STREAMS[exp.kind],) if exp.kind in TRANSFER_STREAMS else REGRESSION_STREAMS
                    if regression else TASK_STREAMS)
    if exp.stream not in streams_read:
        raise ValueError(f"stream must be one of {', '.join(streams_read)} for {exp.kind} experiments, "
                         f"got {exp.stream!r}")
    stream_parameters = {k: p.default for k, p in inspect.signature(getattr(streams, exp.stream)).parameters.items()
                         if k not in STREAM_SET_BY_RUNNER}
    stream_args = _group("stream_args", exp.stream_args, {**STREAM_RULES, **STREAM_RULES_OF.get(exp.stream, {})},
                         tuple(stream_parameters))
    steps = stream_steps(exp.stream, {**stream_parameters, **stream_args})
    if steps is not None and steps > MAX_STEPS:
        raise ValueError(f"stream_args make a stream of {steps:,} steps; at most {MAX_STEPS:,} (2^31 - 1)")
    canonical = {"stream_args": stream_args,
                 "mlp": _group("mlp", exp.mlp, MLP_RULES, tuple(MLP_PARAMETERS)),
                 "network": _group("network", exp.network, REGRESSOR_NETWORK_RULES, tuple(REGRESSOR_NETWORK_RULES))
                 if regression else _group("network", exp.network, params.GLN_RULES, NETWORK_KEYS),
                 # a regression experiment's nctl.* settings may also set NCTL's own network settings (over network.*)
                 "nctl": _group("nctl", exp.nctl, {**REGRESSOR_NETWORK_RULES, **params.FMN_RULES},
                                tuple(REGRESSOR_NETWORK_RULES) + tuple(params.FMN_RULES))
                 if regression else _group("nctl", exp.nctl, params.NCTL_RULES, NCTL_KEYS)}
    if not hasattr(exp.anchors, "keys"):
        raise ValueError(f"anchors must be a mapping, got {exp.anchors!r}")
    return dataclasses.replace(exp, **canonical)


def canonical_key(exp: Experiment) -> str:
    """The checked configuration as text: equal for two spellings of one configuration (2 and 2.0 of a
    number setting)."""
    return json.dumps(check(exp).to_json(), sort_keys=True)


def _group(group: str, values, rules: dict[str, params.Rule], allowed: Sequence[str]) -> dict[str, Any]:
    """The entries of parameter group ``group``, each checked by its rule and in its canonical type."""
    _keys(group, values, allowed)
    checked = {}
    for key, value in values.items():
        canonical = rules[key](f"{group}.{key}", value)
        _integers_stay_integers(f"{group}.{key}", value, canonical)
        checked[key] = canonical
    return checked


def _integers_stay_integers(name: str, value, canonical) -> None:
    """Refuse a float (2.0) where a rule read an integer (a rule of ``nctl.params`` reads 2.0 as 2)."""
    if isinstance(canonical, int) and not isinstance(canonical, bool) and isinstance(value, float):
        raise ValueError(f"{name} must be an integer, got {value!r}: an integer setting is written without a "
                         "decimal point or exponent")
    if isinstance(canonical, tuple) and isinstance(value, Sequence) and not isinstance(value, str):
        for i, (entry, canonical_entry) in enumerate(zip(value, canonical)):
            _integers_stay_integers(f"{name}[{i}]", entry, canonical_entry)


def _names(field: str, value, allowed: Sequence[str]) -> None:
    """``value`` must be a non-empty list of distinct names from ``allowed``."""
    example = f"e.g. --set {field}='[\"{allowed[0]}\"]'"
    if isinstance(value, str) or not isinstance(value, Sequence) or not value:
        raise ValueError(f"{field} must be a non-empty list of names ({example}), got {value!r}")
    unknown = [name for name in value if not isinstance(name, str) or name not in allowed]
    if unknown:
        raise ValueError(f"{field}: unknown name(s) {', '.join(map(repr, unknown))}; known: {', '.join(allowed)}")
    if len(set(value)) < len(value):
        raise ValueError(f"{field}: a name is listed twice in {list(value)}")


def _keys(group: str, values, allowed: Sequence[str]) -> None:
    """``values`` must be a mapping whose keys are all in ``allowed``."""
    if not hasattr(values, "keys"):
        raise ValueError(f"{group} must be a mapping of settings, got {values!r}")
    unknown = sorted(set(values) - set(allowed))
    if unknown:
        settings = ", ".join(f"{group}.{key}" for key in unknown)
        raise ValueError(f"unknown setting(s) {settings}; valid: {', '.join(f'{group}.{k}' for k in allowed)}")
