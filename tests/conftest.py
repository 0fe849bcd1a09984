"""Shared data fixtures: the real data folder ($NCTL_DATA, else ../shared/data next to the repo); one
JAX compilation cache per test run, shared by its worker processes (``pytest_configure``); and Python's
own Ctrl-C handling in every test process.

Tests that need a real data set take its fixture (``mnist_dir``, ``fashion_mnist_dir``,
``elec2_dir``) and carry the ``data`` marker; the fixture skips, naming what is missing, when the
data set's files are not there.
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
import tempfile
from pathlib import Path

import pytest

from nctl import memory, compilation
from nctl.data.registry import get_dataset

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO_ROOT.parent / "shared" / "data"

# the command line turns on JAX's persistent compilation cache; the tests call it in this process and
# leave the user's cache alone (tests/test_compilation.py checks the cache in processes of its own)
os.environ["NCTL_CACHE_DIR"] = "off"

SESSION_CACHE = "NCTL_TEST_SESSION_CACHE"  # the folder of this test run's compiled programs
_OWNS_CACHE = pytest.StashKey[bool]()


# A run started in the background (``cmd &``, ``nohup``) inherits SIGINT ignored, and nctl.interrupts keeps a
# program's ignored Ctrl-C ignored; tests/test_interrupts.py checks what a Ctrl-C does where Python handles it,
# as in a terminal, so every test process starts with Python's handler.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_configure(config):
    """One persistent compilation cache per test run, shared by its worker processes: a program that one
    worker compiled, or that this worker dropped near the memory-map limit, loads instead of compiling
    again. The process that made the folder (pytest-xdist's controller, or a run without workers, whose
    environment the workers inherit) removes it at the end."""
    config.stash[_OWNS_CACHE] = SESSION_CACHE not in os.environ
    if config.stash[_OWNS_CACHE]:
        os.environ[SESSION_CACHE] = tempfile.mkdtemp(prefix="nctl-tests-jax-cache-")
    # without exported programs: the tests run ``jax.jit`` as a library user does by default (exporting
    # costs every configuration another lowering); tests/test_compilation.py checks the stored programs
    # against it
    compilation.enable_compilation_cache(os.environ[SESSION_CACHE], exported=False)


def pytest_unconfigure(config):
    if "nctl.core.engine" in sys.modules:  # programs still compiling ahead write to the cache
        sys.modules["nctl.core.engine"].finish_compiling()
    if config.stash.get(_OWNS_CACHE, False):
        shutil.rmtree(os.environ.pop(SESSION_CACHE), ignore_errors=True)


def _real_data_dir(dataset: str) -> Path:
    folder = Path(os.environ["NCTL_DATA"]) if os.environ.get("NCTL_DATA") else SHARED_DATA
    missing = [entry.path for entry in get_dataset(dataset).files if not (folder / entry.path).is_file()]
    if missing:
        pytest.skip(
            f"real {dataset} data not in {folder} ({len(missing)} files missing, e.g. {missing[0]}); "
            "set NCTL_DATA to a folder that holds it"
        )
    return folder


@pytest.fixture(scope="session")
def mnist_dir() -> Path:
    return _real_data_dir("mnist")


@pytest.fixture(scope="session")
def fashion_mnist_dir() -> Path:
    return _real_data_dir("fashion-mnist")


@pytest.fixture(scope="session")
def elec2_dir() -> Path:
    return _real_data_dir("elec2")


@pytest.fixture(autouse=True)
def _trimmed_compiled_programs():
    """The session compiles hundreds of configurations; keep it below the kernel's memory-map limit."""
    yield
    memory.trim_compiled_programs()
