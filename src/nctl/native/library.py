"""The native engine's shared library: its C++ sources (every ``*.cc`` beside this file) compiled with the
system's compiler (``$CXX``, else ``c++``) under a name that hashes the sources, their headers, the
compiler, its flags and the machine.

Installing the package builds it into the package (``setup.py``), so no process waits for the compiler;
where that library is missing or stale, the first process that needs it builds it into
``$NCTL_NATIVE_CACHE`` (else ``~/.cache/nctl/native``). A library ends with the SHA-256 of the bytes before
it (the dynamic loader ignores what follows the ELF sections) and is loaded only while that matches (a
truncated library would kill the process when loaded), and a cached one only from a folder no other user
can write to. This module imports nothing from nctl and no JAX: ``setup.py`` runs it on its own.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import shlex
import stat
import subprocess
import tempfile
from pathlib import Path

HERE = Path(__file__).parent
FLAGS = ["-std=c++17", "-O3", "-ffp-contract=off", "-fPIC", "-shared", "-pthread", "-w"]  # no fused multiply-adds: each
# expression rounds as written, as the JAX engine's do
DIGEST_BYTES = 32  # a library's last bytes: the SHA-256 of the bytes before them


def sources() -> list[Path]:
    return sorted(HERE.glob("*.cc"))


def headers() -> list[Path]:
    return sorted(HERE.glob("*.h"))


def compiler() -> list[str]:
    """``$CXX`` (else ``c++``) split as the shell would; RuntimeError where it cannot be (a lone quote)."""
    command = os.environ.get("CXX") or "c++"
    try:
        return shlex.split(command)
    except ValueError as error:
        raise RuntimeError(f"CXX={command!r} is not a command: {error}") from None


def library_name() -> str:
    key = hashlib.sha256(b"".join(path.read_bytes() for path in sources() + headers()))
    key.update(" ".join(compiler() + FLAGS + [platform.machine()]).encode())
    return f"engine-{key.hexdigest()[:16]}.so"


def cache_dir() -> Path:
    return Path(os.environ.get("NCTL_NATIVE_CACHE") or Path.home() / ".cache" / "nctl" / "native")


def intact(library: Path) -> bool:
    """Whether ``library`` is there, whole: its last ``DIGEST_BYTES`` are the SHA-256 of the rest."""
    try:
        data = library.read_bytes()
    except OSError:
        return False
    return len(data) > DIGEST_BYTES and hashlib.sha256(data[:-DIGEST_BYTES]).digest() == data[-DIGEST_BYTES:]


def own_folder(folder: Path) -> Path:
    """``folder``, created for its owner alone where missing; PermissionError unless it belongs to this user
    (or root) and no other user can write to it: compiled code is loaded from it."""
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    info = folder.stat()
    if info.st_uid not in (os.geteuid(), 0):
        raise PermissionError(f"{folder} belongs to another user: nctl loads no compiled code from it")
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise PermissionError(f"{folder} is writable by other users: nctl loads no compiled code from it")
    return folder


def build(folder: Path) -> Path:
    """The library in ``folder``, compiled there unless an intact one is: one compiler run over every
    source, the digest appended, then moved into place atomically. RuntimeError where the compiler fails."""
    path = folder / library_name()
    if intact(path):
        return path
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    with tempfile.TemporaryDirectory(dir=folder) as temp:
        built = Path(temp) / path.name
        command = [*compiler(), *FLAGS, *map(str, sources()), "-o", str(built)]
        try:
            run = subprocess.run(command, capture_output=True, text=True)
        except OSError as error:  # no such compiler
            raise RuntimeError(f"{shlex.join(command)} could not run: {error}") from None
        if run.returncode:
            raise RuntimeError(f"{shlex.join(command)} failed:\n{run.stderr[-2000:]}")
        with open(built, "ab") as library:
            library.write(hashlib.sha256(built.read_bytes()).digest())
        os.replace(built, path)
    return path


def load() -> ctypes.CDLL:
    """The library installed with the package where it is intact and current, else the cache's (built
    there if missing or damaged). OSError or RuntimeError where neither can be had."""
    installed = HERE / library_name()
    return ctypes.CDLL(str(installed if intact(installed) else build(own_folder(cache_dir()))))
