"""The continual-regression benchmark (issue 57): its streams, its runner and its results files."""

import json
import math

import numpy as np
import pytest

import nctl
from nctl import cli, streams
from nctl.experiments import configs, report, runners, validate
from nctl.experiments.run import run

REGRESSION = [name for name, exp in configs.EXPERIMENTS.items() if exp.kind == configs.REGRESSION]
# a few rows and the smallest network: what is tested is the run, not the learners
TINY = {"max_steps": "48", "network.layer_sizes": "[2, 1]", "network.context_bits": "1", "curve_points": "8"}


def friedman(X):
    """Friedman's function of river's FriedmanDrift before its drift (and after, with gra)."""
    return 10 * np.sin(np.pi * X[:, 0] * X[:, 1]) + 20 * (X[:, 2] - 0.5) ** 2 + 10 * X[:, 3] + 5 * X[:, 4]


def test_the_benchmark_has_the_four_streams_and_the_five_learners():
    assert sorted(configs.get(name).stream for name in REGRESSION) == sorted(validate.REGRESSION_STREAMS)
    for name in REGRESSION:
        assert configs.get(name).learners == validate.REGRESSION_LEARNERS
        exp = configs.get(name)  # the learners' defaults, written out (so a seed store sees them change)
        assert {**exp.network, **exp.nctl} == {k: v for k, v in nctl.NCTLRegressor().params().items()
                                                if k in {**exp.network, **exp.nctl}}
        assert exp.network == {k: v for k, v in nctl.GLNRegressor().params().items() if k in exp.network}


def test_synthetic_regression_takes_turns_a_b_c_and_is_fixed_by_its_seed():
    stream = streams.synthetic_regression(seed=3, segment_length=500, n_segments=6)
    assert len(stream) == 3000 and stream.features.shape == (3000, 5) and stream.targets.shape == (3000,)
    assert stream.segments() == [(k % 3, 500 * k, 500 * (k + 1)) for k in range(6)]
    assert stream.revisits().tolist() == [False] * 1500 + [True] * 1500
    again = streams.synthetic_regression(seed=3, segment_length=500, n_segments=6)
    assert np.array_equal(again.features, stream.features) and np.array_equal(again.targets, stream.targets)
    assert not np.allclose(streams.synthetic_regression(seed=4).targets[:100], stream.targets[:100])
    for concept in range(3):  # each concept scaled to standard deviation about 1, plus the noise
        assert 0.8 < stream.targets[stream.concept_of_step == concept].std() < 1.2
    # the concepts differ, in their level too
    levels = [stream.targets[stream.concept_of_step == c].mean() for c in range(3)]
    assert len({round(level, 1) for level in levels}) == 3
    x, y = next(iter(stream))
    assert list(x) == ["x0", "x1", "x2", "x3", "x4"] and isinstance(y, float)


def test_friedman_gra_changes_concept_at_the_first_position_and_returns_at_the_second():
    stream = streams.friedman_gra(seed=5, n_rows=900, position=(300, 600))
    assert stream.features.shape == (900, 10) and stream.segments() == [(0, 0, 300), (1, 300, 600), (0, 600, 900)]
    assert stream.features.min() >= 0 and stream.features.max() <= 1
    residual = np.abs(stream.targets - friedman(stream.features))
    assert residual[:300].mean() < 1.2 and residual[600:].mean() < 1.2  # concept A, unit noise
    assert residual[300:600].mean() > 3.0  # concept B: the relevant features swapped
    assert stream.revisits().sum() == 300
    with pytest.raises(ValueError, match="two increasing"):
        streams.friedman_gra(position=(600, 300))


def test_the_real_streams_are_one_fixed_sequence():
    trump, chick = streams.trump_approval(), streams.chick_weights()
    assert (len(trump), trump.n_features, len(chick), chick.n_features) == (1001, 6, 578, 3)
    assert trump.segments() == [(0, 0, 1001)] and not chick.revisits().any()
    assert np.array_equal(streams.trump_approval().targets, trump.targets)


def test_progressive_validation_scores_as_rivers_progressive_val_score():
    from river import dummy, evaluate, metrics, preprocessing, stats

    stream = streams.trump_approval().head(200)
    model = preprocessing.StandardScaler() | dummy.StatisticRegressor(stats.Mean())
    means, sigmas = runners.progressive_regression(model, stream, with_dist=False)
    expected = evaluate.progressive_val_score(iter(stream), dummy.StatisticRegressor(stats.Mean()), metrics.MAE())
    assert sigmas is None and math.isclose(np.abs(stream.targets - means).mean(), expected.get(), rel_tol=1e-12)
    log_likelihood = runners.gaussian_log_likelihood(np.array([1.0, 3.0]), np.array([1.0, 1.0]), np.array([1.0, 2.0]))
    assert np.allclose(log_likelihood, [-0.5 * math.log(2 * math.pi), -0.5 - math.log(2) - 0.5 * math.log(2 * math.pi)])


