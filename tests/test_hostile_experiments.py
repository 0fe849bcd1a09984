"""Issue 59's cases in the experiments layer, as a hostile user met them: settings that passed the
up-front checks and failed inside a seed (3), results files of the wrong structure given to ``nctl
report`` and ``nctl plot`` (6), an empty ``--out`` (7); and finished seeds kept in a seed store, so that
seeds of separate runs are reported together (issue 54, item 3)."""

import copy
import itertools
import json

import pytest

from nctl import cli, plots, streams
from nctl.experiments import configs, report, validate
from nctl.experiments import run as run_module
from nctl.experiments.sweep import configurations, parse_grid
from tests.test_plots import SEED_MAKERS, fabricate


def no_compute(monkeypatch):
    monkeypatch.setattr(run_module, "run_seed", lambda *args: pytest.fail("a seed ran"))


def one_error_line(capsys) -> str:
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and error.startswith("nctl: error: "), error
    return error


# ----------------------------------------------------------------------------- 3: every setting checked up front


@pytest.mark.parametrize("name, setting, message", [
    ("demo", "max_steps=300.0", "max_steps must be None or an integer, got 300.0: an integer setting is written"),
    ("demo", "max_steps=1e3", "max_steps must be None or an integer, got 1000.0"),
    ("demo", "curve_points=100.0", "curve_points must be an integer, got 100.0"),
    ("demo", "stream_args.n_segments=4.0", "stream_args.n_segments must be an integer, got 4.0"),
    ("demo", "stream_args.segment_length=1e15",
     "stream_args.segment_length must be an integer, got 1000000000000000.0"),
    ("demo", "stream_args.segment_length=1000000000000000",
     "stream_args.segment_length must be an integer <= 2147483647, got 1000000000000000"),
    ("demo", "stream_args.n_features=0", "stream_args.n_features must be an integer >= 1, got 0"),
    ("demo", "stream_args.n_features=-3", "stream_args.n_features must be an integer >= 1, got -3"),
    ("demo", "stream_args.label_noise=0.5", "stream_args.label_noise must be a finite number in [0, 0.5), got 0.5"),
    ("demo", "stream_args.n_test=-1", "stream_args.n_test must be an integer >= 0, got -1"),
    ("demo", "nctl.pool_size=2.0", "nctl.pool_size must be an integer, got 2.0"),
    ("demo", "network.layer_sizes=[4.0, 1]", "network.layer_sizes[0] must be an integer, got 4.0"),
    ("demo", "mlp.hidden=[0]", "mlp.hidden[0] must be an integer >= 1, got 0"),
    ("demo", "mlp.optimizer=rmsprop", "mlp.optimizer must be one of 'adam', 'sgd', got 'rmsprop'"),
    ("demo", "stream=standardise", "stream must be one of synthetic, electricity"),
    ("demo", 'learners=["gln", "gln"]', "learners: a name is listed twice"),
    ("elec2-5", "stream_args.n_features=6", "stream_args.n_features must be one of 5, 8, got 6"),
    ("split-mnist", "stream_args.z_clip=0", "stream_args.z_clip must be null or a finite number > 0, got 0"),
    ("split-mnist", "steps_per_task=40.0", "steps_per_task must be None or an integer, got 40.0"),
    ("permuted-mnist", "stream_args.examples_per_task=60001",
     "stream_args.examples_per_task must be None or an integer <= 60000, got 60001"),
    ("permuted-mnist", "stream_args.n_tasks=100000", "stream_args make a stream of 6,000,000,000 steps"),
    ("free-split-backward", "stream=free_split_forward", "stream must be one of free_split_backward"),
])
def test_a_setting_that_would_fail_inside_a_seed_is_refused_before_any_compute(name, setting, message, tmp_path,
                                                                                monkeypatch, capsys):
    no_compute(monkeypatch)
    assert cli.main(["run", name, "--quiet", "--out", str(tmp_path), "--set", setting]) == 2
    assert message in one_error_line(capsys)
    assert not any(tmp_path.iterdir())


def test_every_stream_and_mlp_parameter_has_a_rule():
    for stream in (*validate.TASK_STREAMS, *validate.TRANSFER_STREAMS.values()):
        parameters = set(validate.inspect.signature(getattr(streams, stream)).parameters)
        assert parameters - set(validate.STREAM_SET_BY_RUNNER) <= set(validate.STREAM_RULES), stream
    assert set(validate.MLP_PARAMETERS) == set(validate.MLP_RULES)


def test_every_experiment_is_valid_and_already_canonical():
    for exp in configs.EXPERIMENTS.values():
        assert validate.check(exp) == exp


