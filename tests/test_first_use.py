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
    """The cache settings of a new process (home ``home``) after its first learner learned a row."""
    environment = {k: v for k, v in os.environ.items()
                   if k not in ("NCTL_CACHE_DIR", "JAX_COMPILATION_CACHE_DIR", "XDG_CACHE_HOME", SESSION_CACHE)}
    environment.update(HOME=str(home), **env)
    done = subprocess.run([sys.executable, "-c", SCRIPT, mode, str(home / "configured")], env=environment, cwd=home,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])



def test_a_library_user_gets_the_persistent_cache_in_the_home_by_default(tmp_path):
    cache = cache_of_a_new_process(tmp_path)
    folder = tmp_path / ".cache" / "nctl" / "jax"
    assert cache == {"dir": str(folder), "max_size": compilation.MAX_CACHE_BYTES,
                     "exported": str(folder / compilation.EXPORTED)}
    assert folder.is_dir() and (folder.stat().st_mode & 0o077) == 0  # the user's alone


@pytest.mark.parametrize("value", ["off", "0", "False"])
def test_the_default_cache_can_be_turned_off(tmp_path, value):
    assert cache_of_a_new_process(tmp_path, NCTL_CACHE_DIR=value) == {"dir": None, "max_size": -1, "exported": None}
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


def test_the_exported_programs_are_pruned_oldest_first(tmp_path):
    for i in range(6):
        path = tmp_path / f"program-{i}"
        path.write_bytes(bytes(100))
        os.utime(path, (1000 + i, 1000 + i))
    compilation._prune(tmp_path, 450)  # 600 bytes held: down to at most 225
    assert sorted(p.name for p in tmp_path.iterdir()) == ["program-4", "program-5"]
    compilation._prune(tmp_path, 450)  # within the cap: nothing removed
    assert len(list(tmp_path.iterdir())) == 2


def test_a_numpy_row_given_to_the_river_classifier_points_to_dicts_and_leaves_it_unchanged():
    import numpy as np

    from nctl.river import NCTLClassifier

    model = NCTLClassifier(layer_sizes=(2, 1), pool_size=2, min_segment=4)
    for method in (lambda x: model.learn_one(x, True), model.predict_proba_one):
        with pytest.raises(TypeError, match="dict of feature name -> number.*numpy.ndarray.*nctl.NCTL"):
            method(np.ones(3))
    assert model._learner.t_ == 0 and model._features is None


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
