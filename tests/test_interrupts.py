"""Ctrl-C (SIGINT) while a learner learns leaves it whole: it raises ``nctl.interrupts.Interrupted`` saying
how many rows it learned, and is then exactly the learner that learned those rows, usable and savable.

The signal is raised by the process itself right after a compiled call returns, the moment where a
``KeyboardInterrupt`` would lose the call's result after JAX had deleted the buffers it was given."""

import gc
import os
import re
import signal
import subprocess
import sys
import tempfile
import textwrap
import time

import numpy as np
import pytest

import nctl
from nctl import interrupts
from nctl.core.engine import driver
from nctl.learners.xla_calls import XlaCalls
from nctl.native.gaussian_gln import GaussianGLNCalls
from nctl.native.gln import GLNCalls
from nctl.pool import Pool
from nctl.streams import synthetic

SMALL = dict(layer_sizes=(4, 3, 1), context_bits=2, learning_rate=0.05)
SMALL_NCTL = dict(SMALL, pool=Pool(size=3, min_segment=8, reservoir_size=8), depth=9)

LEARNERS = {  # name: (learner factory, the call that learns a block of rows, engine)
    "nctl": (lambda: nctl.NCTL(**SMALL_NCTL), (driver, "run_steps"), "jax"),
    "gln-native": (lambda: nctl.GLN(**SMALL), (GLNCalls, "learn"), "native"),
    "gln-jax": (lambda: nctl.GLN(**SMALL), (XlaCalls, "learn"), "jax"),
    "nctl-regressor": (lambda: nctl.NCTLRegressor(layer_sizes=(4, 1), context_bits=2, depth=10,
                                                  pool=Pool(size=3, min_segment=8, eviction="spacing")),
                       (driver, "run_steps"), "jax"),
    "gln-regressor": (lambda: nctl.GLNRegressor(layer_sizes=(4, 1), context_bits=2), (XlaCalls, "learn"), "jax"),
    "gln-regressor-native": (lambda: nctl.GLNRegressor(layer_sizes=(4, 1), context_bits=2),
                             (GaussianGLNCalls, "learn"), "native"),
}


