"""Files written whole or not at all, and a lock shared between processes; depends on nothing in nctl.

``write_atomic`` writes to a temporary file of a unique name in the target's folder, flushes and
syncs it, then renames it over the target (``os.replace`` is atomic within one file system): a crash,
a full disk, SIGKILL or Ctrl-C mid-write leaves the previous file intact, and readers never see half
a file. A write cut short may leave its temporary file (``.NAME.PID-RANDOM.tmp``) behind.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

TEMP_SUFFIX = ".tmp"


def write_atomic(path: str | os.PathLike, write: Callable[[BinaryIO], object]) -> Path:
    """Call ``write(file)`` on a new temporary file next to ``path``, then move it over ``path``."""
    path = Path(path)
    temp = path.with_name(f".{path.name}.{os.getpid()}-{secrets.token_hex(4)}{TEMP_SUFFIX}")
    try:
        with open(temp, "xb") as file:
            write(file)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temp, path)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    return path


def write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    return write_atomic(path, lambda file: file.write(data))


def write_text(path: str | os.PathLike, text: str) -> Path:
    return write_bytes(path, text.encode("utf-8"))


def check_writable(folder: str | os.PathLike) -> Path:
    """Create ``folder`` (and its parents) and create a file in it; OSError naming the folder if not."""
    folder = Path(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as error:
        raise OSError(f"cannot write in {folder}: {error.strerror or error}") from error
    return folder


@contextlib.contextmanager
def locked(path: str | os.PathLike) -> Iterator[None]:
    """Hold an exclusive lock on the file ``path`` (created if missing) for the block; other
    processes asking for it wait."""
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
