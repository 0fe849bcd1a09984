"""First use: the persistent compilation cache is on by default (and stays off, or the user's, when
asked), a cold learner says that it is compiling, and the errors a new user meets point to the fix.
The cache's defaults are checked in processes of their own with a home of their own, so that nothing
is written into the real one (the suite's own cache: tests/conftest.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from nctl import compilation

SCRIPT = """
import json, sys, jax, numpy as np, nctl
from nctl.core import programs
if sys.argv[1] == "configured":  # the user's own folder, set before the first learner
    jax.config.update("jax_compilation_cache_dir", sys.argv[2])
nctl.GLN(layer_sizes=(2, 1), context_bits=1).learn_one(np.ones(2, np.float32), 1)
exported = programs.folder()
print(json.dumps({"dir": jax.config.jax_compilation_cache_dir, "max_size": jax.config.jax_compilation_cache_max_size,
                  "exported": None if exported is None else str(exported)}))
"""

SESSION_CACHE = "NCTL_TEST_SESSION_CACHE"  # tests/conftest.py's variable: a child must not see it as a cache


def cache_of_a_new_process(home, mode: str = "default", **env) -> dict:
    """The cache settings of a new process (home ``home``) after its first learner, on the JAX engine (whose
    programs the cache holds), learned a row."""
    environment = {k: v for k, v in os.environ.items()
                   if k not in ("NCTL_CACHE_DIR", "JAX_COMPILATION_CACHE_DIR", "XDG_CACHE_HOME", SESSION_CACHE)}
    environment.update(HOME=str(home), NCTL_ENGINE="jax", **env)
    done = subprocess.run([sys.executable, "-c", SCRIPT, mode, str(home / "configured")], env=environment, cwd=home,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])



def test_a_library_user_gets_the_persistent_cache_in_the_home_by_default(tmp_path):
    cache = cache_of_a_new_process(tmp_path)
    folder = tmp_path / ".cache" / "nctl" / "jax"
    assert cache == {"dir": str(folder), "max_size": -1, "exported": str(folder / compilation.EXPORTED)}
    assert folder.is_dir() and (folder.stat().st_mode & 0o077) == 0  # the user's alone


def test_the_default_cache_can_be_turned_off(tmp_path):
    # one spelling in a new process (each starts JAX and compiles a learner); tests/test_compilation.py
    # checks every spelling that turns it off in this process
    assert cache_of_a_new_process(tmp_path, NCTL_CACHE_DIR="False") == {"dir": None, "max_size": -1,
                                                                         "exported": None}
    assert not (tmp_path / ".cache").exists()


def test_the_default_cache_follows_nctl_cache_dir_and_xdg(tmp_path):
    assert cache_of_a_new_process(tmp_path, NCTL_CACHE_DIR=str(tmp_path / "mine"))["dir"] == str(tmp_path / "mine")
    assert cache_of_a_new_process(tmp_path, XDG_CACHE_HOME=str(tmp_path / "xdg"))["dir"] == str(
        tmp_path / "xdg" / "nctl" / "jax")


def test_a_cache_the_user_gave_jax_is_left_alone(tmp_path):
    mine = str(tmp_path / "jax-own")
    assert cache_of_a_new_process(tmp_path, JAX_COMPILATION_CACHE_DIR=mine) == {"dir": mine, "max_size": -1,
                                                                               "exported": None}
    assert cache_of_a_new_process(tmp_path, "configured") == {"dir": str(tmp_path / "configured"), "max_size": -1,
                                                              "exported": None}
    assert not (tmp_path / ".cache").exists()


def test_a_cache_over_its_cap_loses_the_programs_used_least_recently(tmp_path):
    exported = tmp_path / compilation.EXPORTED
    exported.mkdir()
    names = [f"jit_program{i}-{i:064x}-cache" if i % 2 == 0 else f"program{i}-{i:032x}.jaxexport" for i in range(6)]
    for i, folder in enumerate([tmp_path, exported] * 3):  # used at 1000 + i: read (atime) or written (mtime)
        path = folder / names[i]
        path.write_bytes(bytes(100))
        os.utime(path, (1000 + i, 0) if i % 2 else (0, 1000 + i))
    compilation.prune([tmp_path, exported], 500)  # 600 bytes held: down to at most 375
    assert sorted(p.name for p in tmp_path.rglob("*program*")) == sorted(names[3:])
    compilation.prune([tmp_path, exported], 300)  # within the cap: nothing removed
    assert len(list(tmp_path.rglob("*program*"))) == 3


def test_the_default_cache_is_pruned_to_its_cap_when_a_process_turns_it_on(tmp_path):
    folder = tmp_path / ".cache" / "nctl" / "jax"
    folder.mkdir(parents=True)
    for i in range(4):
        with open(folder / f"jit_old{i}-{i:064x}-cache", "wb") as file:
            file.truncate(compilation.MAX_CACHE_BYTES // 2)  # a sparse file: its size, on no disk
        os.utime(folder / f"jit_old{i}-{i:064x}-cache", (1000 + i, 1000 + i))
    cache_of_a_new_process(tmp_path)
    assert sorted(p.name for p in folder.glob("jit_old*")) == [f"jit_old3-{3:064x}-cache"]


def test_a_numpy_row_given_to_the_river_classifier_points_to_dicts_and_leaves_it_unchanged():
    import numpy as np

    from nctl import Pool
    from nctl.river import NCTLClassifier

    model = NCTLClassifier(layer_sizes=(2, 1), pool=Pool(size=2, min_segment=4))
    for method in (lambda x: model.learn_one(x, True), model.predict_proba_one):
        with pytest.raises(TypeError, match="dict of feature name -> number.*numpy.ndarray.*nctl.NCTL"):
            method(np.ones(3))
    assert model.learner.t_ == 0 and model.features is None


def test_a_dict_given_to_a_core_learner_points_to_nctl_river():
    import nctl

    model = nctl.GLN(layer_sizes=(2, 1))
    for call in (lambda: model.learn_one({"a": 1.0}, 1), lambda: model.predict_proba_one({"a": 1.0}),
                 lambda: model.learn_many([{"a": 1.0}], [1])):
        with pytest.raises(TypeError, match="dict.*nctl.river.NCTLClassifier"):
            call()
    assert model.state_ is None and model.t_ == 0


def test_a_third_class_without_n_classes_says_to_set_n_classes():
    import numpy as np

    import nctl

    model = nctl.GLN(layer_sizes=(2, 1))
    with pytest.raises(ValueError, match=r"labels must be 0 or 1, found .*2.*set n_classes \(e.g. n_classes=3\)"):
        model.learn_many(np.ones((3, 2), np.float32), np.array([0, 1, 2]))
    with pytest.raises(ValueError, match=r"found .*-1\)?$"):  # no class to add: no advice
        model.learn_many(np.ones((1, 2), np.float32), np.array([-1]))
    assert model.state_ is None and model.t_ == 0


def test_a_slow_first_call_gives_one_notice_naming_the_learner_and_the_cache(monkeypatch, caplog):
    import threading

    monkeypatch.setattr(compilation, "NOTICE_AFTER_SECONDS", 0.0)
    monkeypatch.setattr(compilation, "notice_given", threading.Event())
    monkeypatch.delenv(compilation.QUIET_ENV, raising=False)
    with caplog.at_level("WARNING", logger="nctl"):
        with compilation.notice_if_slow("NCTL"):
            assert compilation.notice_given.wait(timeout=60)  # the block runs until the notice is given
        with compilation.notice_if_slow("GLN"):  # once per process
            pass
    notices = [record.getMessage() for record in caplog.records if record.name == "nctl"]
    assert len(notices) == 1 and notices[0].startswith("nctl: NCTL is compiling its programs")
    assert "NCTL_QUIET=1" in notices[0] and "later process loads them from" in notices[0]


@pytest.mark.parametrize("quiet", ["1", "yes"])
def test_nctl_quiet_starts_no_notice(monkeypatch, quiet):
    import threading

    def no_timer(*args, **kwargs):
        raise AssertionError("a notice timer was started")

    monkeypatch.setattr(compilation, "notice_given", threading.Event())
    monkeypatch.setattr(compilation.threading, "Timer", no_timer)
    monkeypatch.setenv(compilation.QUIET_ENV, quiet)
    with compilation.notice_if_slow("NCTL"):
        pass
    monkeypatch.setenv(compilation.QUIET_ENV, "0")
    with pytest.raises(AssertionError, match="timer was started"):
        compilation.notice_if_slow("NCTL").__enter__()


def test_only_a_learners_first_call_of_each_method_can_give_the_notice(monkeypatch):
    import contextlib

    import numpy as np

    import nctl

    watched = []
    monkeypatch.setattr(compilation, "notice_if_slow", lambda what: watched.append(what) or contextlib.nullcontext())
    model, x = nctl.GLN(layer_sizes=(2, 1)), np.ones(2, np.float32)
    for _ in range(3):
        model.predict_proba_one(x)
        model.learn_one(x, 1)
    model.learn_many(np.ones((2, 2), np.float32), np.array([0, 1]))
    model.predict_proba_many(np.ones((4, 2), np.float32))
    first_calls = len(watched)
    assert first_calls >= 3 and set(watched) == {"GLN"}  # predict_proba_one, predict_proba_many, learn_many, ...
    for _ in range(3):
        model.predict_proba_one(x)
        model.learn_one(x, 0)
        model.predict_proba_many(np.ones((4, 2), np.float32))
        model.learn_many(np.ones((2, 2), np.float32), np.array([0, 1]))
    assert len(watched) == first_calls



def test_a_prequential_seed_reports_its_steps_as_it_goes():
    """The command line's step bar (under the seeds bar) follows a prequential seed too: each learner's
    steps from 0 to the stream's length, chunk by chunk."""
    import nctl
    from nctl import evaluate
    from nctl.experiments import configs
    from nctl.experiments.runners import make_stream, run_seed

    exp = configs.get("demo").replace({"max_steps": "100", "network.layer_sizes": "[2,1]",
                                       "learners": '["gln", "no-change"]'})
    reports = []
    run_seed(exp, 3, progress=lambda *report: reports.append(report))
    assert reports == [("seed 3 gln", 0, 100), ("seed 3 gln", 100, 100),
                       ("seed 3 no-change", 0, 100), ("seed 3 no-change", 100, 100)]
    stream, chunks = make_stream(exp, 3, None), []
    evaluate.prequential(nctl.GLN(layer_sizes=(2, 1)), stream, chunk_size=1500,
                         on_progress=lambda *report: chunks.append(report))
    assert chunks == [(0, len(stream)), *((n, len(stream)) for n in range(1500, len(stream), 1500)),
                      (len(stream), len(stream))]


