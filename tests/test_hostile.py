"""Issues 16 and 59, case by case: what a careful, hostile user tried, and what must happen instead of
losing finished work, hanging or running a bad setting silently. Numbers in the comments are the
issues' cases."""

import copy
import json
import os
import re
import resource
import signal
import subprocess
import sys
import threading
import time

import jax
import numpy as np
import pytest

import nctl
from nctl import atomic, memory, cli, plots
from nctl.experiments import configs, report
from nctl.experiments import run as run_module
from nctl.experiments.checkpoint import FileCheckpoint
from nctl.experiments.run import write_json, write_seed, aggregate, config_folder, config_hash, write_results
from nctl.pool import Pool
from nctl.river import GLNClassifier, NCTLClassifier
from nctl.sklearn import GLNClassifier as SkGLNClassifier, NCTLClassifier as SkNCTLClassifier

TINY = dict(layer_sizes=(3, 1), context_bits=1, learning_rate=0.1)
TINY_NCTL = dict(TINY, pool=Pool(size=2, min_segment=4, reservoir_size=4), depth=6)


def data(n=20, d=4, seed=0):
    X = np.random.default_rng(seed).standard_normal((n, d)).astype(np.float32)
    return X, (X[:, 0] > 0).astype(int)


# ----------------------------------------------------------------------------- 5: hyper-parameters


@pytest.mark.parametrize("learner", [nctl.GLN, nctl.NCTL, GLNClassifier, NCTLClassifier])
@pytest.mark.parametrize("setting, message", [
    ({"learning_rate": 0}, r"learning_rate must be a finite number > 0, got 0"),
    ({"learning_rate": -0.1}, r"learning_rate .* got -0.1"),
    ({"learning_rate": float("nan")}, r"learning_rate .* got nan"),
    ({"learning_rate": float("inf")}, r"learning_rate .* got inf"),
    ({"prob_eps": 0.5}, r"prob_eps must be a finite number in \(0, 0.5\), got 0.5"),
    ({"prob_eps": 0.0}, r"prob_eps .* got 0.0"),
    ({"max_weight": 0}, r"max_weight must be a finite number > 0"),
    ({"max_weight": -3.0}, r"max_weight .* got -3.0"),
    ({"n_classes": 2.5}, r"n_classes must be an integer in \[2, .*\], got 2.5"),
    ({"n_classes": 1}, r"n_classes .* got 1"),
    ({"layer_sizes": "41"}, r"layer_sizes must be a sequence of positive integers ending in 1.*got '41'"),
    ({"layer_sizes": (4, 2.5, 1)}, r"layer_sizes\[1\] must be an integer >= 1, got 2.5"),
    ({"context_bits": 2.5}, r"context_bits must be an integer in \[0, 16\], got 2.5"),
    ({"context_bits": 40}, r"context_bits .* got 40"),
    ({"seed": -1}, r"seed must be an integer"),
])
def test_a_bad_network_setting_is_refused_at_construction(learner, setting, message):
    with pytest.raises(ValueError, match=message):
        learner(**setting)


@pytest.mark.parametrize("setting, message", [
    ({"size": 2.9}, r"Pool.size must be an integer in \[0, \d+\], got 2.9"),
    ({"min_segment": 12}, r"Pool.min_segment must be a power of two in \[1, \d+\], got 12"),
    ({"reservoir_size": 0}, r"Pool.reservoir_size must be an integer in \[1, \d+\], got 0"),
    ({"eviction": "lru"}, r"Pool.eviction must be one of 'fifo', 'spacing', got 'lru'"),
    ({"joint_evidence": "yes"}, r"Pool.joint_evidence must be True or False"),
    ({"size": 2, "trained_members": 3}, r"Pool.trained_members must be None or in 1..size \(2\), got 3"),
])
def test_a_bad_pool_setting_is_refused_when_the_pool_is_made(setting, message):
    with pytest.raises(ValueError, match=message):
        Pool(**setting)


@pytest.mark.parametrize("learner", [nctl.NCTL, nctl.NCTLRegressor, NCTLClassifier])
def test_a_pool_that_is_not_a_pool_is_refused_at_construction(learner):
    with pytest.raises(ValueError, match=r"pool must be an nctl.Pool, e.g. nctl.Pool\(size=7\), got 7"):
        learner(pool=7)


@pytest.mark.parametrize("learner", [nctl.NCTL, NCTLClassifier])
@pytest.mark.parametrize("setting, message", [
    ({"split_prob": 1.5}, r"split_prob must be a finite number in \[0, 1\], got 1.5"),
    ({"split_prob": [0.5, 1.5]}, r"split_prob must be a number or a sequence of numbers in \[0, 1\], got \[0.5, 1.5\]"),
    ({"split_prob": ()}, r"split_prob must be a number or a non-empty sequence of distinct numbers in \[0, 1\], got \(\)"),
    ({"depth": 2.5}, r"depth must be None or an integer in \[0, 31\], got 2.5"),
])
def test_a_bad_nctl_setting_is_refused_at_construction(learner, setting, message):
    with pytest.raises(ValueError, match=message):
        learner(**setting)


