"""Every experiment end to end on a tiny size, and the CLI through its entry point."""

import json

import numpy as np
import pytest

import nctl
from nctl import cli, compilation
from nctl.experiments import configs, executors, report, runners
from nctl.experiments.checkpoint import FileCheckpoint
from nctl.experiments.run import SeedsFailed, write_json, config_folder, run, summarise
from nctl.pool import Pool, with_pool

# two layers: each layer adds seconds to every configuration's compilation (three-layer networks are in
# tests/test_learners.py and tests/test_inspect.py)
SMALL_NETWORK = {"network.layer_sizes": "[6, 1]", "nctl.reservoir_size": "8"}
# 72 steps: a tree of depth 7 also holds the 50 adaptation steps of adapt50 (no enlargement to compile)
PERMUTED_TINY = {"steps_per_task": "24", "max_test": "30", "stream_args.n_tasks": "3", "network.context_bits": "1"}
TINY = {
    "split-mnist": {"steps_per_task": "40", "max_test": "40"},
    "split-mnist-deskewed": {"steps_per_task": "40", "max_test": "40"},
    "split-fashion-mnist": {"steps_per_task": "40", "eval_every": "40", "max_test": "30"},
    "permuted-mnist": PERMUTED_TINY,
    "permuted-mnist-reduced": PERMUTED_TINY,
    "permuted-mnist-deskewed": PERMUTED_TINY,
    "permuted-mnist-deskewed-c256-bounded": PERMUTED_TINY,
    "permuted-mnist-deskewed-c256-exact": PERMUTED_TINY,
    "permuted-mnist-c256-bounded": PERMUTED_TINY,
    "permuted-mnist-deskewed-c256-lr0.003-bounded": PERMUTED_TINY,
    "permuted-mnist-deskewed-c512-lr0.003-bounded2": PERMUTED_TINY,
    "permuted-mnist-deskewed-c1024-lr0.005-bounded1": PERMUTED_TINY,
    "permuted-mnist-deskewed-c1024-lr0.005-bounded1-adapt50": PERMUTED_TINY,
    "free-split-backward": {"conditions": "[0, 1]", "window": "20"},
    "free-split-forward": {"conditions": "[0, 1]", "window": "20"},
    "free-split-oracles": {"stream_args.n_steps": "250"},
    "elec2-5": {"max_steps": "250", "learners": '["nctl-grid", "gln", "mlp", "no-change", "river:hoeffding_adaptive_tree", '
                                                 '"river:adaptive_random_forest", "river:logistic_regression", '
                                                 '"river:leveraging_bagging"]'},
    "elec2-8": {"max_steps": "250", "learners": '["nctl", "no-change", "river:alma"]'},
    "mnist-gln": {"max_steps": "300"},
    "mnist-gln-deskewed": {"max_steps": "300", "network.context_bits": "2"},
}
# the regression experiments run end to end on a tiny size in tests/test_regression_experiment.py
REGRESSION = {name for name, exp in configs.EXPERIMENTS.items() if exp.kind == configs.REGRESSION}


# experiments that vary another only in their stream's data (deskewed, reduced) or in NCTL's settings
# (bounded), run by the same runner with the same learners: the one they vary runs end to end, and each
# variant builds its stream and learners (test_a_variant_builds_its_stream_and_learners)
VARIANTS = {"split-mnist-deskewed": "split-mnist", "permuted-mnist-reduced": "permuted-mnist",
            "permuted-mnist-deskewed": "permuted-mnist", "permuted-mnist-deskewed-c256-bounded": "permuted-mnist",
            "permuted-mnist-deskewed-c256-exact": "permuted-mnist",
            "permuted-mnist-c256-bounded": "permuted-mnist",
            "permuted-mnist-deskewed-c256-lr0.003-bounded": "permuted-mnist",
            "permuted-mnist-deskewed-c512-lr0.003-bounded2": "permuted-mnist",
            "permuted-mnist-deskewed-c1024-lr0.005-bounded1": "permuted-mnist",
            "permuted-mnist-deskewed-c1024-lr0.005-bounded1-adapt50": "permuted-mnist",
            "mnist-gln-deskewed": "mnist-gln"}


def test_every_experiment_has_a_tiny_setting():
    assert set(TINY) | REGRESSION | {"demo"} == set(configs.EXPERIMENTS)