@pytest.mark.parametrize("name", REGRESSION)
def test_a_tiny_run_gives_every_models_metrics_and_a_report(name, tmp_path):
    """Every learner on the recurring stream; on the others every learner but NCTL, which the runner treats
    as it treats the GLN (a river adapter with a predictive distribution) and whose programs would take
    tens of seconds to compile for each stream's number of features."""
    learners = configs.get(name).learners
    if name != "regression-recurring":
        learners = tuple(learner for learner in learners if learner != "nctl")
    exp = configs.get(name).replace({**TINY, "learners": json.dumps(learners)})
    results = run(exp, [0], tmp_path, progress=False)
    stored = json.loads((tmp_path / name / "results.json").read_text())
    assert stored["n_seeds"] == 1 and stored["config"]["name"] == name
    assert stored["versions"]["jax"] and stored["config_hash"] == results["config_hash"]
    seed = results["seeds"][0]
    assert seed["steps"] == 48 and set(seed["learners"]) == set(learners) and seed["peak_rss_bytes"] > 2**20
    for learner, entry in seed["learners"].items():
        assert all(np.isfinite([entry["mae"], entry["rmse"], entry["examples_per_s"]]))
        assert entry["rmse"] >= entry["mae"] > 0 and len(entry["binned_mae"]) == 8
        # a predictive distribution from nctl's learners only; none is made up for river's
        assert (entry["log_likelihood"] is None) == learner.startswith("river:")
    table = report.markdown([stored])
    assert table.count(f"| {name} | river:adaptive_random_forest | progressive | log_likelihood | - |") == 1
    assert f"| {name} | GLN | progressive | mae |" in table


def test_results_round_trip_through_a_seed_store_and_plot(tmp_path, monkeypatch, capsys):
    exp = configs.get("regression-recurring").replace({**TINY, "max_steps": "64", "stream_args.segment_length": "16"})
    store = tmp_path / "store"
    first = run(exp, [0, 1], tmp_path / "a", progress=False, seed_store=store)
    assert sorted(p.name for p in store.iterdir()) == [f"regression-recurring-seed-000{s}.json" for s in (0, 1)]
    assert first["seeds"][0]["learners"]["nctl"]["recurring_mae"] is not None  # rows 48-63: concept 0 again

    def no_run(*args, **kwargs):
        raise AssertionError("a stored seed ran again")

    monkeypatch.setitem(runners.RUNNERS, configs.REGRESSION, no_run)
    again = run(exp, [0, 1], tmp_path / "b", progress=False, seed_store=store)
    assert again["seeds"] == first["seeds"] and again["summary"] == first["summary"]
    (_, merged), = report.load_all([store])
    assert merged["summary"]["learners"]["gln"]["mae"] == first["summary"]["learners"]["gln"]["mae"]
    assert cli.main(["report", str(store)]) == 0 and "| regression-recurring | GLN | progressive | mae |" in \
        capsys.readouterr().out
    assert cli.main(["plot", str(store), "--out", str(tmp_path / "figures")]) == 0
    assert (tmp_path / "figures" / "regression-recurring-mae.png").stat().st_size > 0


def test_settings_of_another_kind_or_learner_are_refused():
    with pytest.raises(ValueError, match="unknown name"):
        validate.check(configs.get("regression-trump").replace({"learners": '["mlp"]'}))
    with pytest.raises(ValueError, match="two increasing"):
        validate.check(configs.get("regression-friedman-gra").replace({"stream_args.position": "[10, 5]"}))
    with pytest.raises(ValueError, match="does not apply"):
        configs.get("regression-trump").replace({"steps_per_task": "10"})
    assert validate.check(configs.get("regression-trump").replace({"network.min_variance": "0.2"})).network == \
        {**configs.REGRESSION_NETWORK, "min_variance": 0.2}
    assert validate.check(configs.get("regression-trump").replace({"nctl.learning_rate": "0.05"})).nctl == \
        {"learning_rate": 0.05}  # NCTL's own network settings
    with pytest.raises(ValueError, match="prob_eps"):
        validate.check(configs.get("regression-trump").replace({"nctl.prob_eps": "0.1"}))
