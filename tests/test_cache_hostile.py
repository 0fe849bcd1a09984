"""The compilation cache and the kernel cache in a hostile world: damaged, swapped or planted files, folders
that cannot be written or that others can write to, a full disk, malformed environment variables. The
cache only saves time: each case must run (with one warning where something is wrong), never fail or
load what it was not made for."""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
import sys
import warnings
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest

from nctl import compilation
from nctl.core import mixing, native, programs, tree

TIMEOUT = 300  # seconds for a new process that imports nctl and compiles a little


def new_process(code: str, tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    """Run ``code`` in a new Python process in ``tmp_path``, with a home of its own and ``env`` added
    (without the CPU kernels unless ``env`` asks: a new home would build them)."""
    environment = {**os.environ, "HOME": str(tmp_path / "home"), "NCTL_NATIVE": "0", **env}
    environment.pop("JAX_COMPILATION_CACHE_DIR", None)
    if "NCTL_CACHE_DIR" not in env:
        environment.pop("NCTL_CACHE_DIR")  # tests/conftest.py turns it off for the tests' own process
    return subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=environment, capture_output=True,
                          text=True, timeout=TIMEOUT)


@contextlib.contextmanager
def stored_in(folder: Path):
    """Store programs in ``folder`` for the block."""
    before = programs.folder()
    try:
        programs.use_folder(folder)
        yield
    finally:
        programs.use_folder(before)


def run_two_programs() -> tuple[float, int]:
    """Two stored programs, each made afresh (loaded from the folder where it is there): 0.75 and 3."""
    likelihood, zeros = programs.jit(mixing.prob), programs.jit(tree.trailing_zeros)
    return float(likelihood(np.float32(0.25), np.int32(0))), int(zeros(jnp.array(8)))


# the size prune

def test_the_prune_removes_the_caches_entries_and_nothing_else(tmp_path):
    """A folder named by NCTL_CACHE_DIR may hold the user's own files: a large one and a note stay,
    however far over the cap the folder is; the entries used least recently go first."""
    big, note = tmp_path / "dataset.bin", tmp_path / "notes.txt"
    with open(big, "wb") as file:
        file.truncate(1_200_000_000)  # sparse: its size counts, the disk holds nothing
    note.write_text("mine")
    entries = [tmp_path / f"jit_step-{i:064x}-cache" for i in range(4)]
    (tmp_path / "exported").mkdir()
    entries.append(tmp_path / "exported" / f"run_steps-{5:032x}.jaxexport")
    for age, entry in enumerate(reversed(entries)):
        entry.write_bytes(b"x" * 1000)
        os.utime(entry, (1e9 - age, 1e9 - age))  # the first entry is the oldest
    compilation.prune([tmp_path, tmp_path / "exported"], max_bytes=3000)
    assert big.stat().st_size == 1_200_000_000 and note.read_text() == "mine"
    assert [entry.exists() for entry in entries] == [False, False, False, True, True]


# writes that fail

def test_a_program_that_cannot_be_stored_warns_once_and_runs(tmp_path, monkeypatch):
    """A full disk: one warning, no more writes, and the programs run."""
    def full_disk(path, data):
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(programs, "write_bytes", full_disk)
    with stored_in(tmp_path), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert run_two_programs() == (0.75, 3)
        assert programs.folder() is None
    stored = [str(w.message) for w in caught if "cannot store compiled programs" in str(w.message)]
    assert len(stored) == 1 and "No space left on device" in stored[0]


def test_a_file_size_limit_leaves_the_process_running_without_stored_programs(tmp_path):
    """``ulimit -f``: the write fails (EFBIG), one warning, and the program's result is right."""
    code = """
import resource, warnings
warnings.simplefilter("always")
from nctl.core import mixing, programs
import numpy as np
programs.use_folder("cache")
resource.setrlimit(resource.RLIMIT_FSIZE, (64, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
print(float(programs.jit(mixing.prob)(np.float32(0.25), np.int32(0))), programs.folder())
"""
    run = new_process(code, tmp_path)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["0.75", "None"]
    assert run.stderr.count("cannot store compiled programs") == 1


