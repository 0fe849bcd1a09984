"""Checks of hyper-parameters: every rule of the learners' constructors, the river adapters and
``nctl run --set``.

Each check takes the parameter's name and value and returns the value in its canonical type, or
raises ValueError naming the parameter, the value and what is allowed. Nothing is rounded: an
integer-valued float (``2.0``) is the integer 2, ``2.5`` is an error.

>>> check_int("pool_size", 2.0, 0, 10)
2
>>> check_int("pool_size", 2.9, 0, 10)
Traceback (most recent call last):
ValueError: pool_size must be an integer in [0, 10], got 2.9
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from functools import partial
from typing import Any, Callable

import numpy as np

from nctl.core.pool import EVICTION_POLICIES

MAX_CONTEXT_BITS = 16  # 2^16 contexts per neuron: beyond it one neuron's weights alone reach gigabytes
MAX_DEPTH = 31  # steps are int32: a tree of depth 31 covers every stream a learner can count
MAX_MIN_SEGMENT = 2**30
MAX_POOL_SIZE = 4096
MAX_RESERVOIR_SIZE = 1_000_000
MAX_CLASSES = 100_000
MAX_SEED = 2**32 - 1
WEIGHT_INITS = ("zeros", "uniform")


def _interval(low, high, low_open: bool = False, high_open: bool = False) -> str:
    if low is not None and high is not None:
        return f"in {'(' if low_open else '['}{low}, {high}{')' if high_open else ']'}"
    if low is not None:
        return f"{'>' if low_open else '>='} {low}"
    if high is not None:
        return f"{'<' if high_open else '<='} {high}"
    return ""


def _error(name: str, kind: str, where: str, value) -> ValueError:
    return ValueError(f"{name} must be {kind}{' ' + where if where else ''}, got {value!r}")


def _is_real(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))


def _is_whole(value) -> bool:
    return _is_real(value) and (isinstance(value, numbers.Integral) or float(value).is_integer())


def check_int(name: str, value, low: int | None = None, high: int | None = None) -> int:
    """``value`` as an int in ``[low, high]`` (either bound may be None)."""
    if not _is_whole(value) or (low is not None and value < low) or (high is not None and value > high):
        raise _error(name, "an integer", _interval(low, high), value)
    return int(value)


def check_optional_int(name: str, value, low: int | None = None, high: int | None = None) -> int | None:
    """None, or ``value`` checked by ``check_int``."""
    if value is None:
        return None
    try:
        return check_int(name, value, low, high)
    except ValueError:
        raise _error(name, "None or an integer", _interval(low, high), value) from None


def check_float(name: str, value, low: float | None = None, high: float | None = None, *,
                low_open: bool = False, high_open: bool = False) -> float:
    """``value`` as a finite float between ``low`` and ``high``, each bound included unless open."""
    ok = _is_real(value) and math.isfinite(value)
    if ok and low is not None:
        ok = value > low if low_open else value >= low
    if ok and high is not None:
        ok = value < high if high_open else value <= high
    if not ok:
        raise _error(name, "a finite number", _interval(low, high, low_open, high_open), value)
    return float(value)


def check_split_prob(name: str, value) -> float | tuple[float, ...]:
    """A probability in [0, 1], or a non-empty sequence of distinct ones (a grid: their Bayesian mixture)."""
    if isinstance(value, (str, bytes)) or np.ndim(value) == 0:
        return check_float(name, value, 0, 1)
    grid = tuple(value)
    try:
        probs = tuple(check_float(name, s, 0, 1) for s in grid)
    except ValueError:
        raise _error(name, "a number or a sequence of numbers", "in [0, 1]", value) from None
    if not probs or len(set(probs)) != len(probs):
        raise _error(name, "a number or a non-empty sequence of distinct numbers", "in [0, 1]", value)
    return probs


def check_power_of_two(name: str, value, low: int, high: int) -> int:
    """``value`` as an int in ``[low, high]`` that is a power of two."""
    if not (_is_whole(value) and low <= value <= high and int(value) & (int(value) - 1) == 0):
        raise _error(name, "a power of two", _interval(low, high), value)
    return int(value)


def check_choice(name: str, value, choices: Sequence[str]) -> str:
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, choices))}, got {value!r}")
    return value


def check_bool(name: str, value) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be True or False, got {value!r}")
    return bool(value)


def check_layer_sizes(name: str, value) -> tuple[int, ...]:
    """A non-empty sequence of positive layer widths whose last is 1 (the output neuron), as a tuple."""
    wanted = f"{name} must be a sequence of positive integers ending in 1, e.g. (50, 25, 1), got {value!r}"
    if isinstance(value, (str, bytes)) or not isinstance(value, (Sequence, np.ndarray)) or len(value) == 0:
        raise ValueError(wanted)
    sizes = tuple(check_int(f"{name}[{i}]", size, 1) for i, size in enumerate(value))
    if sizes[-1] != 1:
        raise ValueError(wanted)
    return sizes


Rule = Callable[[str, Any], Any]

GLN_RULES: dict[str, Rule] = {
    "layer_sizes": check_layer_sizes,
    "context_bits": partial(check_int, low=0, high=MAX_CONTEXT_BITS),
    "learning_rate": partial(check_float, low=0, low_open=True),
    "n_classes": partial(check_int, low=2, high=MAX_CLASSES),
    "weight_init": partial(check_choice, choices=WEIGHT_INITS),
    "prob_eps": partial(check_float, low=0, high=0.5, low_open=True, high_open=True),
    "max_weight": partial(check_float, low=0, low_open=True),
    "seed": partial(check_int, low=0, high=MAX_SEED),
}
POOL_RULES: dict[str, Rule] = {  # the pool's settings: the fields of ``nctl.Pool``
    "size": partial(check_int, low=0, high=MAX_POOL_SIZE),
    "min_segment": partial(check_power_of_two, low=1, high=MAX_MIN_SEGMENT),
    "reservoir_size": partial(check_int, low=1, high=MAX_RESERVOIR_SIZE),
    "refine_threshold": check_float,
    "skip_threshold": check_float,
    "joint_evidence": check_bool,
    "eviction": partial(check_choice, choices=EVICTION_POLICIES),
    "trained_members": partial(check_optional_int, low=1, high=MAX_POOL_SIZE),
}
# The pool's settings as flat keywords (the experiments' ``nctl`` group, and the learners' keywords before
# ``nctl.Pool``): keyword -> field
POOL_KEYWORDS = {"pool_size": "size", **{name: name for name in POOL_RULES if name != "size"}}
TREE_RULES: dict[str, Rule] = {
    "depth": partial(check_optional_int, low=0, high=MAX_DEPTH),
    "split_prob": check_split_prob,
}
FMN_RULES: dict[str, Rule] = {  # the Forget-Me-Not settings as flat keywords: the pool's and the tree's
    **{keyword: POOL_RULES[name] for keyword, name in POOL_KEYWORDS.items()}, **TREE_RULES}
NCTL_RULES: dict[str, Rule] = {**GLN_RULES, **FMN_RULES}


def checked(rules: dict[str, Rule], values: dict[str, Any]) -> dict[str, Any]:
    """Every entry of ``values`` checked by its rule; ValueError for a name without a rule."""
    unknown = sorted(set(values) - set(rules))
    if unknown:
        raise ValueError(f"unknown parameter(s) {', '.join(unknown)}; valid: {', '.join(rules)}")
    return {name: rules[name](name, value) for name, value in values.items()}


def check_fields(obj, rules: dict[str, Rule]) -> None:
    """Check the attributes of ``obj`` named in ``rules`` and store their canonical values."""
    for name, value in checked(rules, {name: getattr(obj, name) for name in rules}).items():
        setattr(obj, name, value)
