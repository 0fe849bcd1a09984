"""JAX's persistent compilation cache, so that a new process reuses the programs an earlier one compiled.

A learner compiles its programs the first time it sees a configuration (number of features, network
shape, pool settings): seconds for NCTL. With the cache on, JAX stores every compiled program on disk
under a key of the program and the machine, and a later process with the same configuration loads it
instead of compiling. The command line turns it on for every command; library users call
``enable_compilation_cache()`` once, before the first learner runs::

    import nctl
    nctl.enable_compilation_cache()          # ~/.cache/nctl/jax, or $NCTL_CACHE_DIR
"""

from __future__ import annotations

import contextlib
import os
import threading
from pathlib import Path

import jax

from nctl.core import programs

CACHE_ENV = "NCTL_CACHE_DIR"  # a folder, or "off" to leave the cache off in the command line
EXPORTED = "exported"  # the subfolder of the engine's exported programs
MIN_COMPILE_SECONDS = 0.2  # programs that compile faster than this are not worth a disk entry
# JAX's event timing the making of a program: an XLA compilation, or a load from the persistent cache
BACKEND_COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"


def default_cache_dir() -> Path:
    """``$NCTL_CACHE_DIR`` (unless ``off``), else ``$XDG_CACHE_HOME/nctl/jax``, else ``~/.cache/nctl/jax``."""
    if os.environ.get(CACHE_ENV, "").lower() not in ("", "off"):
        return Path(os.environ[CACHE_ENV]).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "nctl" / "jax"


def enable_compilation_cache(path: str | os.PathLike | None = None, exported: bool = True) -> Path:
    """Store compiled programs in ``path`` (default ``default_cache_dir()``) and reuse them across
    processes; with ``exported``, also the NCTL engine's programs as exported by ``jax.export``
    (``path/exported``), which a new process loads without tracing them (``nctl.core.programs``).
    Returns the folder. Safe to call more than once; several processes may share a folder."""
    folder = Path(path).expanduser() if path is not None else default_cache_dir()
    folder.mkdir(parents=True, exist_ok=True)
    jax.config.update("jax_compilation_cache_dir", str(folder))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", MIN_COMPILE_SECONDS)
    programs.use_folder(folder / EXPORTED if exported else None)
    return folder


def cli_cache() -> Path | None:
    """The command line's cache: on unless ``NCTL_CACHE_DIR=off``, and left to JAX where the user
    already set ``JAX_COMPILATION_CACHE_DIR``."""
    if os.environ.get(CACHE_ENV, "").lower() == "off" or os.environ.get("JAX_COMPILATION_CACHE_DIR"):
        return None
    try:
        return enable_compilation_cache()
    except OSError:  # a read-only home: run without the cache rather than fail
        return None


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