def test_two_spellings_of_one_grid_value_are_refused_or_one_configuration(tmp_path, monkeypatch, capsys):
    no_compute(monkeypatch)
    assert cli.main(["sweep", "demo", "--quiet", "--out", str(tmp_path), "--grid", "nctl.pool_size=2,2.0"]) == 2
    assert "grid setting nctl.pool_size=2.0: nctl.pool_size must be an integer, got 2.0" in one_error_line(capsys)
    with pytest.raises(ValueError, match="network.learning_rate=1 and network.learning_rate=1.0 make the same"):
        configurations(configs.get("demo"), {}, parse_grid(["network.learning_rate=1,1.0"]))
    assert not any(tmp_path.iterdir())


# ----------------------------------------------------------------------------- 6, 7: report and plot


def paths(data, prefix=()):
    """Every place in a results file that a hand edit could damage: each key of each object, and each
    list whole (of a list of seeds, the first seed's places too)."""
    if isinstance(data, dict):
        for key, value in data.items():
            yield (*prefix, key)
            yield from paths(value, (*prefix, key))
    elif isinstance(data, list) and data and isinstance(data[0], dict):
        yield (*prefix, 0)
        yield from paths(data[0], (*prefix, 0))


DAMAGE = {"deleted": None, "text": "x", "object": {}, "list": [], "null": None, "number": 7, "ragged": [[1], [1, 2]]}


def damaged(results, place, how):
    copied = copy.deepcopy(results)
    *parents, last = place
    container = copied
    for key in parents:
        container = container[key]
    if how == "deleted":
        del container[last]
    else:
        container[last] = copy.deepcopy(DAMAGE[how])
    return copied


def check_damaged_files(tmp_path, command: str, every: int) -> int:
    """Every ``every``-th place of a results file of each kind damaged (in each way in turn): the command
    succeeds, or fails with an error that ``nctl`` shows as one line naming the file, never a traceback.
    Returns how many failed."""
    parser, refused, hows = cli.build_parser(), 0, itertools.cycle(DAMAGE)
    for kind in sorted(SEED_MAKERS):
        results = fabricate(kind, 2)
        for place in list(paths(results))[::every]:
            path = tmp_path / "damaged.json"
            path.write_text(json.dumps(damaged(results, place, next(hows))))
            args = parser.parse_args([command, str(path), "--out", str(tmp_path / "out")])
            try:
                args.func(args)
            except cli.USER_ERRORS as error:
                refused += 1
                assert str(path) in str(error) and "\n" not in str(error), (kind, place)
    return refused


def test_report_of_a_damaged_results_file_is_a_table_or_one_line_naming_the_file(tmp_path, capsys):
    assert check_damaged_files(tmp_path, "report", every=1) > 250


def test_plot_of_a_damaged_results_file_is_figures_or_one_line_naming_the_file(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(plots.plt.Figure, "savefig", lambda self, file, **options: file.write(b"png"))  # no drawing
    assert check_damaged_files(tmp_path, "plot", every=7) > 40


@pytest.mark.parametrize("command", ["report", "plot"])
def test_a_results_file_of_an_unknown_kind_is_an_error_naming_the_field(command, tmp_path, capsys):
    path = tmp_path / "results.json"
    path.write_text(json.dumps({**fabricate(configs.ORACLES), "kind": "nonsense"}))
    assert cli.main([command, str(path), "--out", str(tmp_path / "out")]) == 2
    error = one_error_line(capsys)
    assert str(path) in error and "field kind must be one of task-matrix" in error and "got 'nonsense'" in error


def test_every_results_file_in_the_documents_passes_the_structure_check(capsys):
    documents = [path for path in sorted((cli.Path(__file__).parents[1] / "docs" / "results").glob("*/*.json"))
                 if "kind" in json.loads(path.read_text())]
    assert len(documents) > 10
    assert cli.main(["report", *map(str, documents)]) == 0
    assert "nctl: error" not in capsys.readouterr().err


@pytest.mark.parametrize("args", [["run", "demo", "--out", ""], ["sweep", "demo", "--grid", "seeds=1", "--out", " "],
                                  ["report", "x.json", "--out", ""], ["plot", "x.json", "--out", ""]])
def test_an_empty_out_is_refused_rather_than_the_current_folder(args, tmp_path, monkeypatch, capsys):
    no_compute(monkeypatch)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as stop:
        cli.main(args)
    assert stop.value.code == 2 and "--out: must name a" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())


