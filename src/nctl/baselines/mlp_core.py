"""Pure-JAX core of an online multi-layer perceptron trained with optax.

Parameters are a tuple of ``(W [inputs, outputs], b [outputs])`` layers in float32; hidden layers
use ReLU; the output is one logit with a sigmoid (binary) or K logits with a softmax (K > 2).

Online mini-batch learning without a buffer of examples: each arriving example is first predicted
with the current parameters, then its loss gradient is added to ``grad_sum``; when ``batch_size``
gradients have accumulated one optimizer step is taken on their mean (plus the gradient of an
optional penalty). Because the parameters do not change inside a mini-batch, this equals one step
on the mean mini-batch loss, and ``learn`` over n examples equals n calls over one example.

Functions take a hashable ``MLPConfig`` (and regulariser) as static arguments, so every learner
with the same configuration shares one compiled function.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any, NamedTuple, Protocol, TypeAlias

from nctl import deferred
from nctl.deferred import Deferred, jax, jnp

optax = Deferred("optax")

Params: TypeAlias = "tuple[tuple[jax.Array, jax.Array], ...]"  # ((W [n_in, n_out], b [n_out]), ...) float32
OPTIMIZERS = ("adam", "sgd")  # optax's optimizers of these names


@dataclass(frozen=True)
class MLPConfig:
    """Hyper-parameters of an online MLP (hashable: used as a static argument of jit)."""

    n_features: int
    hidden: tuple[int, ...]
    n_classes: int
    learning_rate: float
    batch_size: int
    optimizer: str

    def __post_init__(self) -> None:
        if self.n_features < 1:
            raise ValueError(f"n_features must be positive, got {self.n_features}")
        if any(width < 1 for width in self.hidden):
            raise ValueError(f"hidden layer widths must be positive, got {self.hidden}")
        if self.n_classes < 2:
            raise ValueError(f"n_classes must be at least 2, got {self.n_classes}")
        if not self.learning_rate > 0:
            raise ValueError(f"learning_rate must be positive, got {self.learning_rate}")
        if self.batch_size < 1:
            raise ValueError(f"batch_size must be positive, got {self.batch_size}")
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(
                f"optimizer must be one of {sorted(OPTIMIZERS)}, got {self.optimizer!r}"
            )

    @property
    def n_outputs(self) -> int:
        return 1 if self.n_classes == 2 else self.n_classes

    def make_optimizer(self) -> optax.GradientTransformation:
        return getattr(optax, self.optimizer)(self.learning_rate)


class Regulariser(Protocol):
    """A penalty added to the training loss, with its own state (EWC, Online EWC).

    Implementations are frozen dataclasses (hashable by value: a static argument of jit).
    """

    def init(self, params: Params) -> Any: ...

    def penalty(self, params: Params, state: Any) -> jax.Array: ...

    def consolidate(
        self, state: Any, config: MLPConfig, params: Params, X: jax.Array, y: jax.Array
    ) -> Any: ...


class MLPState(NamedTuple):
    params: Params
    opt_state: optax.OptState
    grad_sum: Params  # sum of the per-example gradients of the unfinished mini-batch
    n_pending: jax.Array  # int32 [] examples in the unfinished mini-batch


def init_params(config: MLPConfig, key: jax.Array) -> Params:
    """Weights and biases ~ U(-1/sqrt(n_in), 1/sqrt(n_in)) per layer (PyTorch's Linear default)."""
    widths = (config.n_features, *config.hidden, config.n_outputs)
    layers = []
    layer_keys = jax.random.split(key, len(widths) - 1)
    for layer_key, n_in, n_out in zip(layer_keys, widths[:-1], widths[1:]):
        bound = 1.0 / n_in**0.5
        w_key, b_key = jax.random.split(layer_key)
        W = jax.random.uniform(w_key, (n_in, n_out), jnp.float32, -bound, bound)
        b = jax.random.uniform(b_key, (n_out,), jnp.float32, -bound, bound)
        layers.append((W, b))
    return tuple(layers)


def logits(params: Params, x: jax.Array) -> jax.Array:
    """``[n_outputs]`` logits of one example ``x [n_features]``: ReLU hidden layers, linear out."""
    h = x
    for W, b in params[:-1]:
        h = jax.nn.relu(h @ W + b)
    W, b = params[-1]
    return h @ W + b


def _probability(config: MLPConfig, z: jax.Array) -> jax.Array:
    return jax.nn.sigmoid(z[0]) if config.n_classes == 2 else jax.nn.softmax(z)


def _negative_log_likelihood(config: MLPConfig, z: jax.Array, y: jax.Array) -> jax.Array:
    """``-ln p(y | z)`` for logits ``z [n_outputs]``.

    Binary: ``ln(1 + e^z) - y z`` (sigmoid cross-entropy); multiclass: ``logsumexp(z) - z_y``.
    """
    if config.n_classes == 2:
        return jax.nn.softplus(z[0]) - y.astype(jnp.float32) * z[0]
    return jax.nn.logsumexp(z) - z[y]


def example_loss(
    config: MLPConfig, params: Params, x: jax.Array, y: jax.Array
) -> tuple[jax.Array, jax.Array]:
    """Negative log-likelihood ``-ln p(y | x)`` of one example, and the predicted probability."""
    z = logits(params, x)
    return _negative_log_likelihood(config, z, y), _probability(config, z)


def init_state(config: MLPConfig, key: jax.Array) -> MLPState:
    params = init_params(config, key)
    return MLPState(
        params=params,
        opt_state=config.make_optimizer().init(params),
        grad_sum=jax.tree.map(jnp.zeros_like, params),
        n_pending=jnp.zeros((), jnp.int32),
    )


@deferred.jit(static_argnames="config")
def predict_proba(config: MLPConfig, params: Params, X: jax.Array) -> jax.Array:
    """Frozen predictions for ``X [n, n_features]``: ``[n]`` P(y=1) or ``[n, K]``."""
    return jax.vmap(lambda x: _probability(config, logits(params, x)))(X)


def _apply_step(
    config: MLPConfig, regulariser: Regulariser | None, state: MLPState, reg_state: Any
) -> MLPState:
    """One optimizer step on ``g = grad_sum / n_pending + grad penalty(params)``; empties the batch.

    (With no regulariser the penalty term is absent.)
    """
    mean_grad = jax.tree.map(lambda g: g / state.n_pending.astype(jnp.float32), state.grad_sum)
    if regulariser is not None:
        penalty_grad = jax.grad(regulariser.penalty)(state.params, reg_state)
        mean_grad = jax.tree.map(jnp.add, mean_grad, penalty_grad)
    updates, opt_state = config.make_optimizer().update(mean_grad, state.opt_state, state.params)
    return MLPState(
        params=optax.apply_updates(state.params, updates),
        opt_state=opt_state,
        grad_sum=jax.tree.map(jnp.zeros_like, state.grad_sum),
        n_pending=jnp.zeros((), jnp.int32),
    )


@deferred.jit(static_argnames=("config", "regulariser"))
def learn(
    config: MLPConfig,
    regulariser: Regulariser | None,
    state: MLPState,
    reg_state: Any,
    X: jax.Array,  # [n, n_features] float32
    y: jax.Array,  # [n] int32
) -> tuple[MLPState, jax.Array]:
    """Predict-then-learn over ``X``, in order.

    Returns the new state and the ``[n]``/``[n, K]`` predictions made before each example's update.
    """
    grad_fn = jax.grad(partial(example_loss, config), has_aux=True)

    def step(state: MLPState, example: tuple[jax.Array, jax.Array]) -> tuple[MLPState, jax.Array]:
        grad, probability = grad_fn(state.params, *example)
        state = state._replace(
            grad_sum=jax.tree.map(jnp.add, state.grad_sum, grad), n_pending=state.n_pending + 1
        )
        state = jax.lax.cond(
            state.n_pending == config.batch_size,
            lambda s: _apply_step(config, regulariser, s, reg_state),
            lambda s: s,
            state,
        )
        return state, probability

    return jax.lax.scan(step, state, (X, y))


@deferred.jit(static_argnames=("config", "regulariser"))
def flush(
    config: MLPConfig, regulariser: Regulariser | None, state: MLPState, reg_state: Any
) -> MLPState:
    """Take the optimizer step of an unfinished mini-batch now (no-op when it is empty)."""
    return jax.lax.cond(
        state.n_pending > 0,
        lambda s: _apply_step(config, regulariser, s, reg_state),
        lambda s: s,
        state,
    )


def _summed_loss_with_offsets(
    config: MLPConfig,
    params: Params,
    X: jax.Array,  # [n, n_features]
    y: jax.Array,  # [n]
    offsets: list[jax.Array],  # per layer [n, n_out], added to the pre-activations
) -> tuple[jax.Array, list[jax.Array]]:
    """``sum_n -ln p(y_n | x_n)`` and each layer's input ``[n, n_in]``."""
    h, inputs = X, []
    for index, ((W, b), offset) in enumerate(zip(params, offsets)):
        inputs.append(h)
        z = h @ W + b + offset
        h = jax.nn.relu(z) if index < len(params) - 1 else z
    losses = jax.vmap(partial(_negative_log_likelihood, config))(h, y)
    return jnp.sum(losses), inputs


@deferred.jit(static_argnames="config")
def sum_squared_grads(config: MLPConfig, params: Params, X: jax.Array, y: jax.Array) -> Params:
    """``sum_n (d/d theta (-ln p(y_n | x_n, theta)))^2`` elementwise, ``X [n, d]``, ``y [n]``.

    Without materialising n per-example gradients: for a dense layer ``z = h W + b`` with
    ``delta_n = d loss_n / d z_n`` (a row of the gradient with respect to an offset added to z),
    the per-example gradients are ``h_n delta_n^T`` and ``delta_n``, so their squares sum to
    ``(h^2)^T (delta^2)`` and ``sum_n delta_n^2``.
    """
    offsets = [jnp.zeros((X.shape[0], W.shape[1]), jnp.float32) for W, _ in params]
    loss = partial(_summed_loss_with_offsets, config, params, X, y)
    deltas, inputs = jax.grad(loss, has_aux=True)(offsets)
    return tuple(
        ((h**2).T @ delta**2, jnp.sum(delta**2, axis=0)) for h, delta in zip(inputs, deltas)
    )
