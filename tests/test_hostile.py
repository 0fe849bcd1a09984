"""Issue 16, case by case: what a careful, hostile user tried, and what must happen instead of losing
finished work or running a bad setting silently. Numbers in the comments are the issue's cases."""

import json

import numpy as np
import pytest

import nctl
from nctl import _memory
from nctl.river import GLNClassifier, NCTLClassifier

TINY = dict(layer_sizes=(3, 1), context_bits=1, learning_rate=0.1)
TINY_NCTL = dict(TINY, pool_size=2, min_segment=4, reservoir_size=4, depth=6)


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


@pytest.mark.parametrize("learner", [nctl.NCTL, NCTLClassifier])
@pytest.mark.parametrize("setting, message", [
    ({"pool_size": 2.9}, r"pool_size must be an integer in \[0, \d+\], got 2.9"),
    ({"min_segment": 12}, r"min_segment must be a power of two in \[1, \d+\], got 12"),
    ({"reservoir_size": 0}, r"reservoir_size must be an integer in \[1, \d+\], got 0"),
    ({"split_prob": 1.5}, r"split_prob must be a finite number in \[0, 1\], got 1.5"),
    ({"eviction": "lru"}, r"eviction must be one of 'fifo', 'spacing', got 'lru'"),
    ({"depth": 2.5}, r"depth must be None or an integer in \[0, 31\], got 2.5"),
    ({"joint_evidence": "yes"}, r"joint_evidence must be True or False"),
])
def test_a_bad_nctl_setting_is_refused_at_construction(learner, setting, message):
    with pytest.raises(ValueError, match=message):
        learner(**setting)


def test_integer_valued_floats_are_stored_as_integers():
    model = nctl.NCTL(pool_size=3.0, min_segment=16.0, context_bits=2.0, layer_sizes=[4.0, 1])
    assert (model.pool_size, model.min_segment, model.context_bits, model.layer_sizes) == (3, 16, 2, (4, 1))
    assert all(type(v) is int for v in (model.pool_size, model.min_segment, model.context_bits))


def test_a_state_that_does_not_fit_in_memory_is_refused_on_the_first_example(monkeypatch):
    model = nctl.NCTL(**TINY_NCTL)
    monkeypatch.setattr(_memory, "available_memory", lambda: model.state_bytes(4) - 1)
    X, y = data()
    with pytest.raises(MemoryError, match=r"NCTL with 4 features needs .* GB but .* GB is free; lower context_bits"):
        model.learn_many(X, y)
    with pytest.raises(MemoryError):
        model.predict_proba_one(X[0])
    assert model.state_ is None
    monkeypatch.setattr(_memory, "available_memory", lambda: model.state_bytes(4))
    assert model.learn_many(X, y).shape == (20,)


# ----------------------------------------------------------------------------- 7, 9: inputs


@pytest.mark.parametrize("make, shape", [(lambda: nctl.GLN(**TINY), (0,)), (lambda: nctl.NCTL(**TINY_NCTL), (0,)),
                                         (lambda: nctl.GLN(**TINY, n_classes=3), (0, 3))])
def test_an_empty_batch_is_a_no_op(make, shape):
    model = make()
    assert model.learn_many(np.zeros((0, 4)), np.zeros(0, int)).shape == shape
    assert model.predict_proba_many(np.zeros((0, 4))).shape == shape
    assert model.state_ is None and model.t_ == 0
    X, y = data()
    model.learn_many(X, y)
    assert model.learn_many(X[:0], y[:0]).shape == shape and model.t_ == 20


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


def test_a_save_that_fails_midway_keeps_the_previous_file(tmp_path, monkeypatch):
    X, y = data()
    model = nctl.NCTL(**TINY_NCTL)
    model.learn_many(X, y)
    path = tmp_path / "model.npz"
    model.save(path)
    before = path.read_bytes()

    def disk_full(file, **arrays):
        file.write(b"PK\x03\x04 half an archive")
        raise OSError(28, "No space left on device")

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
    (lambda p: p.write_text("hello"), "not a readable nctl save"),
    (lambda p: p.write_bytes(b""), "not a readable nctl save"),
    (_npy, "not an npz archive"),
    (lambda p: np.savez(p, weights=np.zeros(3)), "meta"),
    (lambda p: _meta_npz(p, {"format": 1, "class": "GLN"}), "save format 1, but this version of nctl reads format 2"),
    (lambda p: _meta_npz(p, {"format": 2, "class": "Perceptron"}), "unknown learner class 'Perceptron'"),
    (lambda p: _meta_npz(p, {"format": 2, "class": "GLN", "params": {"context_bits": 99}}), "context_bits must be"),
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
