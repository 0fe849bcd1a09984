"""GaussianRows (docs/algorithm.md §8) against the literal reference ``tests/reference/gaussian_gln.py``, the
constraints it keeps, and what a Gaussian neuron learns.

The network runs in float32 and the reference in float64, so they agree to a tolerance, not bit for bit:
1e-4 relative on every prediction of a 200-step stream and on the final weights (float32 rounds at 6e-8
per operation; a few hundred operations per prediction and the steps between them stay far below it)."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import nctl  # noqa: F401  (64-bit mode for the float64 likelihoods)
from nctl.core import gln
from nctl.core.gaussian import GaussianRows
from tests.reference.gaussian_gln import GaussianGLN, Settings

run_chunk = jax.jit(gln.run_chunk, static_argnums=(5,))
predict_many = jax.jit(gln.predict_many, static_argnums=(2,))


def network(rows, n_features, layer_sizes, bits, seed=0):
    gates = gln.network_gates(seed, 1, n_features, layer_sizes, bits)
    layers = jax.vmap(lambda g: gln.init(g, n_features, layer_sizes, bits, rows))(gates)
    planes = [(np.asarray(g.normals[0]), np.asarray(g.offsets[0])) for g in gates]
    return layers, planes


def stream(n, d, seed):
    rng = np.random.default_rng(seed)
    Z = rng.standard_normal((n, d)).astype(np.float32)
    Z[::17, 0] = 7.0  # beyond the features' clip
    y = np.sin(2 * Z[:, 0]) + Z[:, 1] - 0.5 * Z[:, 2] + 0.1 * rng.standard_normal(n)
    y[::23] += 6.0  # outliers: means clipped, weights at the box
    return Z, y.astype(np.float32)


# tight constraints, so that the clips of the weights, the precision and the mean all bind in the stream
TIGHT = dict(learning_rate=0.05, min_variance=0.5, max_variance=4.0, max_weight=1.0, max_mean=2.0)


@pytest.mark.parametrize("settings", [TIGHT, {}], ids=["tight", "defaults"])
def test_network_matches_the_literal_reference_over_a_stream(settings):
    rows = GaussianRows(**settings)
    layer_sizes, d, n = (3, 2, 1), 3, 200
    layers, planes = network(rows, d, layer_sizes, 2)
    Z, y = stream(n, d, seed=1)
    layers, preds = run_chunk(layers, jnp.asarray(Z), jnp.asarray(y), n, jnp.array([0]), rows)
    reference = GaussianGLN(planes, d, Settings(*rows))
    want = reference.run(Z, y)
    np.testing.assert_allclose(np.asarray(preds)[:, 0], want, rtol=1e-4, atol=1e-5)
    for layer, ref_weights in zip(layers, reference.weights):
        np.testing.assert_allclose(np.asarray(layer.weights[0]), np.array(ref_weights), rtol=1e-4, atol=1e-5)
    frozen = np.asarray(predict_many(layers, jnp.asarray(Z[:20]), rows))[:, 0]
    np.testing.assert_allclose(frozen, [reference_forward(reference, z) for z in Z[:20]], rtol=1e-4, atol=1e-5)
    if settings:  # the stream reaches every clip
        w = np.concatenate([np.abs(np.asarray(layer.weights)).ravel() for layer in layers])
        assert (w == rows.max_weight).any()
        assert (np.abs(want[:, 0]) == rows.max_mean).any()
        assert np.isclose(want[:, 1], 1 / rows.min_variance).any()
        assert np.isclose(want[:, 1], 1 / rows.max_variance).any()


def reference_forward(reference, z):
    """The reference's output for ``z`` without learning (its step, on a copy of its weights)."""
    saved = [[[list(r) for r in neuron] for neuron in layer] for layer in reference.weights]
    out = reference.step(z, 0.0)
    reference.weights = saved
    return out


