"""Shared data fixtures: the real data folder ($NCTL_DATA, else ../shared/data next to the repo).

Tests that need a real data set take its fixture (``mnist_dir``, ``fashion_mnist_dir``,
``elec2_dir``) and carry the ``data`` marker; the fixture skips, naming what is missing, when the
data set's files are not there.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from nctl import _memory
from nctl.data.registry import get_dataset

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO_ROOT.parent / "shared" / "data"

# the command line turns on JAX's persistent compilation cache; the tests call it in this process and
# leave the user's cache alone (tests/test_compilation.py checks the cache in processes of its own)
os.environ["NCTL_CACHE_DIR"] = "off"


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
    _memory.trim_compiled_programs()