def test_integer_valued_floats_are_stored_as_integers():
    model = nctl.NCTL(pool=Pool(size=3.0, min_segment=16.0), context_bits=2.0, layer_sizes=[4.0, 1])
    assert (model.pool.size, model.pool.min_segment, model.context_bits, model.layer_sizes) == (3, 16, 2, (4, 1))
    assert all(type(v) is int for v in (model.pool.size, model.pool.min_segment, model.context_bits))


def test_a_state_that_does_not_fit_in_memory_is_refused_on_the_first_example(monkeypatch):
    model = nctl.GLN(**TINY)
    monkeypatch.setattr(memory, "rooms", lambda: [memory.Room("a test's bound", model.state_bytes(4) - 1)])
    X, y = data()
    with pytest.raises(MemoryError, match=r"GLN with 4 features needs .* GB but .* GB is free \(a test's bound\); "
                                          r"lower context_bits or layer_sizes, or give the process more memory$"):
        model.learn_many(X, y)
    with pytest.raises(MemoryError):
        model.predict_proba_one(X[0])
    assert model.state_ is None and model.n_features_ is None
    monkeypatch.setattr(memory, "rooms", lambda: [memory.Room("a test's bound", model.state_bytes(4))])
    assert model.learn_many(X, y).shape == (20,)


# ----------------------------------------------------------------------------- 7, 9: inputs


@pytest.mark.parametrize("make, shape", [(lambda: nctl.GLN(**TINY), (0,)), (lambda: nctl.NCTL(**TINY_NCTL), (0,)),
                                         (lambda: nctl.GLN(**TINY, n_classes=3), (0, 3))])
def test_an_empty_batch_is_a_no_op(make, shape):
    model = make()
    assert model.learn_many(np.zeros((0, 4)), np.zeros(0, int)).shape == shape
    assert model.predict_proba_many(np.zeros((0, 4))).shape == shape
    assert model.state_ is None and model.t_ == 0


def test_an_empty_batch_after_learning_changes_nothing():
    model = nctl.GLN(**TINY)
    X, y = data()
    model.learn_many(X, y)
    before = model.predict_proba_many(X)
    assert model.learn_many(X[:0], y[:0]).shape == (0,) and model.t_ == 20
    np.testing.assert_array_equal(model.predict_proba_many(X), before)


@pytest.mark.parametrize("make", [lambda: nctl.GLN(**TINY), lambda: nctl.NCTL(**TINY_NCTL)])
def test_zero_features_is_a_clear_error(make):
    with pytest.raises(ValueError, match=r"X has no features \(shape \(3, 0\)\)"):
        make().learn_many(np.zeros((3, 0)), np.zeros(3, int))
    with pytest.raises(ValueError, match="x has no features"):
        make().predict_proba_one(np.zeros(0))


def test_float64_features_beyond_float32_range_are_refused():
    model = nctl.GLN(**TINY)
    X, y = data()
    X = X.astype(np.float64)
    X[3, 1] = 1e39
    with pytest.raises(ValueError, match="beyond float32's range"):
        model.learn_many(X, y)
    with pytest.raises(ValueError, match="beyond float32's range"):
        GLNClassifier(**TINY).learn_one({"a": 1e39}, True)
    assert model.state_ is None


# ----------------------------------------------------------------------------- 2, 10: save and load


def disk_full(file, **arrays):
    """``np.savez`` on a disk that fills up after a few bytes."""
    file.write(b"PK\x03\x04 half an archive")
    raise OSError(28, "No space left on device")


def test_a_save_that_fails_midway_keeps_the_previous_file(tmp_path, monkeypatch):
    X, y = data()
    model = nctl.GLN(**TINY)
    model.learn_many(X, y)
    path = tmp_path / "model.npz"
    model.save(path)
    before = path.read_bytes()
    model.learn_many(X, y)
    monkeypatch.setattr(np, "savez", disk_full)
    with pytest.raises(OSError, match="No space"):
        model.save(path)
    assert path.read_bytes() == before and [p.name for p in tmp_path.iterdir()] == ["model.npz"]
    monkeypatch.undo()
    assert nctl.load(path).t_ == 20


def _meta_npz(path, meta):
    np.savez(path, meta=np.array(json.dumps(meta)), leaf_0=np.zeros(3))


def _npy(path):
    with open(path, "wb") as file:
        np.save(file, np.zeros(3))


