"""Figures from results files: synthetic results of every kind, laid out as ``nctl run`` writes them."""

import math

import matplotlib.image
import numpy as np
import pytest

from nctl import plots
from nctl.experiments import configs
from nctl.experiments.run import summarise

N_SEEDS = 3
MAX_BYTES = 150_000
TASKS = ["0 vs 1", "2 vs 3", "4 vs 5"]
STEPS_PER_TASK = 100
EVAL_EVERY = 40
T_975_TWO_DOF = 4.302652729911275  # Student t quantile for a 95% interval over 3 seeds


def accuracies(rng, shape):
    """Accuracies as on a test subset of 50 examples."""
    return rng.uniform(0.4, 1.0, size=shape).round(2)


def wavy(rng, n, low, high):
    """A smooth path between ``low`` and ``high`` with a little noise of its own, like a seed's curve."""
    middle, amplitude = (low + high) / 2, (high - low) / 2
    return (middle + 0.8 * amplitude * np.sin(np.linspace(0, 3 * np.pi, n))
            + rng.normal(0, 0.03 * (high - low), n)).tolist()


def evaluation_steps():
    """0, every segment end and the multiples of EVAL_EVERY, as the task-matrix protocol uses."""
    ends = {STEPS_PER_TASK * (i + 1) for i in range(len(TASKS))}
    return sorted({0, *ends, *range(0, STEPS_PER_TASK * len(TASKS) + 1, EVAL_EVERY)})


def task_matrix_seed(rng, seed):
    steps = evaluation_steps()
    end_rows = [steps.index(STEPS_PER_TASK * (i + 1)) for i in range(len(TASKS))]
    learners = {}
    for learner, variants in (("nctl", ("frozen", "adapt50")), ("ewc", ("frozen",))):
        entry = {}
        for variant in variants:
            curve = accuracies(rng, (len(steps), len(TASKS)))
            entry[variant] = {"acc": float(curve[-1].mean()), "bwt": 0.0, "fwt": 0.0, "forgetting": 0.0, "aia": 0.5,
                              "matrix": curve[end_rows].tolist(), "curve": curve.tolist()}
        learners[learner] = {"variants": entry, "curve_steps": steps, "seconds": 1.0, "params": {}}
    return {"seed": seed, "wall_s": 1.0, "steps": steps[-1], "tasks": TASKS, "learners": learners}


def prequential_seed(rng, seed):
    steps = np.linspace(0, 999, 50).astype(int).tolist()
    learners = {name: {"accuracy": 0.8, "log_loss": 0.4, "kappa_temporal": 0.1, "recurring_log_loss": None,
                       "curve_steps": steps, "windowed_accuracy": wavy(rng, 50, 0.6, 0.9),
                       "cumulative_accuracy": wavy(rng, 50, 0.7, 0.8), "windowed_kappa_temporal": wavy(rng, 50, -1, 1),
                       "window": 100, "seconds": 1.0, "params": {}}
                for name in ("nctl", "gln", "no-change", "river:alma")}
    return {"seed": seed, "wall_s": 1.0, "steps": 1000, "log_loss_eps": 1e-6, "learners": learners}


def transfer_seed(rng, seed):
    conditions = {str(n): {"steps": 300, "target": 3, "learners": {
        "nctl": {"target_log_loss": wavy(rng, 20, 0.1, 0.7), "first_log_loss": wavy(rng, 20, 0.1, 0.7),
                 "seconds": 1.0}}} for n in (0, 5, 10)}
    return {"seed": seed, "wall_s": 1.0, "window": 20, "conditions": conditions}


def oracles_seed(rng, seed):
    steps = list(range(0, 400, 10))
    learners = {name: {"log_loss": 0.5, "accuracy": 0.7, "curve_steps": steps,
                       "binned_log_loss": wavy(rng, len(steps), 0.1, 0.7), "seconds": 1.0}
                for name in ("nctl", "oracle-1", "oracle-2", "gln")}
    return {"seed": seed, "wall_s": 1.0, "steps": 400, "segments": 4, "learners": learners}


def substrate_seed(rng, seed):
    return {"seed": seed, "wall_s": 1.0, "steps": 500,
            "learners": {"gln": {"test_accuracy": 0.9, "seconds": 1.0, "examples_per_s": 100.0, "params": {}}}}


SEED_MAKERS = {
    configs.TASK_MATRIX: task_matrix_seed,
    configs.PREQUENTIAL: prequential_seed,
    configs.BACKWARD: transfer_seed,
    configs.FORWARD: transfer_seed,
    configs.ORACLES: oracles_seed,
    configs.SUBSTRATE: substrate_seed,
}
EXPECTED_FIGURES = {
    configs.TASK_MATRIX: ["matrix", "grid"],
    configs.PREQUENTIAL: ["accuracy"],
    configs.BACKWARD: ["logloss"],
    configs.FORWARD: ["logloss"],
    configs.ORACLES: ["logloss"],
    configs.SUBSTRATE: [],
}


