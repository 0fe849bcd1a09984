"""JAX's persistent compilation cache, so that a new process reuses the programs an earlier one compiled.

A learner compiles its programs the first time it sees a configuration (number of features, network
shape, pool settings): seconds to tens of seconds for NCTL. With the cache on, JAX stores every
compiled program on disk under a key of the program and the machine, and a later process with the
same configuration loads it instead of compiling. The cache is on by default: the first learner of a
process turns it on (``default_cache``) in ``~/.cache/nctl/jax`` (``$XDG_CACHE_HOME/nctl/jax`` where
that is set), capped at ``MAX_CACHE_BYTES``, unless

- ``NCTL_CACHE_DIR`` names another folder (used instead), or is ``off`` (no cache);
- JAX already has a cache folder: the user's own (``JAX_COMPILATION_CACHE_DIR``, or
  ``jax.config.update("jax_compilation_cache_dir", ...)`` before the first learner), which is left
  as it is, or one named by ``enable_compilation_cache(path)``.
"""

from __future__ import annotations

import contextlib
import os
import threading
from pathlib import Path

import jax

from nctl.core import programs

CACHE_ENV = "NCTL_CACHE_DIR"  # a folder, or "off": no persistent cache unless enable_compilation_cache is called
OFF = ("off", "0", "false", "no")  # the values of CACHE_ENV that turn the default cache off
EXPORTED = "exported"  # the subfolder of the engine's exported programs
MIN_COMPILE_SECONDS = 0.2  # programs that compile faster than this are not worth a disk entry
MAX_CACHE_BYTES = 2**30  # JAX removes the least recently used programs beyond this (an NCTL configuration: ~1 MB)
MAX_EXPORTED_BYTES = 2**28  # the exported programs' folder, pruned (oldest first) when a process turns the cache on
# JAX's event timing the making of a program: an XLA compilation, or a load from the persistent cache
BACKEND_COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"


def cache_off() -> bool:
    """Whether ``$NCTL_CACHE_DIR`` turns the default cache off (``off``, ``0``, ``false`` or ``no``)."""
    return os.environ.get(CACHE_ENV, "").strip().lower() in OFF


def default_cache_dir() -> Path:
    """``$NCTL_CACHE_DIR`` (unless off), else ``$XDG_CACHE_HOME/nctl/jax``, else ``~/.cache/nctl/jax``."""
    if os.environ.get(CACHE_ENV, "").strip() and not cache_off():
        return Path(os.environ[CACHE_ENV]).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "nctl" / "jax"


def enable_compilation_cache(path: str | os.PathLike | None = None, exported: bool = True,
                             max_bytes: int | None = MAX_CACHE_BYTES) -> Path:
    """Store compiled programs in ``path`` (default ``default_cache_dir()``) and reuse them across
    processes; with ``exported``, also the NCTL engine's programs as exported by ``jax.export``
    (``path/exported``), which a new process loads without tracing them (``nctl.core.programs``).
    ``max_bytes`` caps the folder (JAX drops the least recently used programs; None: no cap; a cap the
    user gave JAX is kept). Returns the folder. Safe to call more than once; several processes may
    share a folder. Learners call it on their own (``default_cache``): call it to choose another
    folder, before the first learner runs."""
    folder = Path(path).expanduser() if path is not None else default_cache_dir()
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)  # compiled code is loaded from here: the user's alone
    jax.config.update("jax_compilation_cache_dir", str(folder))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", MIN_COMPILE_SECONDS)
    if max_bytes is not None and jax.config.jax_compilation_cache_max_size == -1 and _can_evict():
        jax.config.update("jax_compilation_cache_max_size", int(max_bytes))
    if exported:
        _prune(folder / EXPORTED, MAX_EXPORTED_BYTES)
    programs.use_folder(folder / EXPORTED if exported else None)
    return folder


_default_lock = threading.Lock()
_default_tried = False


def default_cache() -> Path | None:
    """Turn on the default cache (module docstring) the first time it is called in a process: every
    learner calls it when it creates its state. Returns the folder, or None where nothing was turned on
    (turned off, JAX has a cache already, an earlier call, or a folder that cannot be made: a read-only
    home runs without a cache rather than fail)."""
    global _default_tried
    with _default_lock:
        if _default_tried:
            return None
        _default_tried = True
        if cache_off() or jax.config.jax_compilation_cache_dir:
            return None
        try:
            return enable_compilation_cache()
        except OSError:
            return None


def _can_evict() -> bool:
    """Whether JAX can cap its cache: it needs the ``filelock`` package for that."""
    try:
        import filelock  # noqa: F401
    except ImportError:
        return False
    return True


def _prune(folder: Path, max_bytes: int) -> None:
    """Remove the oldest files of ``folder`` until it holds at most half of ``max_bytes``, if it holds
    more (another process may be removing them too)."""
    try:
        files = sorted((entry.stat().st_mtime, entry.stat().st_size, entry) for entry in folder.iterdir()
                       if entry.is_file())
    except OSError:
        return
    total = sum(size for _, size, _ in files)
    if total <= max_bytes:
        return
    for _, size, entry in files:
        if total <= max_bytes // 2:
            break
        entry.unlink(missing_ok=True)
        total -= size


def current() -> tuple[str, bool] | None:
    """This process's cache as ``(folder, exported)``, or None when JAX's persistent cache is off: what a
    process started to compute for this one (an executor's worker) takes over with ``adopt``."""
    folder = jax.config.jax_compilation_cache_dir
    return (str(folder), programs.folder() is not None) if folder else None


def adopt(cache: tuple[str, bool] | None) -> None:
    """Use ``cache``, the ``current()`` of the process that started this one, unless this process has a
    cache already; without one where the folder cannot be made here (a Ray worker on another machine
    that lacks the path's parent, say): it then compiles for itself."""
    if cache is None or jax.config.jax_compilation_cache_dir:
        return
    try:
        enable_compilation_cache(cache[0], exported=cache[1])
    except OSError:  # no folder here: compile without a cache rather than fail the seed
        pass


@contextlib.contextmanager
def programs_made():
    """A list that collects, as the identifier of the thread that made it, every program made inside
    the block: compiled by XLA, or loaded from the persistent compilation cache (what a process that had
    compiled it before does instead). JAX times both under one event, the one counted here (a load also
    records a cache hit, which is not counted: it would count the program twice)."""
    made = []

    def made_one(event, duration, **kwargs):
        if event == BACKEND_COMPILE_EVENT:
            made.append(threading.get_ident())

    jax.monitoring.register_event_duration_secs_listener(made_one)
    try:
        yield made
    finally:
        jax.monitoring.unregister_event_duration_listener(made_one)