def test_the_command_line_has_a_version_and_a_bare_call_shows_the_help(capsys):
    import nctl
    from nctl import cli

    with pytest.raises(SystemExit) as exit_:
        cli.main(["--version"])
    assert exit_.value.code == 0 and capsys.readouterr().out.strip() == f"nctl {nctl.__version__}"
    assert cli.main([]) == 0
    shown = capsys.readouterr().out
    assert shown.startswith("usage: nctl") and "run demo" in shown and "examples:" in shown


def test_run_help_describes_every_option(capsys):
    from nctl import cli

    with pytest.raises(SystemExit):
        cli.main(["run", "--help"])
    shown = capsys.readouterr().out
    assert "--first-seed FIRST_SEED\n" in shown and "FIRST..FIRST+SEEDS-1" in shown


def test_nctl_list_shows_each_experiments_seed_time_and_data(capsys):
    from nctl import cli
    from nctl.experiments import configs

    assert cli.main(["list"]) == 0
    lines = {line.split()[0]: line for line in capsys.readouterr().out.splitlines() if line.strip()}
    for name in configs.EXPERIMENTS:
        assert name in cli.SEED_DURATION and cli.SEED_DURATION[name] in lines[name]
    assert " 1 seed " in lines["demo"] and "built-in" in lines["demo"]
    assert "mnist " in lines["permuted-mnist"] and "hours" in lines["permuted-mnist"]
    assert "elec2" in lines["elec2-5"] and "fashion-mnist" in lines["split-fashion-mnist"]