def fabricate(kind, n_seeds=N_SEEDS):
    """A results dict of ``kind`` with ``n_seeds`` noisy seeds and their summary."""
    rng = np.random.default_rng(0)
    seeds = [SEED_MAKERS[kind](rng, seed) for seed in range(n_seeds)]
    return {"experiment": f"fake-{kind}", "kind": kind, "description": "synthetic", "config": {"anchors": {}},
            "n_seeds": n_seeds, "interrupted": False, "summary": summarise(seeds), "seeds": seeds}


@pytest.mark.parametrize("n_seeds", [1, N_SEEDS])
@pytest.mark.parametrize("kind", sorted(SEED_MAKERS))
def test_every_kind_gives_its_figures_as_small_valid_pngs(kind, n_seeds, tmp_path):
    paths = plots.plot_results(fabricate(kind, n_seeds), tmp_path / "figures")
    assert [p.name for p in paths] == [f"fake-{kind}-{name}.png" for name in EXPECTED_FIGURES[kind]]
    for path in paths:
        assert path.is_file() and 0 < path.stat().st_size < MAX_BYTES
        image = matplotlib.image.imread(path)
        assert image.ndim == 3 and image.shape[2] in (3, 4) and min(image.shape[:2]) > 200


def test_unknown_kind_is_rejected_with_a_clear_error(tmp_path):
    results = {**fabricate(configs.ORACLES), "kind": "nonsense"}
    with pytest.raises(ValueError, match="nonsense.*known kinds"):
        plots.plot_results(results, tmp_path)
    assert not list(tmp_path.iterdir())


def test_segment_ends_are_found_among_the_evaluations():
    results = fabricate(configs.TASK_MATRIX)
    rows = plots.learner_segment_rows(results, "nctl")
    steps = np.asarray(results["seeds"][0]["learners"]["nctl"]["curve_steps"])
    assert steps[rows].tolist() == [STEPS_PER_TASK * (i + 1) for i in range(len(TASKS))]


def test_a_matrix_row_missing_from_the_curve_is_an_error():
    curve = np.arange(12.0).reshape(4, 3)
    matrix = np.stack([curve[2], curve[1] + 0.5])
    with pytest.raises(ValueError, match="row 1 of the accuracy matrix"):
        plots.segment_end_rows(curve, matrix)


def test_band_is_the_student_t_interval_over_seeds():
    results = fabricate(configs.ORACLES)
    curves = np.array([seed["learners"]["gln"]["binned_log_loss"] for seed in results["seeds"]])
    mean, half_width = plots.mean_and_band(results["summary"]["learners"]["gln"]["binned_log_loss"], scale=100.0)
    expected = T_975_TWO_DOF * curves.std(axis=0, ddof=1) / math.sqrt(N_SEEDS)
    np.testing.assert_allclose(mean, 100.0 * curves.mean(axis=0))
    np.testing.assert_allclose(half_width, 100.0 * expected)


def test_one_seed_has_no_band():
    results = fabricate(configs.ORACLES, n_seeds=1)
    _, half_width = plots.mean_and_band(results["summary"]["learners"]["gln"]["binned_log_loss"])
    assert half_width is None


def test_grid_panel_shows_the_test_task_while_the_row_task_is_trained():
    results = fabricate(configs.TASK_MATRIX)
    figure = plots.grid_figure(results)
    try:
        axes = np.array(figure.axes[: len(TASKS) ** 2]).reshape(len(TASKS), len(TASKS))
        trained, tested = 1, 2
        nctl_frozen, nctl_adapt50, ewc_frozen = axes[trained, tested].lines
        assert nctl_adapt50.get_color() == plots.learner_colour("nctl") and nctl_adapt50.get_linestyle() == "-"
        assert nctl_frozen.get_linestyle() == "--" and ewc_frozen.get_linestyle() == "-"
        steps = np.asarray(results["seeds"][0]["learners"]["nctl"]["curve_steps"])
        span = (steps >= STEPS_PER_TASK) & (steps <= 2 * STEPS_PER_TASK)
        mean = np.asarray(results["summary"]["learners"]["nctl"]["variants"]["adapt50"]["curve"]["mean"])
        np.testing.assert_array_equal(nctl_adapt50.get_xdata(), steps[span] - STEPS_PER_TASK)
        np.testing.assert_allclose(nctl_adapt50.get_ydata(), 100.0 * mean[span, tested])
    finally:
        plots.plt.close(figure)


def test_each_learner_keeps_one_distinct_colour():
    known = ["nctl", "gln", "ewc", "online-ewc", "mlp", "no-change", "oracle-1", "oracle-2"]
    assert len({plots.learner_colour(name) for name in known}) == len(known)
    assert plots.learner_colour("river:something_new") == plots.learner_colour("river:something_new")
