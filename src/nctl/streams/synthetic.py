"""Built-in recurring-concept streams that need no download: for demos, tests and the regression benchmark.

Features are standard normal (already standardised). Concept c labels x with the half-space
``y = 1[w_c . x > b_c]`` (unit normal w_c, small offset b_c), and training labels are flipped with
probability ``label_noise``. Concepts follow each other cyclically, A B C A B C ..., each
segment ``segment_length`` steps, with no signal at the switches. Test labels are noise-free.

``synthetic_regression`` is its regression counterpart: nonlinear concepts of real targets taking turns.
"""

from __future__ import annotations

import numpy as np

from nctl.streams.base import Task, TaskStream
from nctl.streams.regression import RegressionStream

OFFSET_SCALE = 0.1  # std of the offsets b_c: half-spaces near the origin, classes roughly balanced


def _concept_task(
    index: int,
    normal: np.ndarray,  # [d]
    offset: float,
    n_train: int,
    n_test: int,
    label_noise: float,
    rng: np.random.Generator,
) -> Task:
    d = len(normal)
    train_x = rng.standard_normal((n_train, d)).astype(np.float32)
    flips = rng.random(n_train) < label_noise
    train_y = ((train_x @ normal > offset) ^ flips).astype(np.int64)
    test_x = rng.standard_normal((n_test, d)).astype(np.float32)
    test_y = (test_x @ normal > offset).astype(np.int64)

    def rows(idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        idx = np.asarray(idx)
        return train_x[idx], train_y[idx]

    def test_set() -> tuple[np.ndarray, np.ndarray]:
        return test_x, test_y

    return Task(f"concept {index}", n_train, rows, test_set)


def synthetic(
    seed: int = 0,
    *,
    n_features: int = 10,
    n_concepts: int = 3,
    segment_length: int = 300,
    n_segments: int = 12,
    label_noise: float = 0.05,
    n_test: int = 500,
) -> TaskStream:
    """Recurring half-space concepts (module docstring); deterministic per ``seed``.

    Segment k is concept ``k % n_concepts``; its steps use fresh training rows of that concept in
    order (each training example is seen once). Each concept has ``n_test`` test examples.

    >>> stream = synthetic(seed=0, segment_length=100, n_segments=4)
    >>> len(stream), [task for task, start, stop in stream.segments()]
    (400, [0, 1, 2, 0])
    >>> x, y = stream.tasks[0].test_set()
    >>> x.shape, x.dtype.name, sorted(set(y.tolist()))
    ((500, 10), 'float32', [0, 1])
    """
    if n_features < 1 or n_concepts < 1 or segment_length < 1 or n_segments < 1 or n_test < 0:
        raise ValueError(
            "n_features, n_concepts, segment_length and n_segments must be >= 1 and n_test >= 0; got "
            f"{n_features}, {n_concepts}, {segment_length}, {n_segments}, {n_test}"
        )
    if not 0.0 <= label_noise < 0.5:
        raise ValueError(f"label_noise must be in [0, 0.5), got {label_noise}")
    rng = np.random.default_rng(seed)
    normals = rng.standard_normal((n_concepts, n_features))
    normals /= np.linalg.norm(normals, axis=1, keepdims=True)
    offsets = OFFSET_SCALE * rng.standard_normal(n_concepts)
    segment_concepts = np.arange(n_segments) % n_concepts
    visits = np.bincount(segment_concepts, minlength=n_concepts)
    tasks = tuple(
        _concept_task(c, normals[c], offsets[c], visits[c] * segment_length, n_test, label_noise, rng)
        for c in range(n_concepts)
    )
    task_of_step = np.repeat(segment_concepts, segment_length).astype(np.int32)
    visit_number = np.arange(n_segments) // n_concepts  # how often the concept was seen before
    row_of_step = (visit_number[:, None] * segment_length + np.arange(segment_length)).ravel()
    return TaskStream("synthetic", tasks, task_of_step, row_of_step.astype(np.int64), n_features)


# ----------------------------------------------------------------------------- regression

WAVES = 4  # sinusoids summed by each regression concept
WAVE_SCALE = 1.5  # the standard deviation of a wave's argument w . x over standard normal features
CONCEPT_SAMPLE = 4096  # features drawn to scale each concept to unit standard deviation


def _wave_concept(n_features: int, rng: np.random.Generator):
    """A random smooth nonlinear function of the features: a sum of ``WAVES`` sinusoids of random
    directions, phases and amplitudes, scaled to standard deviation 1 and shifted by a random offset
    of standard deviation 1 (so that concepts also differ in level)."""
    directions = rng.standard_normal((n_features, WAVES)) * WAVE_SCALE / np.sqrt(n_features)
    phases = rng.uniform(0.0, 2.0 * np.pi, WAVES)
    amplitudes = rng.standard_normal(WAVES)
    offset = rng.standard_normal()
    sample = np.sin(rng.standard_normal((CONCEPT_SAMPLE, n_features)) @ directions + phases) @ amplitudes
    scale = 1.0 / sample.std()

    def concept(X: np.ndarray) -> np.ndarray:
        return scale * (np.sin(X @ directions + phases) @ amplitudes) + offset

    return concept


def synthetic_regression(
    seed: int = 0,
    *,
    n_features: int = 5,
    n_concepts: int = 3,
    segment_length: int = 2000,
    n_segments: int = 6,
    noise: float = 0.1,
) -> RegressionStream:
    """Recurring nonlinear regression concepts, unannounced: a ``RegressionStream``.

    Features are standard normal. Concept c's target is ``f_c(x) + noise * e`` (e standard normal), f_c
    a random sum of sinusoids of the features with standard deviation 1 and a random level
    (``_wave_concept``). Segment k (``segment_length`` rows) is concept ``k % n_concepts``, so the
    concepts take turns A B C A B C ...; every row is fresh. Deterministic per ``seed``.

    >>> stream = synthetic_regression(seed=0, segment_length=100, n_segments=4)
    >>> len(stream), stream.n_features, [c for c, start, stop in stream.segments()]
    (400, 5, [0, 1, 2, 0])
    >>> int(stream.revisits().sum())  # the second visit of concept 0
    100
    """
    if n_features < 1 or n_concepts < 1 or segment_length < 1 or n_segments < 1:
        raise ValueError("n_features, n_concepts, segment_length and n_segments must be >= 1; got "
                         f"{n_features}, {n_concepts}, {segment_length}, {n_segments}")
    if not (np.isfinite(noise) and noise >= 0):
        raise ValueError(f"noise must be a finite number >= 0, got {noise}")
    rng = np.random.default_rng(seed)
    concepts = [_wave_concept(n_features, rng) for _ in range(n_concepts)]
    concept_of_step = np.repeat(np.arange(n_segments) % n_concepts, segment_length).astype(np.int32)
    X = rng.standard_normal((len(concept_of_step), n_features))
    y = np.empty(len(concept_of_step))
    for c, concept in enumerate(concepts):
        rows = concept_of_step == c
        y[rows] = concept(X[rows])
    y += noise * rng.standard_normal(len(y))
    names = tuple(f"x{i}" for i in range(n_features))
    return RegressionStream("synthetic-regression", X, y, names, concept_of_step)
