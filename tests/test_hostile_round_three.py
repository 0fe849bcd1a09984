"""Issue 86 ("Reliability, round three"), case by case: what a hostile user tried, and the one clear
error, or the kept work, that must come instead. Numbers in the comments are the issue's items."""

import contextlib
import json
import os
import re
import stat
import threading
from pathlib import Path

import numpy as np
import pytest

import nctl
from nctl import atomic, cli, plots
from nctl.experiments import configs
from nctl.experiments import run as run_module
from nctl.experiments.checkpoint import FileCheckpoint
from nctl.experiments.run import config_folder
from tests.test_hostile import nctl_run, quick_demo
from tests.test_hostile_experiments import no_compute, one_error_line, store_run
from tests.test_plots import fabricate

SEED_STORE = Path(__file__).parents[1] / "docs" / "results" / "regression" / "regression-trump"


# ----------------------------------------------------------------------------- 5: only a regular file is replaced


def not_regular(tmp_path, kind):
    """A FIFO, a folder, or a link to a FIFO, at ``tmp_path / "target"``; and a test that it is unchanged."""
    target = tmp_path / "target"
    if kind == "folder":
        target.mkdir()
        return target, lambda: target.is_dir() and not any(target.iterdir())
    os.mkfifo(tmp_path / "fifo")
    if kind == "link to a FIFO":
        target.symlink_to(tmp_path / "fifo")
    else:
        os.replace(tmp_path / "fifo", target)
    return target, lambda: stat.S_ISFIFO(target.stat().st_mode)


@pytest.mark.parametrize("kind, named", [("FIFO", "a FIFO"), ("folder", "a folder"), ("link to a FIFO", "a FIFO")])
def test_an_atomic_write_refuses_a_target_that_is_not_a_regular_file_before_writing(tmp_path, kind, named):
    target, unchanged = not_regular(tmp_path, kind)
    before = sorted(tmp_path.iterdir())
    with pytest.raises(FileExistsError, match=re.escape(f"cannot write {target}: it is {named}, not a regular file")):
        atomic.write_bytes(target, b"data")
    assert unchanged() and sorted(tmp_path.iterdir()) == before  # no temporary either


def test_save_onto_a_fifo_is_refused_and_the_fifo_kept(tmp_path):
    target, unchanged = not_regular(tmp_path, "FIFO")
    model = nctl.GLN(layer_sizes=(3, 1), context_bits=1, learning_rate=0.1)
    model.learn_many(np.zeros((4, 2), np.float32), np.array([0, 1, 0, 1]))
    with pytest.raises(FileExistsError, match="it is a FIFO"):
        model.save(target)
    assert unchanged() and sorted(p.name for p in tmp_path.iterdir()) == ["target"]


@pytest.mark.parametrize("kind", ["FIFO", "folder"])
def test_report_out_onto_a_fifo_or_a_folder_is_one_error_line(tmp_path, kind, capsys):
    target, unchanged = not_regular(tmp_path, kind)
    assert cli.main(["report", str(SEED_STORE), "--out", str(target)]) == 2
    assert f"cannot write {target}: it is a" in one_error_line(capsys)
    assert unchanged()


# ----------------------------------------------------------------------------- 4: a seed store keeps every seed

WAIT_S = 300.0  # bound on every wait for another thread's run: a tiny demo seed takes seconds


@contextlib.contextmanager
def first_run_held(tmp_path, monkeypatch):
    """Start a run of the demo into an empty seed store ``tmp_path / "store"`` in a thread and hold its
    seed for the block (seeds of other runs run at once); give the store. Afterwards the run has ended
    with status 0."""
    store, status = tmp_path / "store", []
    started, release = threading.Event(), threading.Event()
    real = run_module.run_seed

    def held(*args):
        started.set()
        assert release.wait(WAIT_S)
        return real(*args)

    monkeypatch.setattr(run_module, "run_seed", held)
    thread = threading.Thread(target=lambda: status.append(store_run(tmp_path / "first", store)))
    thread.start()
    try:
        assert started.wait(WAIT_S)
        monkeypatch.setattr(run_module, "run_seed", real)
        yield store
    finally:
        release.set()
        thread.join(WAIT_S)
    assert not thread.is_alive() and status == [0]


def stored_learning_rate(path) -> float:
    return json.loads(path.read_text())["config"]["network"]["learning_rate"]


def test_a_run_of_other_settings_beside_a_run_on_an_empty_store_is_refused_before_its_seeds_run(
        tmp_path, monkeypatch, capsys):
    other = ["--set", "network.learning_rate=0.05"]
    with first_run_held(tmp_path, monkeypatch) as store:
        no_compute(monkeypatch)
        assert store_run(tmp_path / "second", store, *other) == 2
        assert "is being written by a run of another configuration of demo" in capsys.readouterr().err
        assert not (tmp_path / "second").exists()
    assert sorted(path.name for path in store.iterdir()) == ["demo-seed-0000.json"]  # the claim is gone too
    assert stored_learning_rate(store / "demo-seed-0000.json") == 0.1
    assert store_run(tmp_path / "second", store, *other) == 2  # now refused for the finished seed
    assert "holds demo-seed-0000.json, of another configuration of demo" in one_error_line(capsys)


