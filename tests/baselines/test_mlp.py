import jax
import numpy as np
import pytest
from baseline_toys import rule_task, stream_of

from nctl.baselines import MLPLearner
from nctl.evaluate import accuracy, adapted, prequential


def separable_task(seed: int = 0):
    return rule_task("separable", lambda X: X[:, 0] + X[:, 1] - X[:, 2] > 0, 600, 300, 4, seed)


def small_mlp(**kwargs) -> MLPLearner:
    settings = dict(hidden=(16,), learning_rate=1e-2, batch_size=1, seed=0)
    return MLPLearner(4, **{**settings, **kwargs})


def test_mlp_learns_a_linearly_separable_stream():
    task = separable_task()
    learner = small_mlp()
    run = prequential(learner, stream_of((task,), [(0, 600)]), chunk_size=256)
    assert np.mean((run.probabilities[-200:] > 0.5) == run.labels[-200:]) > 0.9
    assert accuracy(learner.predict_proba_many(task.test_set()[0]), task.test_set()[1]) > 0.9


@pytest.mark.parametrize("n_classes", [2, 3])
def test_learn_many_equals_a_loop_of_learn_one(n_classes):
    rng = np.random.default_rng(1)
    X = rng.normal(size=(20, 4)).astype(np.float32)
    y = rng.integers(0, n_classes, size=20)
    batched = small_mlp(n_classes=n_classes, batch_size=3)
    looped = batched.copy()

    many = np.concatenate([batched.learn_many(X[:7], y[:7]), batched.learn_many(X[7:], y[7:])])
    one = []
    for x, label in zip(X, y):
        one.append(looped.predict_proba_one(x))
        looped.learn_one(x, label)

    np.testing.assert_allclose(many, np.array(one), atol=1e-6)
    for a, b in zip(jax.tree.leaves(batched.state_), jax.tree.leaves(looped.state_)):
        np.testing.assert_allclose(a, b, atol=1e-6)
    if n_classes > 2:
        np.testing.assert_allclose(many.sum(axis=1), 1.0, atol=1e-5)


def test_one_sgd_step_on_a_mini_batch_by_hand():
    learner = MLPLearner(2, hidden=(), optimizer="sgd", learning_rate=0.1, batch_size=2, seed=3)
    ((W, b),) = learner.params_
    X = np.array([[1.0, 2.0], [-1.0, 0.5]], np.float32)
    y = np.array([1, 0])

    predictions = learner.learn_many(X, y)

    p = 1.0 / (1.0 + np.exp(-(X @ np.asarray(W)[:, 0] + np.asarray(b)[0])))
    np.testing.assert_allclose(predictions, p, rtol=1e-5)  # both predicted before the step
    mean_error = (p - y) / 2  # d/dz of the sigmoid cross-entropy is p - y
    ((W_new, b_new),) = learner.params_
    np.testing.assert_allclose(W_new[:, 0], np.asarray(W)[:, 0] - 0.1 * X.T @ mean_error, rtol=1e-5)
    np.testing.assert_allclose(b_new[0], np.asarray(b)[0] - 0.1 * mean_error.sum(), rtol=1e-5)


def test_state_stays_float32_under_x64():
    assert jax.config.jax_enable_x64  # importing nctl turns 64-bit mode on
    learner = small_mlp(batch_size=2)
    predictions = learner.learn_many(np.ones((5, 4)), np.array([0, 1, 1, 0, 1]))
    assert predictions.dtype == np.float32
    assert {leaf.dtype for leaf in jax.tree.leaves(learner.state_.params)} == {np.dtype(np.float32)}


def test_copy_is_independent_and_adapted_leaves_the_original():
    task = separable_task(seed=2)
    X_test = task.test_set()[0]
    learner = small_mlp()
    learner.learn_many(*task.train_rows(np.arange(10)))
    before = learner.predict_proba_many(X_test)

    with adapted(learner, task, np.random.default_rng(0)) as snapshot:
        after = snapshot.predict_proba_many(X_test)

    np.testing.assert_array_equal(learner.predict_proba_many(X_test), before)
    assert np.max(np.abs(after - before)) > 1e-3


def test_same_seed_same_model():
    x = np.ones(4, np.float32)
    assert small_mlp(seed=5).predict_proba_one(x) == small_mlp(seed=5).predict_proba_one(x)
    assert small_mlp(seed=5).predict_proba_one(x) != small_mlp(seed=6).predict_proba_one(x)


def test_bad_input_is_a_value_error():
    learner = small_mlp()
    with pytest.raises(ValueError, match="shape"):
        learner.learn_many(np.ones((3, 5)), np.zeros(3, int))
    with pytest.raises(ValueError, match="labels"):
        learner.learn_many(np.ones((2, 4)), np.array([0, 2]))
    with pytest.raises(ValueError, match="optimizer"):
        small_mlp(optimizer="lbfgs")
    with pytest.raises(ValueError, match="batch_size"):
        small_mlp(batch_size=0)
    with pytest.raises(ValueError, match="regulariser"):
        learner.consolidate(np.ones((2, 4)), np.array([0, 1]))