# ----------------------------------------------------------------------------- issue 54, 3: a seed store

# the quick demo of tests/test_hostile.py (its compiled programs serve both)
STORE_SETTINGS = {"learners": '["gln"]', "stream_args.n_segments": "3", "stream_args.segment_length": "40"}
STORE_QUICK = ["--quiet", *[arg for key, value in STORE_SETTINGS.items() for arg in ("--set", f"{key}={value}")]]


def store_run(out, store, *extra) -> int:
    return cli.main(["run", "demo", "--out", str(out), "--seed-store", str(store), *STORE_QUICK, *extra])


def test_a_stored_seed_is_reused_by_a_run_into_another_folder_and_report_merges_separate_runs(tmp_path, monkeypatch,
                                                                                              capsys):
    store = tmp_path / "docs" / "results" / "demo-gln"
    assert store_run(tmp_path / "day1", store) == 0  # seed 0
    stored = json.loads((store / "demo-seed-0000.json").read_text())
    exp = configs.get("demo").replace(STORE_SETTINGS)
    assert stored["format"] == run_module.SEED_FORMAT and stored["config"] == exp.to_json()
    assert stored["config_hash"] == run_module.config_hash(exp) and stored["versions"]["cpu"]
    assert stored["result"]["seed"] == 0 and stored["result"]["wall_s"] > 0 and stored["result"]["peak_rss_bytes"] > 0
    assert (store / "demo-seed-0000.json").stat().st_size < 20_000  # numbers and curves only

    assert store_run(tmp_path / "day2", store, "--first-seed", "1") == 0  # seed 1, another day, another folder
    assert sorted(path.name for path in store.iterdir()) == ["demo-seed-0000.json", "demo-seed-0001.json"]

    no_compute(monkeypatch)  # both seeds are in the store: a third folder gets them without running any
    assert store_run(tmp_path / "day3", store, "--seeds", "2") == 0
    both = json.loads((tmp_path / "day3" / "demo" / "results.json").read_text())
    assert both["n_seeds"] == 2 and both["seeds"][0] == stored["result"]
    capsys.readouterr()

    assert cli.main(["report", str(store)]) == 0  # the store alone: one table over both seeds
    table = capsys.readouterr().out
    row = next(line for line in table.splitlines() if "| accuracy |" in line)
    assert row.split(" | ")[7] == "2" and "[" in row.split(" | ")[6]  # n = 2 and a 95% CI
    (source, merged), = report.load_all([store])
    assert "seed files of demo" in source and merged["summary"] == both["summary"] and merged["n_seeds"] == 2


def test_a_seed_store_of_another_configuration_is_refused_and_never_mixed_in(tmp_path, monkeypatch, capsys):
    store, other = tmp_path / "store", tmp_path / "other"
    assert cli.main(["run", "demo", "--out", str(tmp_path / "a"), *STORE_QUICK]) == 0  # no store yet
    assert store_run(tmp_path / "b", other, "--set", "network.learning_rate=0.05") == 0
    no_compute(monkeypatch)
    assert store_run(tmp_path / "a", store) == 0  # the seed finished in the run folder is stored
    kept = (store / "demo-seed-0000.json").read_bytes()
    capsys.readouterr()

    assert store_run(tmp_path / "c", store, "--set", "network.learning_rate=0.05") == 2
    error = one_error_line(capsys)
    assert "holds demo-seed-0000.json, of another configuration of demo" in error
    assert "network.learning_rate: 0.1 -> 0.05" in error
    assert (store / "demo-seed-0000.json").read_bytes() == kept and not (tmp_path / "c").exists()

    # two stores of two configurations: two tables of one seed each, never one of two
    assert [results["n_seeds"] for _, results in report.load_all([store, other])] == [1, 1]
    (other / "demo-seed-0000.json").rename(store / "demo-seed-0001.json")  # misnamed by hand
    assert cli.main(["report", str(store)]) == 2
    assert "demo-seed-0001.json is unreadable (it holds seed 0 of demo but is named" in one_error_line(capsys)


def test_a_damaged_seed_file_in_the_store_is_refused_and_kept(tmp_path, monkeypatch, capsys):
    store = tmp_path / "store"
    store.mkdir()
    (store / "demo-seed-0000.json").write_text('{"format": "nctl seed 1", "experiment": "demo"')
    no_compute(monkeypatch)
    assert store_run(tmp_path / "out", store) == 2
    assert f"seed file {store / 'demo-seed-0000.json'} is unreadable" in one_error_line(capsys)
    assert (store / "demo-seed-0000.json").read_text().endswith('"demo"')