@pytest.mark.parametrize("write, problem", [
    (lambda p: p.write_text("hello"), "not an nctl save file: a save is an npz archive, and this file is not one"),
    (lambda p: p.write_bytes(b""), "not an nctl save file"),
    (lambda p: p.write_bytes(np.random.default_rng(0).bytes(5000)), "not an nctl save file"),
    (_npy, "not an nctl save file"),
    (lambda p: _meta_npz(p, {"format": "7", "class": "GLN"}), "GLN saved in format '7', but"),
    (lambda p: np.savez(p, weights=np.zeros(3)), "meta"),
    (lambda p: _meta_npz(p, {"format": 1, "class": "GLN"}), "GLN saved in format 1, but this version of nctl reads GLN saves of format 2 or 3 or 4 or 5 or 6"),
    (lambda p: _meta_npz(p, {"format": 2, "class": "NCTL"}), "NCTL saved in format 2, .* train the learner again"),
    (lambda p: _meta_npz(p, {"format": 2, "class": "Perceptron"}), "unknown learner class 'Perceptron'"),
    (lambda p: _meta_npz(p, {"format": 2, "class": "GLN", "params": {"context_bits": 99}, "n_features": 3, "t": 0,
                             "shapes": {}}), "context_bits must be"),
])
def test_load_of_a_wrong_file_names_the_file_and_the_problem(tmp_path, write, problem):
    path = tmp_path / "model.npz"
    write(path)
    with pytest.raises(ValueError, match=problem) as error:
        nctl.load(path)
    assert str(path) in str(error.value)


