"""nctl.NCTLRegressor: that it recalls a recurring concept where its GLN relearns it, that learn_one and
learn_many agree bit for bit, that save, load and forks continue or restore exactly (target statistics
included), and that bad input is refused with the learner unchanged. (Its equations are checked against a
literal reference in tests/core/test_nctl_gaussian_literal.py.)"""

import doctest
import hashlib
import json
import re
import zipfile
from pathlib import Path

import jax
import numpy as np
import pytest

import nctl
from nctl.pool import Pool

NETWORK = dict(layer_sizes=(8, 1), context_bits=3)
SMALL = dict(**NETWORK, pool=Pool(size=4, min_segment=16, eviction="spacing"), depth=12)  # one set of compiled
# programs for this file


def recurring_stream(n, period=400, seed=0, d=4):
    """Two nonlinear concepts taking turns every ``period`` rows, on raw targets around 50:
    ``y = 50 +- 10 (sin z_0 + z_1^2 / 2 - 1/2)`` plus noise."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)).astype(np.float32)
    s = np.sin(X[:, 0]) + 0.5 * X[:, 1] ** 2 - 0.5
    sign = np.where((np.arange(n) // period) % 2 == 1, -1.0, 1.0)
    return X, 50.0 + 10.0 * sign * s + rng.standard_normal(n)


def digest(model) -> str:
    leaves = jax.tree.leaves(model.state_) + [model.targets_]
    return hashlib.sha256(b"".join(np.asarray(a).tobytes() for a in leaves)).hexdigest()


def test_recalls_a_recurring_concept_where_its_gln_relearns_it():
    X, y = recurring_stream(2400)
    nctl_p = nctl.NCTLRegressor(**SMALL).learn_many(X, y)
    gln_p = nctl.GLNRegressor(**NETWORK).learn_many(X, y)
    revisits = slice(800, 2400)  # each concept has been seen before
    nctl_mae, gln_mae = (np.abs(p[revisits] - y[revisits]).mean() for p in (nctl_p, gln_p))
    assert nctl_mae < 0.85 * gln_mae, (nctl_mae, gln_mae)
    mean_mae = np.abs(y[revisits] - y.mean()).mean()
    assert nctl_mae < 0.8 * mean_mae, (nctl_mae, mean_mae)


def test_its_distribution_is_bounded_and_its_spread_a_real_one():
    X, y = recurring_stream(1200, seed=1)
    model = nctl.NCTLRegressor(**SMALL)
    model.learn_many(X[:1000], y[:1000])
    means, variances = model.predict_distribution_many(X[1000:])
    np.testing.assert_array_equal(means, model.predict_many(X[1000:]))
    scale = y[:1000].std()
    assert (variances >= model.min_variance * scale**2 * (1 - 1e-5)).all()
    errors = np.abs(means - y[1000:])
    assert np.mean(errors < 2 * np.sqrt(variances)) > 0.8


def test_learn_one_and_learn_many_give_identical_predictions_and_states():
    X, y = recurring_stream(200, period=50, seed=2)
    one, many = nctl.NCTLRegressor(**SMALL), nctl.NCTLRegressor(**SMALL)
    p_one = []
    for x, target in zip(X, y):
        p_one.append(one.predict_one(x))
        one.learn_one(x, target)
    p_many = many.learn_many(X, y)
    np.testing.assert_array_equal(np.array(p_one), p_many)
    assert digest(one) == digest(many) and one.t_ == many.t_ == 200


def test_save_and_load_continue_exactly(tmp_path):
    X, y = recurring_stream(300, period=60, seed=3)
    model = nctl.NCTLRegressor(**SMALL, seed=5)
    model.learn_many(X[:200], y[:200])
    model.save(tmp_path / "model.npz")
    loaded = nctl.load(tmp_path / "model.npz")
    assert isinstance(loaded, nctl.NCTLRegressor) and loaded.params() == model.params() and loaded.t_ == 200
    np.testing.assert_array_equal(loaded.targets_, model.targets_)
    np.testing.assert_array_equal(loaded.learn_many(X[200:], y[200:]), model.learn_many(X[200:], y[200:]))
    assert digest(loaded) == digest(model)
    for got, want in zip(loaded.predict_distribution_many(X[:20]), model.predict_distribution_many(X[:20])):
        np.testing.assert_array_equal(got, want)


def test_a_save_with_damaged_target_statistics_is_refused(tmp_path):
    X, y = recurring_stream(40, seed=4)
    model = nctl.NCTLRegressor(**SMALL)
    model.learn_many(X, y)
    model.save(tmp_path / "model.npz")
    with np.load(tmp_path / "model.npz") as data:
        arrays = {name: data[name] for name in data.files}
    meta = json.loads(str(arrays["meta"]))
    meta["shapes"]["targets"] = [40.0, float("nan"), 1.0]
    arrays["meta"] = np.array(json.dumps(meta))
    np.savez(tmp_path / "damaged.npz", **arrays)
    assert zipfile.is_zipfile(tmp_path / "damaged.npz")
    with pytest.raises(ValueError, match="shapes.targets"):
        nctl.load(tmp_path / "damaged.npz")


def test_a_fork_reads_the_rows_learned_and_gives_the_learner_back_exactly():
    X, y = recurring_stream(350, period=60, seed=5)
    model = nctl.NCTLRegressor(**SMALL)
    model.learn_many(X[:250], y[:250])
    plain, adapted_copy = model.copy(), model.copy()
    adapted_copy.learn_many(X[250:280], y[250:280] + 100.0)  # targets far off: the statistics move
    with model.fork(X[250:280], y[250:280] + 100.0) as adapted:
        assert adapted is model  # the journal, not a copy
        np.testing.assert_array_equal(adapted.predict_many(X[:10]), adapted_copy.predict_many(X[:10]))
    np.testing.assert_array_equal(model.targets_, plain.targets_)
    assert model.t_ == plain.t_ == 250
    np.testing.assert_array_equal(model.learn_many(X[280:], y[280:]), plain.learn_many(X[280:], y[280:]))
    np.testing.assert_array_equal(model.predict_many(X[:10]), plain.predict_many(X[:10]))


@pytest.mark.parametrize("call, args, message", [
    ("learn_many", lambda X, y: (X, np.where(np.arange(len(y)) == 3, np.nan, y)), "NaN or infinity"),
    ("learn_many", lambda X, y: (X, y[:-1]), "one target per row"),
    ("learn_many", lambda X, y: (X[:, :-1], y), "must have 4 features"),
    ("learn_one", lambda X, y: (X[0], np.inf), "NaN or infinity"),
    ("learn_one", lambda X, y: (X[0], "high"), "real numbers"),
    ("learn_one", lambda X, y: (X[0], -1e300), r"within \+-1e\+100"),
])
def test_bad_input_is_refused_naming_the_problem_and_the_learner_is_unchanged(call, args, message):
    X, y = recurring_stream(20, seed=6)
    model = nctl.NCTLRegressor(**SMALL)
    model.learn_many(X[:10], y[:10])
    before, t = digest(model), model.t_
    with pytest.raises(ValueError, match=message):
        getattr(model, call)(*args(X[10:], y[10:]))
    assert digest(model) == before and model.t_ == t


def test_settings_are_checked_and_probabilities_are_not_offered():
    with pytest.raises(ValueError, match="min_variance"):
        nctl.NCTLRegressor(min_variance=2.0, max_variance=1.0)
    with pytest.raises(ValueError, match="min_segment"):
        nctl.NCTLRegressor(pool=Pool(min_segment=3))
    assert not hasattr(nctl.NCTLRegressor(), "predict_proba_one")


def test_the_api_pages_example_runs():
    page = Path(__file__).resolve().parents[1] / "docs" / "api-nctl-regressor.md"
    blocks = re.findall(r"```pycon\n(.*?)```", page.read_text(), re.S)
    test = doctest.DocTestParser().get_doctest("\n".join(blocks), {}, page.name, str(page), 0)
    runner = doctest.DocTestRunner()
    runner.run(test)
    assert blocks and runner.summarize(verbose=False).failed == 0


def test_one_rows_distribution_after_rows_kept_back_is_that_of_the_whole_batch():
    X, y = recurring_stream(120, period=30, seed=9)
    streamed, batched = nctl.NCTLRegressor(**SMALL), nctl.NCTLRegressor(**SMALL)
    streamed.learn_many(X[:100], y[:100])
    batched.learn_many(X[:100], y[:100])
    for x, target in zip(X[100:110], y[100:110]):
        streamed.learn_one(x, target)  # kept back: learned with the next prediction, in one call
    batched.learn_many(X[100:110], y[100:110])
    got = streamed.predict_distribution_one(X[110])
    means, variances = batched.predict_distribution_many(X[110:111])
    assert got == (means[0], variances[0]) and streamed.t_ == batched.t_ == 110


@pytest.mark.parametrize("make", [lambda: nctl.NCTLRegressor(**SMALL), lambda: nctl.GLNRegressor(**NETWORK)],
                         ids=["nctl", "gln"])
def test_the_largest_targets_keep_predictions_and_saves_finite(make, tmp_path):
    """Targets at the bound, of both signs, then ordinary ones: statistics, predictions and the saved file
    stay finite, and the save loads."""
    X, y = recurring_stream(40, seed=2)
    model = make()
    model.learn_many(X[:20], np.where(np.arange(20) % 2, 1e100, -1e100))
    model.learn_many(X[20:], y[20:])
    means, variances = model.predict_distribution_many(X[:5])
    assert np.isfinite(means).all() and np.isfinite(variances).all()
    model.save(tmp_path / "big.npz")
    np.testing.assert_array_equal(nctl.load(tmp_path / "big.npz").predict_many(X[:5]), means)