@pytest.mark.data
@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_a_variant_builds_its_stream_and_learners(name, mnist_dir):
    exp, varied = configs.get(name).replace({**SMALL_NETWORK, **TINY[name]}), configs.get(VARIANTS[name])
    assert (exp.kind, exp.stream) == (varied.kind, varied.stream)
    run_alike = {learner for other in set(TINY) - set(VARIANTS) if configs.get(other).kind == exp.kind
                 for learner in configs.get(other).learners}
    assert set(exp.learners) <= run_alike  # each learner runs end to end in an experiment of this kind
    stream = runners.make_stream(exp, 0, mnist_dir)
    assert stream.n_features == 784 and len(stream) > 0
    for learner in exp.learners:  # every setting accepted by its learner (nothing is compiled)
        assert runners.learner_params(learner, exp, stream, 0)["seed"] == 0


@pytest.mark.data
@pytest.mark.parametrize("name", sorted(set(TINY) - set(VARIANTS)))
def test_experiment_runs_end_to_end_on_a_tiny_size(name, mnist_dir, tmp_path):
    data_dir = mnist_dir  # the folder holding every data set
    if name.startswith("elec2") and not (data_dir / "elec2").exists():
        pytest.skip("Electricity data not present")
    if name == "split-fashion-mnist" and not (data_dir / "fashion-mnist").exists():
        pytest.skip("Fashion-MNIST data not present")
    exp = configs.get(name).replace({**SMALL_NETWORK, **TINY[name]})
    results = run(exp, [0], tmp_path, data_dir=data_dir, progress=False)
    stored = json.loads((tmp_path / name / "results.json").read_text())
    assert stored["n_seeds"] == 1 and stored["config"]["name"] == name
    assert stored["versions"]["jax"] and stored["config_hash"] == results["config_hash"]
    table = report.markdown([stored])
    assert name in table
    assert stored["seeds"][0]["peak_rss_bytes"] > 2**20  # the process's peak, recorded with the seed
    numbers = [float(row["mean"]) for row in report.rows(stored) if row["mean"] != "-"]
    assert numbers and all(np.isfinite(numbers))
    if exp.kind in ("task-matrix", "prequential", "free-split-oracles") and "nctl" in exp.learners:
        events = stored["seeds"][0]["learners"]["nctl"]["pool_events"]  # per neuron, every layer
        assert list(events) == [f"layer{i + 1}" for i in range(len(exp.network["layer_sizes"]))]
        assert all(set(layer) == {"refine", "skip", "add", "evict"} for layer in events.values())
    learners = stored["seeds"][0].get("learners") or next(iter(stored["seeds"][0]["conditions"].values()))["learners"]
    for learner, entry in learners.items():  # the engine of every nctl learner, to rerun it on that engine
        assert ("engine" in entry) == (learner in ("nctl", "gln") or learner.startswith(("nctl-", "gln-"))), learner
        assert entry.get("engine", "native") in ("native", "jax")


def test_summary_gives_mean_std_and_confidence_interval_over_seeds():
    seeds = [{"seed": 0, "acc": 0.9, "curve": [1.0, 2.0]}, {"seed": 1, "acc": 0.7, "curve": [3.0, 2.0]},
             {"seed": 2, "acc": 0.8, "curve": [2.0, 2.0]}]
    summary = summarise(seeds)
    assert "seed" not in summary
    assert summary["acc"]["mean"] == pytest.approx(0.8) and summary["acc"]["std"] == pytest.approx(0.1)
    # t_{0.975, 2} = 4.303: half width 4.303 * 0.1 / sqrt(3)
    assert summary["acc"]["ci_high"] - 0.8 == pytest.approx(4.303 * 0.1 / np.sqrt(3), rel=1e-3)
    assert summary["curve"]["mean"] == [2.0, 2.0] and summary["curve"]["half_width"][1] == 0.0


def test_cost_table_sums_every_seeds_wall_time_and_takes_the_largest_peak():
    first = {"seeds": [{"wall_s": 1800.0, "peak_rss_bytes": 2e9}, {"wall_s": 5400.0, "peak_rss_bytes": 3e9}]}
    second = {"seeds": [{"wall_s": 3600.0}, {"seed": 1}]}  # a seed without a recorded time counts nothing
    assert report.cost_total([first, second]) == "| all | 3 | 10,800 in all (3.0 h) | - | 3.0 |"


