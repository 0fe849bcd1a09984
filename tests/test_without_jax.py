"""A process whose learners run on the native engine never imports JAX, whose import alone takes about a
second of a new process's wait: ``import nctl``, the river adapters, learning, predicting, copying, forks,
saves and loads, and the command line's demo. JAX, imported later or before, runs in 64-bit mode as the engine needs."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import jax
import numpy as np
import pytest

import nctl
from nctl.native.state import leaves

NATIVE_PROCESS = """
import json, sys
import numpy as np
import nctl
from river import preprocessing
from nctl.river import GLNClassifier, GLNRegressor, NCTLClassifier, NCTLRegressor

rng = np.random.default_rng(0)
X = rng.standard_normal((300, 4)).astype(np.float32)
y = (X[:, 0] > 0).astype(int)
models = [preprocessing.StandardScaler() | NCTLClassifier(), preprocessing.StandardScaler() | GLNClassifier(),
          GLNRegressor(), NCTLRegressor()]
for model in models:
    for row, label in zip(X[:100], y[:100]):
        x = {f"f{j}": float(v) for j, v in enumerate(row)}
        model.predict_one(x)
        model.learn_one(x, bool(label) if model in models[:2] else float(row[1]))
core = nctl.NCTL.tabular()
core.learn_many(X, y)
twin = core.copy()
twin.learn_one(X[0], 1)
with core.fork(X[:5], y[:5]) as adapted:
    adapted.predict_proba_many(X[:10])
core.save(sys.argv[1])
loaded = nctl.load(sys.argv[1])
loaded.learn_one(X[0], 1)
print(json.dumps({"jax imported": "jax" in sys.modules, "engines": [core.engine_, twin.engine_, loaded.engine_],
                  "same": bool(np.array_equal(loaded.predict_proba_many(X), twin.predict_proba_many(X)))}))
"""


def run(code: str, *args: str) -> str:
    environment = {**os.environ, "NCTL_ENGINE": "native"}
    done = subprocess.run([sys.executable, "-c", code, *args], env=environment, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()[-1]


def test_learners_on_the_native_engine_never_import_jax(tmp_path):
    seen = json.loads(run(NATIVE_PROCESS, str(tmp_path / "model.npz")))
    assert seen == {"jax imported": False, "engines": ["native"] * 3, "same": True}
    assert nctl.load(tmp_path / "model.npz").t_ == 300


def test_the_command_lines_demo_never_imports_jax(tmp_path):
    code = ("import sys; from nctl.cli import main; status = main(['run', 'demo', '--out', sys.argv[1]]); "
            "print(status, 'jax' in sys.modules)")
    assert run(code, str(tmp_path)) == "0 False"
    assert (tmp_path / "demo" / "results.json").exists()


@pytest.mark.parametrize("order", ["nctl, jax", "jax, nctl"])
def test_jax_runs_in_64_bit_mode_whether_imported_before_nctl_or_after(order):
    assert run(f"import {order}; print(jax.numpy.zeros(1, float).dtype)") == "float64"


def make_gln():
    return nctl.GLN(layer_sizes=(4, 1), context_bits=2)


def make_nctl():
    return nctl.NCTL(layer_sizes=(4, 1), context_bits=2, depth=8, pool=nctl.Pool(size=3), n_classes=3)


def make_regressor():
    return nctl.GLNRegressor(layer_sizes=(4, 1), context_bits=2)


@pytest.mark.parametrize("make", [make_gln, make_nctl, make_regressor])
@pytest.mark.parametrize("engine", ["native", "jax"])
def test_a_states_bytes_come_from_its_shapes_and_its_arrays_are_in_jaxs_order(make, engine, monkeypatch):
    """``state_bytes`` (the state made of ``nctl.core.shape_only``, no memory) is the bytes of the state the
    learner then makes, and ``leaves`` (a save's arrays, without JAX) lists them as ``jax.tree.leaves``."""
    monkeypatch.setenv("NCTL_ENGINE", engine)
    learner = make()
    planned = learner.state_bytes(5)
    learner.learn_one(np.ones(5, np.float32), 1)
    arrays = leaves(learner.state_)
    assert [id(a) for a in arrays] == [id(a) for a in jax.tree.leaves(learner.state_)]
    assert sum(a.size * a.dtype.itemsize for a in arrays) == planned
