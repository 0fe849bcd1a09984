"""``MLPLearner``: the thin mutable wrapper around :mod:`nctl.baselines.mlp_core`."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np

from nctl import compilation
from nctl.baselines import mlp_core
from nctl.baselines.mlp_core import MLPConfig, Regulariser
from nctl.deferred import jax, jnp

PAPER_HIDDEN = (1000, 250)  # MLP 1000-250-1 of the paper's EWC and Elec2 baselines (section 5.2)
ELEC2_LEARNING_RATE = 1e-4  # the paper's Elec2 MLP (section 5.3)
ELEC2_BATCH_SIZE = 20


class MLPLearner:
    """An MLP trained online (predict, then one optimizer step per ``batch_size`` examples).

    Follows the learner contract: ``learn_one``, ``learn_many`` (returns the pre-update predictions,
    equal to a loop of ``predict_proba_one`` + ``learn_one``), ``predict_proba_one``,
    ``predict_proba_many`` (frozen) and ``copy``. With a ``regulariser`` (EWC, Online EWC) its
    penalty is added to the loss and ``consolidate`` records a task's importance at a boundary.
    Defaults are the paper's Elec2 MLP: 1000-250 ReLU, Adam, lr 1e-4, batch 20.
    """

    def __init__(
        self,
        n_features: int,
        *,
        hidden: tuple[int, ...] = PAPER_HIDDEN,
        n_classes: int = 2,
        learning_rate: float = ELEC2_LEARNING_RATE,
        batch_size: int = ELEC2_BATCH_SIZE,
        optimizer: str = "adam",
        regulariser: Regulariser | None = None,
        seed: int = 0,
    ) -> None:
        self.config = MLPConfig(
            n_features=n_features,
            hidden=tuple(hidden),
            n_classes=n_classes,
            learning_rate=float(learning_rate),
            batch_size=batch_size,
            optimizer=optimizer,
        )
        self.regulariser = regulariser
        self.seed = seed
        compilation.default_cache()  # on in the first learner of a process, as nctl's own learners on JAX do
        self.state_ = mlp_core.init_state(self.config, jax.random.key(seed))
        self.regulariser_state_: Any = (
            None if regulariser is None else regulariser.init(self.state_.params)
        )

    @property
    def params_(self) -> mlp_core.Params:
        return self.state_.params

    def _inputs(self, X: np.ndarray) -> jax.Array:
        X = np.asarray(X)
        if X.ndim != 2 or X.shape[1] != self.config.n_features:
            raise ValueError(f"X must have shape [n, {self.config.n_features}], got {X.shape}")
        return jnp.asarray(X, jnp.float32)

    def _labels(self, y: np.ndarray, n: int) -> jax.Array:
        y = np.asarray(y)
        if y.shape != (n,):
            raise ValueError(f"y must have shape [{n}], got {y.shape}")
        if y.size and (y.min() < 0 or y.max() >= self.config.n_classes):
            raise ValueError(f"labels must lie in 0..{self.config.n_classes - 1}")
        return jnp.asarray(y, jnp.int32)

    def learn_many(self, X: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Predict-then-learn each row of ``X [n, d]``; returns the pre-update predictions."""
        X = self._inputs(X)
        y = self._labels(y, X.shape[0])
        if X.shape[0] == 0:
            return np.empty(
                (0,) if self.config.n_classes == 2 else (0, self.config.n_classes), np.float32
            )
        self.state_, probabilities = mlp_core.learn(
            self.config, self.regulariser, self.state_, self.regulariser_state_, X, y
        )
        return np.asarray(probabilities)

    def learn_one(self, x: np.ndarray, y: int) -> None:
        self.learn_many(np.asarray(x)[None], np.array([y]))

    def predict_proba_many(self, X: np.ndarray) -> np.ndarray:
        return np.asarray(mlp_core.predict_proba(self.config, self.state_.params, self._inputs(X)))

    def predict_proba_one(self, x: np.ndarray) -> float | np.ndarray:
        probability = self.predict_proba_many(np.asarray(x)[None])[0]
        return float(probability) if self.config.n_classes == 2 else probability

    def copy(self) -> MLPLearner:
        """An independent snapshot.

        A shallow copy suffices: the state is immutable JAX arrays, and every update rebinds
        ``state_`` / ``regulariser_state_`` instead of changing them in place.
        """
        return copy.copy(self)

    def consolidate(self, X: np.ndarray, y: np.ndarray) -> None:
        """At a task boundary: finish the pending mini-batch, then let the regulariser record the
        task from the parameters and the examples ``X [n, d]``, ``y [n]`` of the task just learned.
        """
        if self.regulariser is None:
            raise ValueError("consolidate needs a regulariser (e.g. nctl.baselines.EWC())")
        X = self._inputs(X)
        y = self._labels(y, X.shape[0])
        self.state_ = mlp_core.flush(
            self.config, self.regulariser, self.state_, self.regulariser_state_
        )
        self.regulariser_state_ = self.regulariser.consolidate(
            self.regulariser_state_, self.config, self.state_.params, X, y
        )
