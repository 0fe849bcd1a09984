"""Ctrl-C (SIGINT) while a learner learns leaves it whole: it raises ``nctl.interrupts.Interrupted`` saying
how many rows it learned, and is then exactly the learner that learned those rows, usable and savable.

The signal is raised by the process itself right after a compiled call returns, the moment where a
``KeyboardInterrupt`` would lose the call's result after JAX had deleted the buffers it was given."""

import signal

import numpy as np
import pytest

import nctl
from nctl import interrupts
from nctl.core.engine import driver
from nctl.learners import gln, regressor
from nctl.streams import synthetic

SMALL = dict(layer_sizes=(4, 3, 1), context_bits=2, learning_rate=0.05)
SMALL_NCTL = dict(SMALL, pool_size=3, min_segment=8, reservoir_size=8, depth=9)

LEARNERS = {  # name: (learner factory, module attribute of the compiled call that takes the state)
    "nctl": (lambda: nctl.NCTL(**SMALL_NCTL), (driver, "run_steps")),
    "gln": (lambda: nctl.GLN(**SMALL), (gln, "_gln_chunk")),
    "nctl-regressor": (lambda: nctl.NCTLRegressor(layer_sizes=(4, 1), context_bits=2, pool_size=3, min_segment=8,
                                                  depth=10), (driver, "run_steps")),
    "gln-regressor": (lambda: nctl.GLNRegressor(layer_sizes=(4, 1), context_bits=2), (regressor, "_regressor_chunk")),
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
    make, target = LEARNERS[name]
    X, y = rows(name)
    learner = make()
    learner.learn_many(X[:10], y[:10])
    interrupt_on_call(monkeypatch, target, call=2)
    with pytest.raises(interrupts.Interrupted, match=r"learned the first \d+ of the 590 rows") as stop:
        learner.learn_many(X[10:], y[10:])
    monkeypatch.undo()
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


@pytest.mark.parametrize("name", ["nctl", "nctl-regressor"])
def test_interrupted_pending_rows_wait_to_be_learned(name, monkeypatch):
    """Rows given to ``learn_one`` and interrupted while learned with the next prediction are not lost:
    those not learned yet wait, and the learner ends as one that learned every row."""
    make, target = LEARNERS[name]
    X, y = rows(name, 80)
    learner, same = make(), make()
    learner.learn_one(X[0], y[0])
    for x, target_y in zip(X[1:], y[1:]):
        learner.learn_one(x, target_y)
    interrupt_on_call(monkeypatch, target, call=1)
    predict = learner.predict_one if "regressor" in name else learner.predict_proba_one
    with pytest.raises(interrupts.Interrupted, match="wait to be learned"):
        predict(X[0])
    monkeypatch.undo()
    same.learn_many(X, y)
    assert learner.t_ == same.t_ == len(X)
    np.testing.assert_array_equal(outputs(learner, X[:20]), outputs(same, X[:20]))


def test_a_signal_outside_learning_is_the_usual_keyboard_interrupt():
    with pytest.raises(KeyboardInterrupt) as stop:
        signal.raise_signal(signal.SIGINT)
    assert not isinstance(stop.value, interrupts.Interrupted)


def test_held_gives_the_signal_back_to_the_programs_own_handler():
    seen = []
    previous = signal.signal(signal.SIGINT, lambda *_: seen.append("handled"))
    try:
        with interrupts.held() as note:
            signal.raise_signal(signal.SIGINT)
            assert note.asked and not seen
        assert seen == ["handled"] and not note.asked
    finally:
        signal.signal(signal.SIGINT, previous)
