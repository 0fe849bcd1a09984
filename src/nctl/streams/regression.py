"""Regression streams: rows of real features and a real target, in the order they are learned.

A ``RegressionStream`` holds every row in memory (the streams here have at most tens of thousands of
rows) together with the concept each row comes from, where it is known: the synthetic streams know
theirs, the real ones are one unlabelled sequence (a single "concept" 0). Learners only ever see the
features and the target; the concepts are there for the metrics (the error on rows of a concept seen
before). The river data sets are bundled with river (no download); river is imported only when one
is built.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import islice
from typing import Iterator

import numpy as np

FRIEDMAN_FEATURES = 10  # river's FriedmanDrift: ten uniform features, the first five relevant


@dataclass(frozen=True, eq=False)
class RegressionStream:
    """``features[t]`` and ``targets[t]`` are row ``t``; ``concept_of_step[t]`` its concept (0 throughout
    when the concepts are not known)."""

    name: str
    features: np.ndarray  # [T, d] float64
    targets: np.ndarray  # [T] float64
    feature_names: tuple[str, ...]
    concept_of_step: np.ndarray  # [T] int32

    def __post_init__(self) -> None:
        n = len(self.targets)
        if self.features.shape != (n, len(self.feature_names)) or self.concept_of_step.shape != (n,):
            raise ValueError(f"a stream of {n} targets needs features [{n}, {len(self.feature_names)}] and "
                             f"concept_of_step [{n}]; got {self.features.shape} and {self.concept_of_step.shape}")

    def __len__(self) -> int:
        return int(self.targets.shape[0])

    @property
    def n_features(self) -> int:
        return len(self.feature_names)

    def segments(self) -> list[tuple[int, int, int]]:
        """``(concept, start, stop)`` of each maximal run of one concept."""
        if not len(self):
            return []
        starts = np.concatenate([[0], np.flatnonzero(np.diff(self.concept_of_step)) + 1])
        stops = np.append(starts[1:], len(self))
        return [(int(self.concept_of_step[a]), int(a), int(b)) for a, b in zip(starts, stops)]

    def revisits(self) -> np.ndarray:
        """bool [T]: the rows of a segment whose concept already had an earlier segment."""
        seen, out = set(), np.zeros(len(self), bool)
        for concept, start, stop in self.segments():
            out[start:stop] = concept in seen
            seen.add(concept)
        return out

    def head(self, n: int | None) -> "RegressionStream":
        """The first ``n`` rows (all of them for None)."""
        if n is None or n >= len(self):
            return self
        return RegressionStream(self.name, self.features[:n], self.targets[:n], self.feature_names,
                                self.concept_of_step[:n])

    def __iter__(self) -> Iterator[tuple[dict, float]]:
        """river's rows: ``({name: value}, target)`` with Python floats."""
        for x, y in zip(self.features.tolist(), self.targets.tolist()):
            yield dict(zip(self.feature_names, x)), y


def _from_river(name: str, rows, n: int | None = None, concept_of_step: np.ndarray | None = None) -> RegressionStream:
    """The first ``n`` (all, for None) ``(dict, target)`` rows of a river data set as a stream."""
    rows = list(islice(rows, n))
    names = tuple(rows[0][0])
    features = np.array([[float(x[k]) for k in names] for x, _ in rows], np.float64)
    targets = np.array([float(y) for _, y in rows], np.float64)
    concepts = np.zeros(len(rows), np.int32) if concept_of_step is None else concept_of_step
    return RegressionStream(name, features, targets, names, concepts)


def friedman_gra(seed: int = 0, *, n_rows: int = 12_000,
                 position: tuple[int, int] = (4_000, 8_000)) -> RegressionStream:
    """river's ``FriedmanDrift`` with a global recurring abrupt drift (``drift_type="gra"``): the first
    ``n_rows`` rows, concept 0 (Friedman's function of features 0-4) before ``position[0]``, concept 1
    (the same function of the relevant features swapped) from ``position[0]`` and concept 0 again from
    ``position[1]``; the features and noise are drawn by ``seed``. With ``n_rows=90, position=(30, 60)``
    the segments are ``[(0, 0, 30), (1, 30, 60), (0, 60, 90)]`` (tests/test_regression_experiment.py).
    """
    from river.datasets import synth

    first, second = position
    if not 0 < first < second:
        raise ValueError(f"position must be two increasing steps > 0, got {position}")
    steps = np.arange(n_rows)
    concepts = ((steps >= first) & (steps < second)).astype(np.int32)
    data = synth.FriedmanDrift(drift_type="gra", position=(first, second), seed=seed)
    return _from_river("friedman-gra", iter(data), n_rows, concepts)


def trump_approval() -> RegressionStream:
    """river's ``TrumpApproval``: 1,001 days, five pollsters' approval ratings and the date as features,
    FiveThirtyEight's approval estimate as the target; one fixed sequence."""
    from river import datasets

    return _from_river("trump-approval", iter(datasets.TrumpApproval()))


def chick_weights() -> RegressionStream:
    """river's ``ChickWeights``: 578 weighings (time, chick, diet as features; the weight as the target),
    ordered by time then chick; one fixed sequence."""
    from river import datasets

    return _from_river("chick-weights", iter(datasets.ChickWeights()))