def test_settings_override_fields_and_parameter_groups():
    exp = configs.get("split-mnist").replace({"nctl.pool_size": "31", "seeds": "2", "learners": '["nctl"]'})
    assert exp.nctl["pool_size"] == 31 and exp.seeds == 2 and exp.learners == ("nctl",)
    assert exp.network["layer_sizes"] == (50, 25, 1)
    with pytest.raises(ValueError, match="unknown setting"):
        configs.get("split-mnist").replace({"pool": "3"})


def test_cli_list_run_report(tmp_path, capsys):
    assert cli.main(["list"]) == 0
    listed = capsys.readouterr().out
    assert all(name in listed for name in configs.EXPERIMENTS)
    out = tmp_path / "results"
    small = [arg for key, value in SMALL_NETWORK.items() for arg in ("--set", f"{key}={value}")]
    code = cli.main(["run", "demo", "--quiet", "--out", str(out), "--set", "stream_args.n_segments=4",
                     "--set", "stream_args.segment_length=60", *small])
    assert code == 0
    printed = capsys.readouterr().out
    assert "| demo | NCTL |" in printed and "| demo | GLN |" in printed
    assert cli.main(["report", str(out / "demo"), "--out", str(tmp_path / "table.md")]) == 0
    assert "accuracy" in (tmp_path / "table.md").read_text()


def test_seeds_run_in_local_processes_are_those_of_one_process(tmp_path):
    exp = configs.get("demo").replace({"max_steps": "64", "network.layer_sizes": "[4,1]", "learners": '["gln"]'})
    one = run(exp, [0, 1], tmp_path / "one", progress=False)["seeds"]
    two = run(exp, [0, 1], tmp_path / "two", executor=executors.local(2), progress=False)["seeds"]
    for seeds in (one, two):
        for seed in seeds:
            del seed["wall_s"], seed["peak_rss_bytes"], seed["learners"]["gln"]["seconds"], seed["learners"]["gln"]["examples_per_s"]
    assert two == one and [seed["seed"] for seed in one] == [0, 1]


def test_local_worker_processes_take_over_the_compilation_cache_of_the_process_that_runs_the_seeds(tmp_path):
    """A seed in a worker process loads what an earlier seed compiled (conftest gives this process the
    test run's cache; here with exported programs, as the command line has): the workers report the same
    folder, exported programs included."""
    from nctl.core import programs

    before = programs.folder()
    try:
        programs.use_folder(tmp_path / "exported")
        ours = compilation.current()
        assert ours is not None and ours[1]
        reported = dict(executors.local(2)(compilation.current, [(), ()]))
    finally:
        programs.use_folder(before)
    assert reported == {0: ours, 1: ours}


def test_unknown_experiment_is_a_clear_error():
    with pytest.raises(ValueError, match="nctl list"):
        configs.get("split-cifar")


def test_transfer_rows_summarise_each_sequence_early_loss():
    curves = [[1.0] * 10 + [0.0] * 10, [0.5] * 20, [0.3] * 20]  # three sequences, window 20
    seeds = [{"seed": s, "conditions": {"4": {"learners": {"nctl": {"target_log_loss": c}}}}}
             for s, c in enumerate(curves)]
    results = {"experiment": "free-split-forward", "kind": configs.FORWARD, "n_seeds": 3, "config": {},
               "seeds": seeds, "summary": summarise(seeds)}
    table = {row["metric"]: row for row in report.rows(results)}
    assert set(table) == {"log_loss_first_10", "log_loss_first_20"}
    first_10, first_20 = table["log_loss_first_10"], table["log_loss_first_20"]
    assert first_10["variant"] == "4 sources" and first_10["mean"] == "0.6000"
    assert first_20["mean"] == f"{np.mean([0.5, 0.5, 0.3]):.4f}"
    assert first_10["std"] == f"{np.std([1.0, 0.5, 0.3], ddof=1):.4f}" and first_10["ci95"].startswith("[")
    assert report.headline_rows(results) == [first_20]  # the whole window


