"""Files written whole or not at all, and a lock shared between processes; depends on nothing in nctl.

``write_atomic`` writes to a temporary file of a unique name in the target's folder, flushes and
syncs it, then renames it over the target (``os.replace`` is atomic within one file system): a crash,
a full disk, SIGKILL or Ctrl-C mid-write leaves the previous file intact, and readers never see half
a file. A write cut short leaves its temporary file (``.NAME.PID-RANDOM.tmp``) behind; a later
write of the same target removes it once its process has ended (``remove_stale_temporaries``).
A target that exists and is not a regular file (a folder, a device such as /dev/null, a FIFO, a link
to one) is refused before anything is written: a rename would replace it with a file.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import secrets
import stat
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

TEMP_SUFFIX = ".tmp"
STALE_SECONDS = 60.0  # a temporary whose writer has ended is removed once untouched this long
NOT_REGULAR = {stat.S_IFDIR: "a folder", stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device",
               stat.S_IFIFO: "a FIFO", stat.S_IFSOCK: "a socket"}


def write_atomic(path: str | os.PathLike, write: Callable[[BinaryIO], object]) -> Path:
    """Call ``write(file)`` on a new temporary file next to ``path``, then move it over ``path``; first
    remove the temporaries that earlier writes of ``path`` cut short left behind. FileExistsError if
    ``path`` (or what it links to) is not a regular file."""
    path = Path(path)
    check_replaceable(path)
    remove_stale_temporaries(path)
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


def check_replaceable(path: str | os.PathLike) -> None:
    """FileExistsError if ``path`` exists, following links, and is not a regular file."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:  # a missing target, or a link to none: the write creates a file
        return
    if not stat.S_ISREG(mode):
        kind = NOT_REGULAR.get(stat.S_IFMT(mode), "of an unknown kind")
        raise FileExistsError(f"cannot write {path}: it is {kind}, not a regular file, and is never replaced")


def remove_stale_temporaries(path: str | os.PathLike) -> list[Path]:
    """Remove the temporaries of writes of ``path`` that were cut short (SIGKILL, a power cut): those
    whose process no longer runs on this machine and that nothing has written for ``STALE_SECONDS`` (a
    writer this machine cannot see, on another one sharing the folder or in another container, keeps its
    temporary fresh as it writes). Returns what was removed."""
    path = Path(path)
    pattern = re.compile(rf"\.{re.escape(path.name)}\.(\d+)-[0-9a-f]+{re.escape(TEMP_SUFFIX)}")
    try:
        entries = list(os.scandir(path.parent))
    except OSError:
        return []
    removed = []
    for entry in entries:
        match = pattern.fullmatch(entry.name)
        if match is None or _running(int(match.group(1))):
            continue
        with contextlib.suppress(OSError):  # gone already: another writer removed it
            if time.time() - entry.stat(follow_symlinks=False).st_mtime > STALE_SECONDS:
                os.unlink(entry.path)
                removed.append(Path(entry.path))
    return removed


def _running(pid: int) -> bool:
    """Whether a process ``pid`` runs on this machine (another user's included)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except (OverflowError, ValueError):  # not a process id
        return False
    return True


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
    """Hold an exclusive lock on ``path`` for the block: the file ``path`` (created if missing), or the
    folder ``path`` itself (nothing is made in it); other processes asking for it wait."""
    flags = os.O_RDONLY if os.path.isdir(path) else os.O_WRONLY | os.O_CREAT | os.O_APPEND
    handle = os.open(path, flags, 0o666)
    try:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield
    finally:
        os.close(handle)  # releases the lock