def rows(name, n=600):
    stream = synthetic(seed=1, n_features=5, segment_length=100, n_segments=n // 100 + 1)
    X, y, _ = next(stream.chunks(size=n))
    if "regressor" in name:
        y = X[:, 0] * 3.0 + 50.0  # real targets, far from standardised
    return X, y


def interrupt_on_call(monkeypatch, target, call: int):
    """SIGINT raised by the process right after the ``call``-th call of ``target`` returns."""
    module, attribute = target
    real, calls = getattr(module, attribute), []

    def interrupted_after(*args, **kwargs):
        out = real(*args, **kwargs)
        calls.append(1)
        if len(calls) == call:
            signal.raise_signal(signal.SIGINT)
        return out

    monkeypatch.setattr(module, attribute, interrupted_after)


def outputs(learner, X):
    if isinstance(learner, (nctl.NCTLRegressor, nctl.GLNRegressor)):
        return np.stack(learner.predict_distribution_many(X))
    return learner.predict_proba_many(X)


@pytest.mark.parametrize("name", LEARNERS)
def test_learn_many_interrupted_keeps_the_rows_it_learned(name, monkeypatch, tmp_path):
    make, target, engine = LEARNERS[name]
    monkeypatch.setenv("NCTL_ENGINE", engine)
    X, y = rows(name)
    learner = make()
    learner.learn_many(X[:10], y[:10])
    with monkeypatch.context() as patch, \
            pytest.raises(interrupts.Interrupted, match=r"learned the first \d+ of the 590 rows") as stop:
        interrupt_on_call(patch, target, call=2)
        learner.learn_many(X[10:], y[10:])
    done = learner.t_ - 10
    assert 0 < done < 590 and f"first {done} of" in str(stop.value)

    same = make()
    same.learn_many(X[:10 + done], y[:10 + done])
    np.testing.assert_array_equal(outputs(learner, X[:50]), outputs(same, X[:50]))
    learner.save(tmp_path / "m.npz")  # savable, and the file holds the same learner
    np.testing.assert_array_equal(outputs(nctl.load(tmp_path / "m.npz"), X[:50]), outputs(same, X[:50]))
    # and it goes on learning where it stopped, as if nothing had happened
    rest = slice(10 + done, None)
    np.testing.assert_array_equal(learner.learn_many(X[rest], y[rest]), same.learn_many(X[rest], y[rest]))


@pytest.mark.parametrize("name", ["nctl", "gln-jax", "nctl-regressor"])
def test_interrupted_pending_rows_wait_to_be_learned(name, monkeypatch):
    """Rows given to ``learn_one`` and interrupted while learned with the next prediction are not lost:
    those not learned yet wait, and the learner ends as one that learned every row."""
    make, target, engine = LEARNERS[name]
    monkeypatch.setenv("NCTL_ENGINE", engine)
    X, y = rows(name, 80)
    learner, same = make(), make()
    learner.learn_one(X[0], y[0])
    for x, target_y in zip(X[1:], y[1:]):
        learner.learn_one(x, target_y)
    predict = learner.predict_one if "regressor" in name else learner.predict_proba_one
    with monkeypatch.context() as patch, pytest.raises(interrupts.Interrupted, match="wait to be learned"):
        interrupt_on_call(patch, target, call=1)
        predict(X[0])
    same.learn_many(X, y)
    assert learner.t_ == same.t_ == len(X)
    np.testing.assert_array_equal(outputs(learner, X[:20]), outputs(same, X[:20]))


def test_a_row_the_native_engine_learns_at_once_is_counted_when_interrupted(monkeypatch):
    monkeypatch.setenv("NCTL_ENGINE", "native")
    X, y = rows("gln-native", 40)
    learner, same = nctl.GLN(**SMALL), nctl.GLN(**SMALL)
    learner.learn_many(X[:39], y[:39])
    with monkeypatch.context() as patch, pytest.raises(interrupts.Interrupted, match="learned the row"):
        interrupt_on_call(patch, (GLNCalls, "learn"), call=1)
        learner.learn_one(X[39], y[39])
    same.learn_many(X, y)
    assert learner.t_ == same.t_ == 40
    np.testing.assert_array_equal(outputs(learner, X), outputs(same, X))


def test_a_signal_outside_learning_is_the_usual_keyboard_interrupt():
    with pytest.raises(KeyboardInterrupt) as stop:
        signal.raise_signal(signal.SIGINT)
    assert not isinstance(stop.value, interrupts.Interrupted)


def test_a_programs_own_handler_gets_the_signal_once_the_learner_is_whole():
    """A program with a SIGINT handler of its own, installed before its first learner: a signal inside
    learning does not stop it and reaches that handler once the learner is whole (no Interrupted), and
    outside learning as before."""
    program = textwrap.dedent("""
        import signal
        import numpy as np
        import nctl
        from nctl.native.gln import GLNCalls
        seen = []
        signal.signal(signal.SIGINT, lambda *_: seen.append(len(seen)))
        learn = GLNCalls.learn
        def interrupted(self, *args):
            out = learn(self, *args)
            signal.raise_signal(signal.SIGINT)
            return out
        GLNCalls.learn = interrupted
        model = nctl.GLN(layer_sizes=(2, 1), context_bits=1)
        X = np.random.default_rng(0).standard_normal((600, 3)).astype(np.float32)
        model.learn_many(X, (X[:, 0] > 0).astype(int))
        signal.raise_signal(signal.SIGINT)
        print(seen, model.t_)
    """)
    env = {**os.environ, "NCTL_ENGINE": "native", "NCTL_QUIET": "1"}
    run = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, env=env, timeout=300)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split("\n")[-2] == "[0, 1, 2, 3] 600"  # one signal per block of rows learned, one after


def test_ctrl_c_while_nctl_run_compiles_exits_130_with_one_line():
    """``nctl run`` stopped while a seed compiles and learns (no cache: it compiles throughout its first
    seconds): the run says what it kept and exits 130, whenever the signal comes. (Before, the process
    then crashed in the interpreter's teardown at some of these moments, rc 139 or 134.) On the JAX engine,
    which compiles: the native engine runs the demo's two seeds in about two seconds."""
    env = {**os.environ, "NCTL_CACHE_DIR": "off", "NCTL_ENGINE": "jax"}
    for delay in (0.5, 1.5, 3.0):
        with tempfile.TemporaryDirectory() as out:
            run = subprocess.Popen([sys.executable, "-m", "nctl.cli", "run", "demo", "--seeds", "2", "--out", out],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
            seen = ""
            while "seed 0" not in seen:  # the first seed has started: its programs are compiling
                char = run.stderr.read(1)
                assert char, f"nctl run ended before its first seed: {seen[-2000:]}"
                seen += char
            time.sleep(delay)
            run.send_signal(signal.SIGINT)
            _, err = run.communicate(timeout=300)
            assert run.returncode == 130, (delay, run.returncode, err[-2000:])
            assert re.search(r"interrupted: \d of 2 seeds kept in ", err) and "Traceback" not in err


def test_a_ctrl_c_while_a_garbage_collector_callback_runs_is_raised_once_it_returns():
    """JAX's runtime runs a garbage-collector callback; a KeyboardInterrupt raised inside one is printed and
    dropped by Python, and a run would go on: nctl's handler delivers the signal again after it."""
    with interrupts.held():
        pass  # nctl's handler is installed, as after any learning

    def callback(phase, info):
        if phase == "start":
            os.kill(os.getpid(), signal.SIGINT)
            for _ in range(1000):  # Python looks for signals here, inside the callback
                pass

    gc.callbacks.append(callback)
    try:
        with pytest.raises(KeyboardInterrupt):
            gc.collect()
            time.sleep(5)  # the signal comes again here, and ends the sleep
    finally:
        gc.callbacks.remove(callback)