def test_task_matrix_report_gives_learning_accuracy_and_per_task_rows():
    matrices = [[[0.9, 0.1], [0.6, 0.8]], [[0.7, 0.2], [0.4, 1.0]]]  # two seeds, two tasks
    seeds = [{"seed": s, "wall_s": 10.0 + 2 * s, "peak_rss_bytes": (s + 1) * 10**9, "tasks": ["a", "b"],
              "learners": {"gln": {"variants": {"frozen": {"acc": 0.7, "matrix": R}}}}} for s, R in enumerate(matrices)]
    results = {"experiment": "split-mnist", "kind": configs.TASK_MATRIX, "n_seeds": 2, "config": {},
               "seeds": seeds, "summary": summarise(seeds)}
    learning = [row for row in report.rows(results) if row["metric"] == "learning_acc"]
    assert len(learning) == 1 and learning[0]["mean"] == "85.00"  # seeds 85.0 and 85.0: (0.9+0.8)/2, (0.7+1.0)/2
    headline = [(row["metric"], row["mean"], row["stat"]) for row in report.headline_rows(results)]
    assert headline == [("acc", "70.00", results["summary"]["learners"]["gln"]["variants"]["frozen"]["acc"]),
                        ("bwt", "-", None)]
    assert learning[0]["std"] == "0.00"
    table = report.markdown([results])
    assert "| split-mnist | GLN | frozen | after the last task | 50.0 | 90.0 |" in table
    assert "| split-mnist | GLN | frozen | right after its own | 80.0 | 90.0 |" in table
    assert "| split-mnist | 2 | 11 | 10-12 | 2.0 |" in table  # seeds, wall s (mean, range), peak GB


def test_oracle_rows_give_each_rivals_paired_gap_to_nctl():
    losses = [(0.2, 0.5), (0.3, 0.4), (0.25, 0.45)]  # (NCTL, oracle) per sequence
    seeds = [{"seed": s, "learners": {"nctl": {"log_loss": a}, "oracle-2": {"log_loss": b}}}
             for s, (a, b) in enumerate(losses)]
    results = {"experiment": "free-split-oracles", "kind": configs.ORACLES, "n_seeds": 3, "config": {},
               "seeds": seeds, "summary": summarise(seeds)}
    gaps = [row for row in report.rows(results) if row["metric"] == "log_loss_gap"]
    assert len(gaps) == 1 and gaps[0]["learner"] == "Oracle 2 (boundaries + identities)"
    assert gaps[0]["mean"] == "0.2000" and gaps[0]["std"] == f"{np.std([0.3, 0.1, 0.2], ddof=1):.4f}"


def test_results_files_store_floats_to_seven_significant_digits_and_undefined_numbers_as_null(tmp_path):
    path = tmp_path / "r.json"
    write_json(path, {"loss": [0.123456789123, 2, float("nan"), -float("inf")], "nested": {"acc": 95.80123456},
                       "name": "x"})
    stored = json.loads(path.read_text(), parse_constant=lambda token: pytest.fail(f"bare {token} in the file"))
    assert stored["loss"] == [0.1234568, 2, None, None]
    assert stored["nested"] == {"acc": 95.80123} and stored["name"] == "x"


def test_resumable_seed_resumes_at_its_last_task_end_with_the_uninterrupted_result(tmp_path, monkeypatch):
    exp = configs.get("demo").replace({**SMALL_NETWORK, "kind": "task-matrix", "learners": '["nctl", "gln"]',
                                       "max_test": "40", "stream_args.n_segments": "3",
                                       "stream_args.segment_length": "60"})
    plain = run(exp, [0], tmp_path / "plain", progress=False)["seeds"][0]

    save, load, saved, resumed_at = FileCheckpoint.save, FileCheckpoint.load, [], []

    def save_then_stop(self, learner, evaluations, curve):
        save(self, learner, evaluations, curve)
        saved.append(evaluations)
        if len(saved) == 2:  # NCTL stops after its second task end (3 of 4 evaluations done)
            raise KeyboardInterrupt

    def spied_load(self):
        progress = load(self)
        resumed_at.append(None if progress is None else progress[1])
        return progress

    monkeypatch.setattr(FileCheckpoint, "save", save_then_stop)
    with pytest.raises(KeyboardInterrupt):
        run(exp, [0], tmp_path / "resumed", progress=False, resumable=True)
    kept = config_folder(tmp_path / "resumed", exp) / "checkpoints"
    progress = next(kept.glob("*/nctl/progress.json"))
    assert json.loads(progress.read_text())["evaluations"] == 3
    progress.write_text(json.dumps({**json.loads(progress.read_text()), "seconds": 1e4}))  # as after hours of work

    monkeypatch.setattr(FileCheckpoint, "save", save)
    monkeypatch.setattr(FileCheckpoint, "load", spied_load)
    resumed = run(exp, [0], tmp_path / "resumed", progress=False, resumable=True)["seeds"][0]
    assert resumed_at == [3, None]  # NCTL went on from its save, GLN started afresh
    assert "pool_events" in resumed["learners"]["nctl"]  # read from the restored learner, not a fresh one
    assert untimed(resumed) == untimed(plain)  # every field but timing
    # the wall time of a resumed seed counts the interrupted process's training too
    assert resumed["wall_s"] >= sum(entry["seconds"] for entry in resumed["learners"].values()) > 1e4
    assert not any(kept.iterdir())  # a finished seed's checkpoints are deleted
    with pytest.raises(ValueError, match="task-matrix"):
        run(configs.get("demo"), [0], tmp_path / "prequential", progress=False, resumable=True)


