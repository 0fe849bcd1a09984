"""The pool's settings as one object (``nctl.Pool``): what every Forget-Me-Not process of a learner
remembers, when it stores a state and what it gives up ([algorithm §4](algorithm.md#4-the-forget-me-not-process)).
A learner takes it as one parameter, ``NCTL(pool=nctl.Pool(size=7, min_segment=128))``, as river's models
take an optimizer; it is checked once, when it is made, and cannot change afterwards.

>>> import nctl
>>> nctl.Pool(size=7, eviction="spacing").min_segment
32
>>> nctl.Pool(min_segment=48)
Traceback (most recent call last):
ValueError: Pool.min_segment must be a power of two in [1, 1073741824], got 48
"""

from __future__ import annotations

import dataclasses
import warnings
from dataclasses import dataclass
from functools import wraps

from nctl.core.pool import PoolConfig
from nctl.params import POOL_KEYWORDS, POOL_RULES


@dataclass(frozen=True)
class Pool:
    """The pool of remembered states of every neuron of an NCTL learner.

    Args:
        size: stored states per neuron (``k``); a segment mixes ``k + 1`` members with the fresh one. 0 makes
            every neuron a Partition Tree Weighting of fresh models (§4.9).
        min_segment: ``L_min``, a power of two: segments shorter than this never change the pool.
        reservoir_size: examples kept per segment to score candidates at a pool update.
        refine_threshold: ``alpha``: the winner replaces its parent entry when it beats it by more.
        skip_threshold: ``beta``: the winner is not stored when the pool explains the segment better by more.
        joint_evidence: score the pool's evidence jointly over the segment instead of per example.
        eviction: what leaves a full pool: ``"fifo"`` (the paper's: the oldest) or ``"spacing"`` (states kept
            spread over the whole past).
        trained_members: bounded mode (§5.3): train only the ``B`` most probable members of every node;
            ``None`` trains all (exact NCTL).
    """

    size: int = 15
    min_segment: int = 32
    reservoir_size: int = 100
    refine_threshold: float = 0.0
    skip_threshold: float = 0.0
    joint_evidence: bool = False
    eviction: str = "fifo"
    trained_members: int | None = None

    def __post_init__(self) -> None:
        for name, rule in POOL_RULES.items():
            object.__setattr__(self, name, rule(f"Pool.{name}", getattr(self, name)))
        if self.trained_members is not None and self.trained_members > self.size:
            raise ValueError(f"Pool.trained_members must be None or in 1..size ({self.size}), "
                             f"got {self.trained_members}")

    def config(self) -> PoolConfig:
        """The engine's pool configuration (``nctl.core.pool.PoolConfig``)."""
        return PoolConfig(self.size, self.min_segment, self.reservoir_size, self.refine_threshold,
                          self.skip_threshold, self.joint_evidence, self.eviction, self.trained_members)

    def as_keywords(self) -> dict:
        """The settings as the flat keywords of ``POOL_KEYWORDS`` (the experiments' ``nctl`` group)."""
        return {keyword: getattr(self, name) for keyword, name in POOL_KEYWORDS.items()}


def check_pool(name: str, value) -> Pool:
    """``value``, a ``Pool``; a dict of its fields (a save's parameters) becomes one."""
    if isinstance(value, dict):
        unknown = sorted(set(value) - set(POOL_RULES))
        if unknown:
            raise ValueError(f"{name} has unknown field(s) {', '.join(unknown)}; a Pool's: {', '.join(POOL_RULES)}")
        return Pool(**value)
    if not isinstance(value, Pool):
        raise ValueError(f"{name} must be an nctl.Pool, e.g. nctl.Pool(size=7), got {value!r}")
    return value


def with_pool(params: dict, default: Pool = Pool()) -> dict:
    """``params`` with the pool's flat keywords (``POOL_KEYWORDS``: ``pool_size``, ``min_segment``, ...) taken
    out and set on its ``pool`` (``default`` where it has none, or None): how the experiments' flat settings
    and old saves become a learner's parameters."""
    flat = {POOL_KEYWORDS[key]: params[key] for key in POOL_KEYWORDS if key in params}
    rest = {key: value for key, value in params.items() if key not in POOL_KEYWORDS}
    if not flat:
        return rest
    pool = default if rest.get("pool") is None else check_pool("pool", rest["pool"])
    return {**rest, "pool": dataclasses.replace(pool, **flat)}


def accepts_pool_keywords(init, default: Pool):
    """``init``, a constructor with a ``pool`` parameter, that also takes the pool's settings as the flat
    keywords of earlier releases (``pool_size=7``), each with a DeprecationWarning; its signature stays
    ``init``'s own (what river and scikit-learn read)."""
    @wraps(init)
    def constructor(self, *args, **kwargs):
        old = sorted(key for key in kwargs if key in POOL_KEYWORDS)
        if old:
            keywords, fields = (", ".join(f"{key}=..." for key in old),
                                ", ".join(POOL_KEYWORDS[key] for key in old))
            warnings.warn(f"{type(self).__name__}({keywords}) is deprecated and will be removed in the next release: "
                          f"pass pool=nctl.Pool(...) (fields {fields})", DeprecationWarning, stacklevel=2)
            kwargs = with_pool(kwargs, default)
        init(self, *args, **kwargs)

    return constructor


def default_pool(learner: type) -> Pool | None:
    """The default of a dataclass learner's ``pool`` field; None for a learner without a pool."""
    field = getattr(learner, "__dataclass_fields__", {}).get("pool")
    return None if field is None else field.default


def pool_keywords(cls):
    """A dataclass learner whose constructor also takes the flat keywords (``accepts_pool_keywords``), set on
    its ``pool`` field's default."""
    cls.__init__ = accepts_pool_keywords(cls.__init__, default_pool(cls))
    return cls