def test_runs_of_one_configuration_side_by_side_share_the_store(tmp_path, monkeypatch):
    with first_run_held(tmp_path, monkeypatch) as store:
        assert store_run(tmp_path / "second", store, "--first-seed", "1") == 0
    assert sorted(path.name for path in store.iterdir()) == ["demo-seed-0000.json", "demo-seed-0001.json"]


def test_the_claim_of_a_killed_run_of_other_settings_is_no_refusal(tmp_path, monkeypatch):
    store = tmp_path / "store"
    store.mkdir()
    (store / ".demo-0123456789abcdef.claim").touch()  # no process holds it
    assert store_run(tmp_path / "out", store) == 0
    assert sorted(path.name for path in store.iterdir()) == ["demo-seed-0000.json"]


# ----------------------------------------------------------------------------- 14: JSON nested too deeply

TOO_DEEP = "[" * 100_000  # beyond the parser's recursion
DEEP_BUT_PARSED = 900  # within the parser's reach, beyond that of the checks and copies that recurse


def deep_config_seed_file(path):
    """A store's seed file, valid but for a setting of lists nested DEEP_BUT_PARSED deep."""
    stored = json.loads(next(SEED_STORE.glob("*-seed-*.json")).read_text())
    stored["config"]["deep"] = json.loads("[" * DEEP_BUT_PARSED + "]" * DEEP_BUT_PARSED)
    path.write_text(json.dumps(stored))


@pytest.mark.parametrize("command", ["report", "plot"])
def test_a_results_file_nested_too_deeply_is_one_error_line(command, tmp_path, capsys):
    path = tmp_path / "results.json"
    path.write_text(TOO_DEEP)
    assert cli.main([command, str(path), "--out", str(tmp_path / "out")]) == 2
    assert f"{path} is unreadable (lists and objects nested more than" in one_error_line(capsys)


@pytest.mark.parametrize("write", [lambda path: path.write_text(TOO_DEEP), deep_config_seed_file])
def test_a_store_seed_file_nested_too_deeply_is_one_error_line(tmp_path, monkeypatch, capsys, write):
    store = tmp_path / "store"
    store.mkdir()
    write(store / "demo-seed-0000.json")
    assert cli.main(["report", str(store)]) == 2
    assert "demo-seed-0000.json is unreadable (lists and objects nested more than" in one_error_line(capsys)
    no_compute(monkeypatch)
    assert store_run(tmp_path / "out", store) == 2
    assert "demo-seed-0000.json is unreadable (lists and objects nested more than" in one_error_line(capsys)


def test_a_run_seed_file_nested_too_deeply_is_named_and_its_seed_run_again(tmp_path, capsys):
    assert nctl_run(tmp_path) == 0
    path = config_folder(tmp_path, quick_demo()) / "seeds" / "seed-0000.json"
    good = path.read_text()
    path.write_text(TOO_DEEP)
    assert nctl_run(tmp_path) == 0
    assert f"seed file {path} is unreadable (ValueError: lists and objects nested more than" in capsys.readouterr().err
    accuracy = [json.loads(text)["result"]["learners"]["gln"]["accuracy"] for text in (path.read_text(), good)]
    assert accuracy[0] == accuracy[1]


def test_a_checkpoint_nested_too_deeply_is_named(tmp_path):
    (tmp_path / "gln").mkdir()
    (tmp_path / "gln" / "progress.json").write_text(TOO_DEEP)
    with pytest.raises(ValueError, match="progress.json is unreadable .*nested more than"):
        FileCheckpoint(tmp_path / "gln").load()


# ----------------------------------------------------------------------------- 14, 19: counts checked when parsed


@pytest.mark.parametrize("args", [
    ["saliency", "transition", "--every", "0"],
    ["saliency", "pseudo-tasks", "--samples", "-1"],
    ["boundaries", "--sequences", "0"],
    ["boundaries", "--plot-sequences", "-5"],
    ["pool-history", "--examples-per-task", "0"],
])
def test_a_count_below_one_is_refused_when_parsed(args, tmp_path, capsys):
    with pytest.raises(SystemExit) as stop:
        cli.main([*args, "--out", str(tmp_path / "out")])
    error = capsys.readouterr().err.splitlines()[-1]
    assert stop.value.code == 2 and error.endswith(f"error: argument {args[-2]}: must be an integer >= 1, got "
                                                   f"'{args[-1]}'")
    assert not (tmp_path / "out").exists()


# ----------------------------------------------------------------------------- 16: figures stay in --out


@pytest.mark.parametrize("experiment", ["{tmp_path}/owned", "../../../escaped/x", ".."])
def test_plot_writes_its_figures_under_out_whatever_the_experiment_is_called(experiment, tmp_path, monkeypatch,
                                                                            capsys):
    monkeypatch.setattr(plots.plt.Figure, "savefig", lambda self, file, **options: file.write(b"png"))  # no drawing
    (tmp_path / "escaped").mkdir()  # where "../../../escaped/x" led from out
    out = tmp_path / "a" / "b" / "out"
    path = tmp_path / "results.json"
    path.write_text(json.dumps({**fabricate(configs.PREQUENTIAL), "experiment": experiment.format(tmp_path=tmp_path)}))
    assert cli.main(["plot", str(path), "--out", str(out)]) == 0
    figure, = map(Path, capsys.readouterr().out.split())
    assert figure.parent == out and figure.name.endswith("-accuracy.png")
    assert sorted(p for p in tmp_path.rglob("*") if p.is_file()) == sorted([figure, path])