TIMING = {"seconds", "wall_s", "peak_rss_bytes", "examples_per_s"}


def untimed(result):
    """A seed's result without its timing and memory fields, which differ between any two runs."""
    if isinstance(result, dict):
        return {key: untimed(value) for key, value in result.items() if key not in TIMING}
    return result


def test_progress_shows_a_step_bar_per_learner_of_a_task_matrix_seed(tmp_path, capsys):
    pytest.importorskip("tqdm")
    exp = configs.get("demo").replace({"kind": "task-matrix", "learners": '["gln"]', "max_test": "20",
                                       "stream_args.n_segments": "3", "stream_args.segment_length": "20"})
    run(exp, [0], tmp_path, progress=True)
    shown = capsys.readouterr().err
    assert "seed 0 gln" in shown and "/60 " in shown and "step/s" in shown


def test_under_an_address_space_limit_a_learning_step_and_a_fork_count_in_full(monkeypatch):
    """Under ``ulimit -v`` a fork's pool copy (mapped from a file or not) and what a learning step holds
    beside the state take address space: a learner whose state and journals fit in free memory, but not
    with those, is refused with one line that names each part."""
    learner = nctl.NCTL(layer_sizes=(6, 1), pool=Pool(reservoir_size=8), depth=8, n_classes=2)
    state, working = learner.state_bytes(10), learner.working_bytes(10)
    assert working >= state  # the new arrays of a pool update stand beside the state's
    monkeypatch.setattr(runners, "available_memory", lambda: int(2 * state + working / 2))
    monkeypatch.setattr(runners, "rlimit_rooms", lambda: [object()])  # as under ``ulimit -v``
    refused = r"nctl needs .* GB \(the learner\) and .* GB for its adapt50 forks and .* GB while it learns but"
    with pytest.raises(MemoryError, match=refused):
        runners.check_memory("nctl", learner, 10, adapt=True)
    runners.check_memory("nctl", learner, 10, adapt=False)  # no forks: the state and one step fit
    monkeypatch.setattr(runners, "rlimit_rooms", lambda: [])  # no limit on address space: pages count as touched
    runners.check_memory("nctl", learner, 10, adapt=True)


def test_a_learner_whose_state_does_not_fit_in_memory_is_refused_before_training(tmp_path, monkeypatch):
    # 240 steps (depth 8) of SMALL_NETWORK, as in test_cli_list_run_report and (180 steps)
    # test_resumable_seed_resumes_at_its_last_task_end_with_the_uninterrupted_result: one learner to compile
    exp = configs.get("demo").replace({**SMALL_NETWORK, "kind": "task-matrix", "learners": '["nctl"]',
                                       "max_test": "20", "stream_args.n_segments": "3",
                                       "stream_args.segment_length": "80"})
    learner = nctl.NCTL(**exp.network, **with_pool(exp.nctl), depth=8, n_classes=2)
    state, forks = learner.state_bytes(10), learner.fork_bytes(10)
    assert 0 < forks < state  # a fixed tree's forks are journals: the state but its pool entries
    monkeypatch.setattr(runners, "available_memory", lambda: int(state + forks / 2))  # the learner fits, its forks not
    refused = r"nctl needs .* GB \(the learner\) and .* GB for its adapt50 forks but .* GB is free"
    with pytest.raises(SeedsFailed, match=refused) as failed:
        run(exp, [0], tmp_path, progress=False)
    assert isinstance(failed.value.__cause__, MemoryError)
    assert not (config_folder(tmp_path, exp) / "seeds").exists()  # refused before any seed finished
    run(exp.replace({"variants": '["frozen"]'}), [0], tmp_path, progress=False)  # no forks: allowed