def test_load_of_a_truncated_save_names_the_file(tmp_path):
    X, y = data()
    model = nctl.GLN(**TINY)
    model.learn_many(X, y)
    path = tmp_path / "model.npz"
    model.save(path)
    whole = path.read_bytes()
    for cut in (len(whole) // 2, len(whole) - 10):
        path.write_bytes(whole[:cut])
        with pytest.raises(ValueError, match=f"{path} is not a readable nctl save .*save the learner again"):
            nctl.load(path)



# ----------------------------------------------------------------------------- 2, 10: checkpoints


def test_a_checkpoint_cut_short_keeps_the_previous_one_and_a_damaged_one_is_named(tmp_path, monkeypatch):
    X, y = data()
    model = nctl.GLN(**TINY)
    model.learn_many(X, y)
    checkpoint = FileCheckpoint(tmp_path / "gln")
    checkpoint.save(model, 1, {"frozen": np.ones((3, 2))})
    monkeypatch.setattr(np, "savez", disk_full)
    with pytest.raises(OSError, match="No space"):
        checkpoint.save(model, 2, {"frozen": np.ones((3, 2))})
    monkeypatch.undo()
    learner, evaluations, curve = FileCheckpoint(tmp_path / "gln").load()
    assert evaluations == 1 and learner.t_ == 20 and curve["frozen"].shape == (1, 2)
    saved = tmp_path / "gln" / "learner-00001.npz"
    saved.write_bytes(saved.read_bytes()[:200])
    with pytest.raises(ValueError, match=f"checkpoint file {saved} is unreadable .*delete {tmp_path / 'gln'} to start"):
        FileCheckpoint(tmp_path / "gln").load()


# ----------------------------------------------------------------------------- 1, 3, 4, 8: results files

SETTINGS = {"learners": '["gln"]', "stream_args.n_segments": "3", "stream_args.segment_length": "40"}
QUICK = ["--quiet", *[arg for key, value in SETTINGS.items() for arg in ("--set", f"{key}={value}")]]


def nctl_run(out, *extra) -> int:
    return cli.main(["run", "demo", "--out", str(out), *QUICK, *extra])


def quick_demo(**more):
    return configs.get("demo").replace({**SETTINGS, **more})


def strict_json(path):
    return json.loads(path.read_text(), parse_constant=lambda token: pytest.fail(f"bare {token} in {path}"))


def no_compute(monkeypatch):
    monkeypatch.setattr(run_module, "run_seed", lambda *args: pytest.fail("a seed ran"))


def test_a_run_with_other_settings_keeps_the_first_runs_seeds(tmp_path):
    assert nctl_run(tmp_path, "--seeds", "2") == 0
    first = config_folder(tmp_path, quick_demo())
    kept = {path: path.read_bytes() for path in (first / "seeds").iterdir()}
    assert len(kept) == 2
    assert nctl_run(tmp_path, "--set", "max_steps=100") == 0
    assert {path: path.read_bytes() for path in (first / "seeds").iterdir()} == kept
    assert [seed["seed"] for seed in strict_json(first / "results.json")["seeds"]] == [0, 1]
    latest = strict_json(tmp_path / "demo" / "results.json")  # the configuration run last
    assert latest["config"]["max_steps"] == 100 and [seed["steps"] for seed in latest["seeds"]] == [100]
    assert latest == strict_json(config_folder(tmp_path, quick_demo(max_steps="100")) / "results.json")


def test_a_seed_file_of_the_earlier_layout_is_reused(tmp_path, monkeypatch):
    exp = quick_demo()
    earlier = tmp_path / "demo" / "seeds" / "seed-0000.json"
    earlier.parent.mkdir(parents=True)
    earlier.write_text(json.dumps({"config_hash": config_hash(exp), "result": {"seed": 0, "steps": 7, "learners": {}}}))
    no_compute(monkeypatch)
    assert run_module.run(exp, [0], tmp_path, progress=False)["seeds"] == [{"seed": 0, "steps": 7, "learners": {}}]
    assert (config_folder(tmp_path, exp) / "seeds" / "seed-0000.json").exists()


def test_an_unwritable_out_is_refused_before_any_compute(tmp_path, monkeypatch, capsys):
    no_compute(monkeypatch)
    (tmp_path / "file").write_text("")
    out = tmp_path / "file" / "figures"
    assert nctl_run(out) == 2
    assert cli.main(["boundaries", "--out", str(out)]) == 2  # before any data is read or any step trained
    errors = capsys.readouterr().err.splitlines()
    assert len(errors) == 2 and all(error.startswith(f"nctl: error: cannot write in {out}") for error in errors)


def test_concurrent_writers_keep_every_finished_seed_and_never_show_half_a_file(tmp_path):
    exp = quick_demo()
    folder, key = config_folder(tmp_path, exp), config_hash(exp)
    errors, stop = [], threading.Event()

    def finish(seed):
        try:
            write_seed(folder, seed, key, {"seed": seed, "steps": 1, "learners": {}})
            write_results(exp, folder)
        except Exception as error:  # kept: an exception in a thread would not fail the test
            errors.append(error)

    def read():
        while not stop.is_set():
            try:
                strict_json(folder / "results.json")
            except FileNotFoundError:
                pass
            except ValueError as error:
                errors.append(error)

    folder.mkdir(parents=True)
    reader = threading.Thread(target=read)
    writers = [threading.Thread(target=finish, args=(seed,)) for seed in range(24)]
    for thread in [reader, *writers]:
        thread.start()
    for thread in writers:
        thread.join()
    stop.set()
    reader.join()
    assert errors == []
    assert [seed["seed"] for seed in strict_json(folder / "results.json")["seeds"]] == list(range(24))
    assert not list(folder.glob(".*.tmp"))


def test_old_results_files_with_nan_and_new_ones_with_null_read_alike(tmp_path):
    nan = float("nan")
    seed = {"seed": 0, "steps": 4, "learners": {"gln": {
        "accuracy": 0.5, "log_loss": 0.7, "kappa_temporal": nan, "curve_steps": [0, 2], "window": 2,
        "windowed_accuracy": [0.5, 0.75], "windowed_kappa_temporal": [nan, 0.1]}}}
    results = aggregate(configs.get("demo"), [seed])
    old, new = tmp_path / "old.json", tmp_path / "new.json"
    old.write_text(json.dumps(results))
    write_json(new, results)
    assert "NaN" in old.read_text() and strict_json(new)["summary"]["learners"]["gln"]["kappa_temporal"]["mean"] is None
    assert report.markdown([report.load(old)]) == report.markdown([report.load(new)])
    assert "| demo | GLN | prequential | kappa_temporal | nan |" in report.markdown([report.load(new)])
    for path in (old, new):
        assert [p.name for p in plots.plot_results(report.load(path), tmp_path / path.stem)] == ["demo-accuracy.png"]


def test_a_corrupt_cached_seed_file_is_named_and_run_again(tmp_path, capsys):
    assert nctl_run(tmp_path) == 0
    path = config_folder(tmp_path, quick_demo()) / "seeds" / "seed-0000.json"
    good = strict_json(path)
    path.write_text(path.read_text()[:100])
    assert nctl_run(tmp_path) == 0
    assert f"seed file {path} is unreadable" in capsys.readouterr().err
    assert strict_json(path)["result"]["learners"]["gln"]["accuracy"] == good["result"]["learners"]["gln"]["accuracy"]


# ----------------------------------------------------------------------------- 5, 6, 11: the command line


@pytest.mark.parametrize("name, setting, message", [
    ("demo", "nctl.pool_size=2.9", "nctl.pool_size must be an integer in [0, 4096], got 2.9"),
    ("demo", "network.learning_rate=0", "network.learning_rate must be a finite number > 0, got 0"),
    ("demo", 'network.layer_sizes="41"', "network.layer_sizes must be a sequence of positive integers"),
    ("demo", "nctl.min_segment=12", "nctl.min_segment must be a power of two"),
    ("demo", "network.context_bits=40", "network.context_bits must be an integer in [0, 16], got 40"),
    ("demo", "nctl.foo=1", "unknown setting(s) nctl.foo; valid: nctl.pool_size"),
    ("demo", "learners=nctl", "learners must be a non-empty list of names"),
    ("demo", "max_steps=-5", "max_steps must be None or an integer >= 1, got -5"),
    ("demo", "steps_per_task=10", "'steps_per_task' does not apply to prequential experiments"),
    ("split-mnist", "max_steps=100", "'max_steps' does not apply to task-matrix experiments"),
    ("demo", "pool=3", "unknown setting 'pool'"),
    ("demo", "seeds.x=1", "setting 'seeds' has no entries"),
    ("demo", "stream_args.n_segments=x", "stream_args.n_segments must be an integer, got 'x'"),
])
def test_a_bad_setting_is_one_line_and_status_2_before_any_compute(name, setting, message, tmp_path, monkeypatch,
                                                                    capsys):
    no_compute(monkeypatch)
    assert cli.main(["run", name, "--out", str(tmp_path), "--set", setting]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and message in error
    assert not (tmp_path / name).exists()


@pytest.mark.parametrize("args", [["--seeds", "0"], ["--seeds", "-1"], ["--first-seed", "-3"], ["--workers", "0"]])
def test_seed_and_worker_counts_out_of_range_are_refused(args, tmp_path, monkeypatch, capsys):
    no_compute(monkeypatch)
    with pytest.raises(SystemExit) as stop:
        cli.main(["run", "demo", "--out", str(tmp_path), *args])
    assert stop.value.code == 2 and "must be an integer >=" in capsys.readouterr().err


def test_ordinary_mistakes_are_one_line_and_status_2_and_debug_shows_the_traceback(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    unreadable = tmp_path / "results.json"
    unreadable.write_text('{"experiment": "demo", "kind"')
    mistakes = [
        (["run", "split-cifar"], "unknown experiment 'split-cifar'"),
        (["run", "split-mnist", "--quiet", "--out", str(tmp_path / "r"), "--data-dir", str(tmp_path / "empty")],
         "not found in the data folder"),
        (["report", str(unreadable)], f"{unreadable} is unreadable"),
        (["plot", str(tmp_path / "none")], "no results file at"),
    ]
    for args, message in mistakes:
        assert cli.main(args) == 2
        error = capsys.readouterr().err
        assert error.count("\n") == 1 and error.startswith("nctl: error: ") and message in error
    with pytest.raises(ValueError, match="unknown experiment"):
        cli.main(["run", "split-cifar", "--debug"])
    with pytest.raises(ValueError, match="nctl.foo"):
        cli.main(["--debug", "run", "demo", "--set", "nctl.foo=1"])


# ----------------------------------------------------------------------------- fault injection


def kill_when(process: subprocess.Popen, ready, timeout: float = 180.0) -> None:
    """SIGKILL ``process`` as soon as ``ready()`` holds."""
    deadline = time.monotonic() + timeout
    while not ready():
        assert process.poll() is None, "the process ended before it was killed"
        assert time.monotonic() < deadline, "gave up waiting"
        time.sleep(0.001)
    process.send_signal(signal.SIGKILL)
    process.wait()


def test_sigkill_mid_seed_then_a_rerun_finishes_with_every_finished_seed_intact(tmp_path):
    args = ["run", "demo", "--out", str(tmp_path), "--quiet", "--seeds", "3", "--set", 'learners=["gln"]']
    seeds = config_folder(tmp_path, configs.get("demo").replace({"learners": '["gln"]'})) / "seeds"
    process = subprocess.Popen([sys.executable, "-m", "nctl.cli", *args], stdout=subprocess.DEVNULL)
    kill_when(process, lambda: (seeds / "seed-0000.json").exists())
    finished = {path: (path.read_bytes(), path.stat().st_mtime_ns) for path in seeds.glob("seed-*.json")}
    assert 1 <= len(finished) < 3
    assert cli.main(args) == 0
    assert all(path.read_bytes() == text and path.stat().st_mtime_ns == when
               for path, (text, when) in finished.items())
    assert [seed["seed"] for seed in strict_json(seeds.parent / "results.json")["seeds"]] == [0, 1, 2]


SAVER = """
import sys
import numpy as np
import nctl
path = sys.argv[1]
X = np.random.default_rng(0).standard_normal((1, 200)).astype(np.float32)
models = [nctl.GLN(layer_sizes=(1000, 1), context_bits=4, seed=seed) for seed in (1, 2)]
for seed, model in zip((1, 2), models):
    model.learn_many(X, [1])
    model.save(f"{path}.{seed}")
while True:
    for model in models:
        model.save(path)
"""


def test_sigkill_mid_save_leaves_the_previous_save_whole(tmp_path):
    path = tmp_path / "model.npz"  # each save of this GLN is 16 MB
    process = subprocess.Popen([sys.executable, "-c", SAVER, str(path)])
    kill_when(process, lambda: path.exists() and any(tmp_path.glob(".model.npz.*.tmp")))  # a later save under way
    restored = jax.tree.leaves(nctl.load(path).state_)
    saves = [jax.tree.leaves(nctl.load(f"{path}.{seed}").state_) for seed in (1, 2)]
    assert any(all(np.array_equal(a, b) for a, b in zip(restored, save)) for save in saves)
    left = list(tmp_path.glob(".model.npz.*.tmp"))  # the killed save's (unless it was renamed as it died)
    for temp in left:
        os.utime(temp, (time.time() - 2 * atomic.STALE_SECONDS,) * 2)
    nctl.load(path).save(path)  # the next save of the same target removes it
    assert not list(tmp_path.glob(".model.npz.*.tmp"))


# ----------------------------------------------------------------------------- issue 59, 2: memory limits

LIMITED = """
import resource, sys
import numpy as np, jax, nctl
from nctl import memory
jax.devices()  # the limit leaves a margin above what JAX's CPU client holds once started
held = next(int(line.split()[1]) * 1024 for line in open("/proc/self/status") if line.startswith("VmSize:"))
context_bits, room = int(sys.argv[1]), int(sys.argv[2])
if sys.argv[3] == "unseen":  # a bound the up-front check does not see: the allocation itself fails
    memory.rooms = lambda: []
resource.setrlimit(resource.RLIMIT_AS, (held + room, resource.getrlimit(resource.RLIMIT_AS)[1]))
model = nctl.NCTL(layer_sizes=(20, 1), context_bits=context_bits)
try:
    model.learn_one(np.zeros(100, np.float32), 1)
except MemoryError as error:
    print(f"MemoryError: {error}; state {model.state_}")
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the address-space limit is read from /proc")
@pytest.mark.parametrize("case, context_bits, room, message", [
    ("seen", 8, 250_000_000, r"NCTL with 100 features needs 0\.4 GB but 0\.\d GB is free under the address-space "
                             r"limit RLIMIT_AS \(ulimit -v\) of \d+\.\d GB once \d\.\d GB is kept for XLA's "
                             r"compiler and threads; "
                             r"lower context_bits, layer_sizes or the pool's size"),
    # room for the learner's first steps, not for the state (made in numpy)
    ("unseen", 10, 600_000_000, r"NCTL with 100 features needs 1\.3 GB and its allocation failed "
                                r"\(Unable to allocate .*\); lower context_bits"),
])
def test_a_state_beyond_the_address_space_limit_is_a_clear_error_not_a_hang(case, context_bits, room, message):
    """As ``ulimit -v``, but set inside the process once JAX has started, at a margin above the address
    space it then holds (which differs between machines and JAX versions). Before the limits were read,
    the first case went on to allocate; before the allocation was waited for, both hung or aborted (XLA
    waiting on, or aborting in, a failed allocation); a hang ends at the timeout."""
    # one malloc arena: glibc reserves 64 MB of address space for each thread's arena as threads first
    # allocate, so with several arenas what is left under the limit depended on thread timing (with the
    # other core busy, XLA's compiler threw bad_alloc in 4 runs of 10)
    env = {**os.environ, "MALLOC_ARENA_MAX": "1"}
    try:
        done = subprocess.run([sys.executable, "-c", LIMITED, str(context_bits), str(room), case], capture_output=True,
                              text=True, timeout=300, env=env)
    except subprocess.TimeoutExpired:
        pytest.fail("the learner hung under the address-space limit")
    assert done.returncode == 0, done.stderr[-2000:]
    assert re.fullmatch(f"MemoryError: {message}.*; state None\n", done.stdout), done.stdout + done.stderr[-2000:]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the address-space limit is read from /proc")
def test_nctl_run_under_an_address_space_too_small_for_xla_is_one_line_before_any_compiling(tmp_path):
    """``ulimit -v 1500000``: the demo's states are small, but XLA's compiler and threads need more address
    space than is left; the run is refused with one line naming the limit (it died of std::bad_alloc in the
    compiler, rc 134)."""
    def limited():
        resource.setrlimit(resource.RLIMIT_AS, (1_500_000_000, resource.getrlimit(resource.RLIMIT_AS)[1]))

    env = {**os.environ, "NCTL_CACHE_DIR": "off"}
    done = subprocess.run([sys.executable, "-m", "nctl.cli", "run", "demo", "--seeds", "1", "--out", str(tmp_path),
                           "--quiet"], capture_output=True, text=True, env=env, timeout=300, preexec_fn=limited)
    assert done.returncode == 2, done.stderr[-2000:]
    assert re.search(r"needs 0\.0 GB but 0\.\d GB is free under the address-space limit RLIMIT_AS \(ulimit -v\) "
                     r"of 1\.5 GB once \d\.\d GB is kept for XLA's compiler and threads", done.stderr), done.stderr[-2000:]
    assert "Traceback" not in done.stderr


def test_cgroup_memory_limits_of_the_group_and_the_groups_above_are_read(tmp_path):
    proc, v2, v1 = tmp_path / "proc", tmp_path / "unified", tmp_path / "memory"
    proc.mkdir()
    (proc / "cgroup").write_text("4:memory:/batch/job\n1:cpu,cpuacct:/\n0::/user/job\n")
    (proc / "mountinfo").write_text(f"30 23 0:28 / {v2} rw,relatime - cgroup2 cgroup2 rw\n"
                                    f"31 23 0:29 / {tmp_path / 'cpu'} rw - cgroup cgroup rw,cpu,cpuacct\n"
                                    f"35 23 0:32 / {v1} rw,relatime - cgroup cgroup rw,memory\n")
    groups = {
        v2 / "user": {"memory.max": "3000000000", "memory.current": "1000000000",
                      "memory.stat": "anon 400000000\ninactive_file 500000000\n"},  # page cache counts as free
        v2 / "user" / "job": {"memory.max": "max", "memory.current": "900000000", "memory.stat": "anon 1\n"},
        v1 / "batch": {"memory.limit_in_bytes": "9223372036854771712", "memory.usage_in_bytes": "5",
                       "memory.stat": "total_inactive_file 0\n"},  # the kernel's "no limit"
        v1 / "batch" / "job": {"memory.limit_in_bytes": "2000000000", "memory.usage_in_bytes": "1500000000",
                               "memory.stat": "total_inactive_file 0\n"},
    }
    for folder, files in groups.items():
        folder.mkdir(parents=True)
        for name, text in files.items():
            (folder / name).write_text(text)
    rooms = memory.cgroup_rooms(proc)
    assert [(room.left, room.limit) for room in rooms] == [(500_000_000, 2_000_000_000), (2_500_000_000, 3_000_000_000)]
    limit_file = v1 / "batch" / "job" / "memory.limit_in_bytes"
    assert str(rooms[0]) == f"0.5 GB is free under the cgroup memory limit {limit_file} of 2.0 GB"
    (v2 / "memory.max").write_text("1000000000")
    (v2 / "memory.current").write_text("200000000")
    (v2 / "memory.stat").write_text("inactive_file 0\n")
    (proc / "cgroup").write_text("0::/user/gone\n")  # a group without files of its own: the groups above
    assert [(room.left, room.limit) for room in memory.cgroup_rooms(proc)] == [(2_500_000_000, 3_000_000_000),
                                                                                (800_000_000, 1_000_000_000)]
    for seen in ("/docker/abc", "/"):  # a container's hierarchy mounted from its own group: the mount is the group
        (proc / "cgroup").write_text(f"0::{seen}\n")
        (proc / "mountinfo").write_text(f"30 23 0:28 /docker/abc {v2} rw - cgroup2 cgroup2 rw\n")
        assert [(room.left, room.limit) for room in memory.cgroup_rooms(proc)] == [(800_000_000, 1_000_000_000)]
    (proc / "mountinfo").write_text("")  # no hierarchy mounted
    assert memory.cgroup_rooms(proc) == []


# ----------------------------------------------------------------------------- issue 59, 4: copies


def _learn_rows(model, X, y):
    if isinstance(model, (GLNClassifier, NCTLClassifier)):
        for row, label in zip(X, y):
            model.learn_one(dict(enumerate(row.tolist())), bool(label))
    elif isinstance(model, (SkGLNClassifier, SkNCTLClassifier)):
        model.partial_fit(X, y, classes=[0, 1])
    else:
        for row, label in zip(X, y):  # some rows kept back by learn_one when copied
            model.learn_one(row, label)


def _predictions(model, X):
    if isinstance(model, (GLNClassifier, NCTLClassifier)):
        return np.array([model.predict_proba_one(dict(enumerate(row.tolist())))[True] for row in X])
    return model.predict_proba(X) if isinstance(model, (SkGLNClassifier, SkNCTLClassifier)) else \
        model.predict_proba_many(X)


@pytest.mark.parametrize("how", [copy.copy, copy.deepcopy])
@pytest.mark.parametrize("make", [lambda: nctl.GLN(**TINY), lambda: nctl.NCTL(**TINY_NCTL),
                                  lambda: GLNClassifier(**TINY), lambda: NCTLClassifier(**TINY_NCTL),
                                  lambda: SkGLNClassifier(**TINY), lambda: SkNCTLClassifier(**TINY_NCTL)],
                         ids=["GLN", "NCTL", "river-GLN", "river-NCTL", "sklearn-GLN", "sklearn-NCTL"])
def test_a_copy_learns_apart_from_the_original(make, how):
    X, y = data(40)
    model = make()
    _learn_rows(model, X[:20], y[:20])
    before = _predictions(model, X)
    twin = how(model)
    _learn_rows(twin, X[20:], y[20:])  # learning donates the copy's buffers: they must be its own
    np.testing.assert_array_equal(_predictions(model, X), before)
    _learn_rows(model, X[20:], y[20:])
    np.testing.assert_array_equal(_predictions(twin, X), _predictions(model, X))
    learner = getattr(twin, "learner_", getattr(twin, "_learner", twin))
    # held as its engine holds a fresh state: committed JAX arrays (nothing compiles twice), or the native
    # engine's own writable host arrays
    if learner.engine_ == "jax":
        assert all(leaf.committed for leaf in jax.tree.leaves(learner.state_))
    else:
        assert all(isinstance(leaf, np.ndarray) and leaf.flags.writeable for leaf in jax.tree.leaves(learner.state_))


# ----------------------------------------------------------------------------- issue 59, 5: refused fits


def _estimator_attributes(model) -> dict:
    return {name: value.tolist() if isinstance(value, np.ndarray) else value for name, value in vars(model).items()}


def _beyond_float32(X, y):
    X = X.astype(np.float64)
    X[3, 1] = 1e39
    return X, y


@pytest.mark.parametrize("estimator", [SkGLNClassifier, SkNCTLClassifier], ids=["GLN", "NCTL"])
@pytest.mark.parametrize("refused, message", [
    (lambda m, X, y: m.fit(np.hstack([X, X]), np.zeros_like(y)), "at least 2 classes"),
    (lambda m, X, y: m.fit(*_beyond_float32(X, y)), "beyond float32's range"),
    (lambda m, X, y: m.fit(np.where(X > 0, np.nan, X), y), "NaN"),
    (lambda m, X, y: m.partial_fit(X[:, :3], y), "features"),
    (lambda m, X, y: m.partial_fit(*_beyond_float32(X, y)), "beyond float32's range"),
    (lambda m, X, y: m.partial_fit(X, y + 5), r"label \d is not one of classes_ \[0, 1\]"),
    (lambda m, X, y: m.partial_fit(X, y, classes=[0, 1, 2]), "differs from the classes"),
], ids=["one-class", "1e39", "nan", "features", "partial-1e39", "partial-label", "partial-classes"])
def test_a_refused_fit_leaves_a_fitted_estimator_as_it_was(estimator, refused, message):
    X, y = data(40)
    model = estimator(**(TINY_NCTL if estimator is SkNCTLClassifier else TINY)).fit(X[:20], y[:20])
    attributes, predictions, t = _estimator_attributes(model), model.predict_proba(X), model.learner_.t_
    with pytest.raises(ValueError, match=message):
        refused(model, X[20:], y[20:])
    assert _estimator_attributes(model) == attributes and model.learner_.t_ == t
    np.testing.assert_array_equal(model.predict_proba(X), predictions)
    model.partial_fit(X[20:], y[20:])  # and it goes on learning


def test_a_refused_first_partial_fit_leaves_the_estimator_unfitted():
    X, y = data(40)
    model = SkGLNClassifier(**TINY)
    with pytest.raises(ValueError, match="beyond float32's range"):
        model.partial_fit(*_beyond_float32(X, y), classes=[0, 1])
    assert _estimator_attributes(model) == _estimator_attributes(SkGLNClassifier(**TINY))
    with pytest.raises(ValueError, match="classes must be given on the first call"):
        model.partial_fit(X, y)


# ----------------------------------------------------------------------------- issue 59, 7: save files


def _edited_save(tmp_path, model, field, value):
    """``model``'s save with one field of its description (``shapes.x``: of its shapes) set to ``value``."""
    model.save(tmp_path / "model.npz")
    with np.load(tmp_path / "model.npz") as saved:
        arrays = {key: saved[key] for key in saved.files}
    meta = json.loads(str(arrays.pop("meta")))
    *outer, last = field.split(".")
    (meta[outer[0]] if outer else meta)[last] = value
    np.savez(tmp_path / "edited.npz", meta=np.array(json.dumps(meta)), **arrays)
    return tmp_path / "edited.npz"


@pytest.mark.parametrize("field, value, message", [
    ("t", "abc", "field t must be an integer >= 0, got 'abc'"),
    ("t", -5, "field t must be an integer >= 0, got -5"),
    ("t", 2.5, "field t must be an integer >= 0, got 2.5"),
    ("t", True, "field t must be an integer >= 0, got True"),
    ("n_features", 0, "field n_features must be an integer >= 1, got 0"),
    ("n_features", "4", "field n_features must be an integer >= 1, got '4'"),
    ("n_features", 5, r"array \d+ has shape .*, expected"),
    ("params", [1, 2], r"field params must be an object of the learner's parameters, got \[1, 2\]"),
    ("format", 7.0, "an NCTL saved in format 7.0, but"),
    ("shapes", None, "field shapes must be an object, got None"),
    ("shapes.max_depth", -1, "field shapes.max_depth must be an integer >= 0, got -1"),
    ("shapes.record_rows", "many", "field shapes.record_rows must be an integer >= 1, got 'many'"),
    ("shapes.arena_depth", 7, r"field shapes.arena_depth must be an integer in \[0, shapes.max_depth\], got 7"),
    ("shapes.fixed_blocks", [1, 0], r"field shapes.fixed_blocks must be a list of true/false, got \[1, 0\]"),
    ("shapes.record_rows", 100, r"array \d+ has shape .*, expected"),
])
def test_a_hand_edited_save_is_refused_naming_the_field(tmp_path, field, value, message):
    X, y = data()
    model = nctl.NCTL(**TINY_NCTL)
    model.learn_many(X, y)
    path = _edited_save(tmp_path, model, field, value)
    with pytest.raises(ValueError, match=f"{path} is not a readable nctl save \\({message}"):
        nctl.load(path)
    assert nctl.load(tmp_path / "model.npz").t_ == 20  # the unedited save loads


def test_a_save_removes_the_stale_temporaries_of_its_target_and_nothing_else(tmp_path):
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()
    old = time.time() - 2 * atomic.STALE_SECONDS
    temporaries = {
        "stale": f".model.npz.{ended.pid}-0123abcd.tmp",
        "fresh": f".model.npz.{ended.pid}-89abcdef.tmp",  # perhaps a writer this machine cannot see
        "live": f".model.npz.{os.getpid()}-00ff00ff.tmp",  # a writer of this process (another thread)
        "other target": f".other.npz.{ended.pid}-0123abcd.tmp",
        "not a temporary": f"model.npz.{ended.pid}-0123abcd.tmp",
        "prefix of a longer target": f".model.npz.backup.{ended.pid}-0123abcd.tmp",
    }
    for name, file in temporaries.items():
        (tmp_path / file).write_bytes(b"half a save")
        if name != "fresh":
            os.utime(tmp_path / file, (old, old))
    X, y = data()
    model = nctl.GLN(**TINY)
    model.learn_many(X, y)
    model.save(tmp_path / "model.npz")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["model.npz", *(file for name, file in temporaries.items() if name != "stale")])
    assert nctl.load(tmp_path / "model.npz").t_ == 20