def test_a_cache_folder_that_cannot_be_made_gives_one_warning_and_no_cache(tmp_path):
    """NCTL_CACHE_DIR below a regular file (as when ``exported`` is a file): the default cache warns once
    and the process runs without one."""
    (tmp_path / "file").write_text("")
    code = "from nctl import compilation; print(compilation.default_cache())"
    run = new_process(code, tmp_path, NCTL_CACHE_DIR=str(tmp_path / "file" / "cache"))
    assert run.returncode == 0 and run.stdout.split() == ["None"], run.stderr
    assert run.stderr.count("runs without a compilation cache") == 1
    with pytest.raises(OSError):
        programs.use_folder(tmp_path / "file" / "exported")
    assert programs.folder() is None


# damaged, swapped and planted programs

def test_a_damaged_or_swapped_stored_program_is_made_again(tmp_path):
    """A stored program is tied to its key and checked when loaded: bytes flipped inside the StableHLO
    (which deserialises, then fails when called) and two programs' files swapped are both made again."""
    with stored_in(tmp_path):
        assert run_two_programs() == (0.75, 3)
        first, second = sorted(tmp_path.glob("*.jaxexport"))
        first_bytes, second_bytes = first.read_bytes(), second.read_bytes()
        first.write_bytes(second_bytes)
        second.write_bytes(first_bytes)
        assert run_two_programs() == (0.75, 3)
        for path in (first, second):
            data = bytearray(path.read_bytes())
            middle = slice(len(data) // 2, len(data) // 2 + 16)
            data[middle] = bytes(b ^ 0xFF for b in data[middle])
            path.write_bytes(data)
        assert run_two_programs() == (0.75, 3)
        assert (first.read_bytes(), second.read_bytes()) == (first_bytes, second_bytes)  # written again


def test_no_compiled_code_is_loaded_from_a_folder_others_can_write_to(tmp_path):
    """Anyone could plant a program there (its key recorded as nctl would record it)."""
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    with pytest.raises(PermissionError, match="writable by other users"):
        programs.use_folder(shared)
    with pytest.raises(PermissionError, match="writable by other users"):
        compilation.enable_compilation_cache(shared)
    assert programs.folder() is None


def test_no_compiled_code_is_loaded_from_another_users_folder(tmp_path, monkeypatch):
    """A folder of another user's (as root: one given to another user; else: this process as another user)."""
    folder = tmp_path / "theirs"
    folder.mkdir(mode=0o700)
    if os.geteuid() == 0:
        os.chown(folder, 12345, -1)
    else:
        monkeypatch.setattr(os, "geteuid", lambda: folder.stat().st_uid + 1)
    with pytest.raises(PermissionError, match="belongs to another user"):
        native.own_folder(folder)


def test_the_default_cache_in_a_folder_others_can_write_to_warns_and_is_not_used(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    code = "from nctl import compilation; print(compilation.default_cache())"
    run = new_process(code, tmp_path, NCTL_CACHE_DIR=str(shared))
    assert run.returncode == 0 and run.stdout.split() == ["None"], run.stderr
    assert run.stderr.count("writable by other users") == 1
    assert not list(shared.iterdir())


# JAX's own entries

COMPILE_THREE = """
import sys, warnings
warnings.simplefilter("always")
import jax, jax.numpy as jnp, nctl
nctl.enable_compilation_cache("cache")
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)  # store them however fast they compile
hits = []
jax.monitoring.register_event_listener(
    lambda event, **kw: hits.append(event) if event == "/jax/compilation_cache/cache_hits" else None)
for k in range(3):
    jax.block_until_ready(jax.jit(lambda x: jnp.sin(x) * k + jnp.cos(x))(jnp.arange(5.0 + k)))
print(len(hits))
"""


def test_an_entry_jax_cannot_read_is_replaced(tmp_path):
    """JAX warns about an entry it cannot read and compiles, but would never replace the entry: nctl
    removes it, so the process after the one that found it loads every program without a warning."""
    assert new_process(COMPILE_THREE, tmp_path).stdout.split() == ["0"]
    entries = list((tmp_path / "cache").glob("*-cache"))
    assert entries
    for entry in entries:
        entry.write_bytes(entry.read_bytes()[:100])  # truncated
    damaged = new_process(COMPILE_THREE, tmp_path)
    assert damaged.stderr.count("Error reading persistent compilation cache entry") == len(entries)
    clean = new_process(COMPILE_THREE, tmp_path)
    assert "Error reading" not in clean.stderr and clean.stdout.split() == [str(len(entries))], clean.stderr


# the kernel library

def planted_library(folder: Path, data: bytes) -> str:
    """Code for a new process whose kernel library is ``folder/kernels-planted.so`` holding ``data`` (and
    not the one installed with the package): it prints whether the kernels are in use."""
    (folder / "kernels-planted.so").write_bytes(data)
    return ("from nctl.core import native\n"
            "native.library_name = lambda: 'kernels-planted.so'\n"
            "print(native.enabled())\n")


def a_built_library() -> bytes:
    """The bytes of the library installed with the package (skip where there is none)."""
    installed = Path(native.__file__).with_name(native.library_name())
    if not native.intact(installed):
        pytest.skip("no library was built at install time (copying one is faster than building it)")
    return installed.read_bytes()


def test_a_truncated_kernel_library_is_not_loaded(tmp_path):
    """Loading a truncated library kills the process with SIGBUS: it is checked first, and rebuilt (here
    the compiler fails, so the engine runs its XLA code)."""
    library = a_built_library()
    folder = tmp_path / "native"
    folder.mkdir(mode=0o700)
    assert not native.intact(folder / "missing.so")
    code = planted_library(folder, library[: len(library) * 2 // 3])
    assert not native.intact(folder / "kernels-planted.so")
    run = new_process(code, tmp_path, NCTL_NATIVE="1", NCTL_NATIVE_CACHE=str(folder), CXX="false")
    assert run.returncode == 0 and run.stdout.split() == ["False"], run.stderr


def test_a_kernel_library_in_a_folder_others_can_write_to_is_not_loaded(tmp_path):
    folder = tmp_path / "native"
    folder.mkdir()
    folder.chmod(0o777)
    code = planted_library(folder, a_built_library())  # whole, as another user could plant it
    run = new_process(code, tmp_path, NCTL_NATIVE="1", NCTL_NATIVE_CACHE=str(folder))
    assert run.returncode == 0 and run.stdout.split() == ["False"], run.stderr
    assert "writable by other users" in run.stderr


def test_a_malformed_compiler_variable_falls_back_to_xla_with_a_warning(tmp_path):
    run = new_process("from nctl.core import native; print(native.enabled())", tmp_path, NCTL_NATIVE="1",
                      NCTL_NATIVE_CACHE=str(tmp_path / "native"), CXX='"')
    assert run.returncode == 0 and run.stdout.split() == ["False"], run.stderr
    assert "CXX='\"' is not a command" in run.stderr


# the environment's paths

def test_a_cache_folder_from_the_environment_is_validated(monkeypatch, tmp_path):
    monkeypatch.setenv("NCTL_CACHE_DIR", f"{tmp_path / 'mine'}\n")  # as `export NCTL_CACHE_DIR="$(cat f)"`
    assert compilation.default_cache_dir() == tmp_path / "mine"
    monkeypatch.setenv("NCTL_CACHE_DIR", f"{tmp_path}/a\nb")
    with pytest.raises(ValueError, match="control character"):
        compilation.default_cache_dir()
    monkeypatch.delenv("NCTL_CACHE_DIR")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CACHE_HOME", "relative")  # the XDG specification: ignored
    assert compilation.default_cache_dir() == tmp_path / "home" / ".cache" / "nctl" / "jax"


def test_the_default_cache_with_invalid_environment_paths(tmp_path):
    """A relative XDG_CACHE_HOME makes no folder under the current one; a NCTL_CACHE_DIR with a newline
    inside gives one warning and no cache."""
    code = "from nctl import compilation; print(compilation.default_cache())"
    run = new_process(code, tmp_path, XDG_CACHE_HOME="relative")
    assert run.stdout.split() == [str(tmp_path / "home" / ".cache" / "nctl" / "jax")], run.stderr
    assert not (tmp_path / "relative").exists()
    run = new_process(code, tmp_path, NCTL_CACHE_DIR=f"{tmp_path}/a\nb")
    assert run.returncode == 0 and run.stdout.split() == ["None"], run.stderr
    assert run.stderr.count("control character") == 1 and not (tmp_path / "a").exists()