def test_predictions_keep_the_constraints_whatever_the_weights_and_inputs():
    rows = GaussianRows(min_variance=0.05, max_variance=20.0, max_weight=3.0, max_mean=4.0)
    rng = np.random.default_rng(2)
    w = jnp.asarray(rng.normal(0, 10, (500, 6)).astype(np.float32))  # far outside the box, of both signs
    u = jnp.asarray(np.stack([rng.normal(0, 5, (500, 6)), np.exp(rng.normal(0, 2, (500, 6)))], -1).astype(np.float32))
    q = np.asarray(rows.predict(w, u))
    assert np.isfinite(q).all()
    assert (q[:, 1] > 0).all() and (q[:, 1] <= np.float32(1 / 0.05)).all() and (q[:, 1] >= np.float32(1 / 20)).all()
    assert (np.abs(q[:, 0]) <= 4.0).all()
    new = np.asarray(rows.update(w, u, jnp.asarray(q), jnp.asarray(rng.normal(0, 3, 500).astype(np.float32))))
    assert (np.abs(new) <= 3.0).all() and np.isfinite(new).all()
    # the effective weights give the predicted precision, up to float32 rounding of terms as large as theirs
    eff, precision = rows.effective_weights(w, u)
    terms = np.asarray(eff, np.float64) * np.asarray(u[..., 1], np.float64)
    assert (np.abs(terms.sum(1) - np.asarray(precision)) <= 2e-5 * np.abs(terms).sum(1)).all()


def test_the_update_is_a_gradient_step_on_the_neurons_log_loss():
    """Inside every constraint the step is ``w - eta grad`` of ``-log N(x; mu(w), 1/lambda(w))`` (autodiff)."""
    rows = GaussianRows(learning_rate=0.01)
    rng = np.random.default_rng(3)
    u = jnp.asarray(np.stack([rng.normal(0, 1, 5), rng.uniform(0.5, 2, 5)], -1).astype(np.float32))
    w = jnp.asarray(rng.uniform(0.1, 0.5, 5).astype(np.float32))

    def loss(w):
        lam = jnp.dot(w, u[:, 1])
        mu = jnp.dot(w, u[:, 1] * u[:, 0]) / lam
        return -0.5 * jnp.log(lam / (2 * jnp.pi)) + 0.5 * lam * (0.7 - mu) ** 2

    step = np.asarray(rows.update(w, u, rows.predict(w, u), 0.7)) - np.asarray(w)
    np.testing.assert_allclose(step, -0.01 * np.asarray(jax.grad(loss)(w)), rtol=1e-4, atol=1e-8)


def test_a_single_neuron_converges_to_a_stationary_gaussian_target():
    rows = GaussianRows(learning_rate=0.02, min_variance=0.01)
    layers, _ = network(rows, 2, (1,), 0)
    rng = np.random.default_rng(4)
    n = 3000
    Z = rng.standard_normal((n, 2)).astype(np.float32)
    y = (1.5 + 0.5 * rng.standard_normal(n)).astype(np.float32)
    layers, preds = run_chunk(layers, jnp.asarray(Z), jnp.asarray(y), n, jnp.array([0]), rows)
    mean, precision = np.asarray(preds)[-500:, 0].T
    assert abs(mean.mean() - 1.5) < 0.1 and mean.std() < 0.1
    assert abs(1 / precision.mean() - 0.25) < 0.08


def test_likelihoods_are_the_gaussian_density_in_float64():
    rows = GaussianRows()
    q = jnp.array([0.3, 4.0], jnp.float32)
    grid = np.linspace(-6, 6, 20001)
    density = np.asarray(rows.likelihood(q, jnp.asarray(grid)))
    assert density.dtype == np.float64
    assert abs(np.trapezoid(density, grid) - 1) < 1e-9
    assert abs(float(rows.log_likelihood(q, 0.3)) - 0.5 * math.log(4 / (2 * math.pi))) < 1e-12
    np.testing.assert_allclose(np.log(density), np.asarray(rows.log_likelihood(q, jnp.asarray(grid))), rtol=1e-12)


def test_rows_are_a_hashable_static_configuration_with_targets_for_every_network():
    assert hash(GaussianRows()) == hash(GaussianRows()) and GaussianRows() != GaussianRows(learning_rate=0.1)
    assert GaussianRows.kernel is False and GaussianRows.dtype == jnp.float32
    x = GaussianRows().target(jnp.float32(2.5), jnp.array([0, 0]))
    assert x.dtype == jnp.float32 and x.tolist() == [2.5, 2.5]
    u = GaussianRows().base_inputs(jnp.array([9.0, -1.0]))
    assert u.tolist() == [[5.0, 1.0], [-1.0, 1.0], [-1.0, 1.0], [0.0, 1.0], [1.0, 1.0]]