def test_every_file_of_the_package_but_its_modules_is_package_data():
    """A wheel carries the modules and the package data named in pyproject.toml: a file the package
    reads at run time (the CPU kernel's C++ source, py.typed) must be named there, or an installed
    nctl lacks it."""
    import fnmatch
    import tomllib
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    globs = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["nctl"]
    package = root / "src" / "nctl"
    others = [path.relative_to(package).as_posix() for path in package.rglob("*")
              if path.is_file() and path.suffix not in (".py", ".pyc") and "__pycache__" not in path.parts
              and not fnmatch.fnmatch(path.name, "kernels-*.so")  # the CPU kernels and the native engine,
              and not fnmatch.fnmatch(path.name, "engine-*.so")]  # built at install (setup.py)
    assert "core/native/ggm_rows.cc" in others
    assert [name for name in others if not any(fnmatch.fnmatch(name, glob) for glob in globs)] == []


def test_every_constructor_parameter_of_the_learners_is_documented():
    import dataclasses

    import nctl

    for learner in (nctl.NCTL, nctl.GLN):
        documented = learner.__doc__.split("Args:")[1]
        for field in dataclasses.fields(learner):
            assert f"\n        {field.name}: " in documented, f"{learner.__name__}({field.name}=...) has no description"


def test_the_api_pages_show_the_presets_and_the_cache():
    from pathlib import Path

    docs = Path(__file__).resolve().parents[1] / "docs"
    learner_page, gln_page = (docs / "api-nctl-learner.md").read_text(), (docs / "api-gln.md").read_text()
    for preset in ("tabular", "paper_split_mnist", "paper_permuted_mnist", "paper_electricity"):
        assert preset in learner_page
    assert "tabular" in gln_page and "enable_compilation_cache" in (docs / "api-nctl.md").read_text()


@pytest.mark.parametrize("engine, work", [("jax", ["cache", "size"]), ("native", ["size"])])
def test_the_first_jax_learner_turns_the_cache_on_before_any_other_work(engine, work, monkeypatch):
    """On JAX, sizing the first state may trace programs and build the CPU kernel (seconds in a new
    process): the cache is turned on first, so that the notice of a slow first call can name it. A learner
    on the native engine compiles nothing and leaves JAX's cache alone."""
    import numpy as np

    import nctl

    monkeypatch.setenv("NCTL_ENGINE", engine)
    order = []
    monkeypatch.setattr(compilation, "default_cache", lambda: order.append("cache"))
    sizing = nctl.GLN.state_bytes
    monkeypatch.setattr(nctl.GLN, "state_bytes", lambda self, n: order.append("size") or sizing(self, n))
    nctl.GLN(layer_sizes=(2, 1)).predict_proba_one(np.ones(2))
    assert order == work
