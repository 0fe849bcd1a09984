"""JAX's persistent compilation cache, so that a new process reuses the programs an earlier one compiled.

A learner compiles its programs the first time it sees a configuration (number of features, network
shape, pool settings): seconds to tens of seconds for NCTL. With the cache on, JAX stores every
compiled program on disk under a key of the program and the machine, and a later process with the
same configuration loads it instead of compiling. The cache is on by default: the first learner of a
process turns it on (``default_cache``) in ``~/.cache/nctl/jax`` (``$XDG_CACHE_HOME/nctl/jax`` where
that is an absolute path), kept under ``MAX_CACHE_BYTES`` (``prune``), unless

- ``NCTL_CACHE_DIR`` names another folder (used instead), or is ``off`` (no cache);
- JAX already has a cache folder: the user's own (``JAX_COMPILATION_CACHE_DIR``, or
  ``jax.config.update("jax_compilation_cache_dir", ...)`` before the first learner), which is left
  as it is, or one named by ``enable_compilation_cache(path)``.

The cache only saves time: where its folder cannot be used (it cannot be made or written to, others can
write to it, ``NCTL_CACHE_DIR`` is not a folder's name), one warning says so and the process runs
without it. Compiled code is loaded only from a folder of this user's that no one else can write to
(``nctl.core.native.own_folder``). An entry that JAX finds but cannot read (a damaged file, which JAX
would never replace) is removed, so that the program compiled instead is stored in its place
(``UnreadableEntries``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import threading
import warnings
from pathlib import Path

from nctl.atomic import check_writable
from nctl.core import native, programs
from nctl.deferred import jax

CACHE_ENV = "NCTL_CACHE_DIR"  # a folder, or "off": no persistent cache unless enable_compilation_cache is called
OFF = ("off", "0", "false", "no")  # the values of CACHE_ENV that turn the default cache off
EXPORTED = "exported"  # the subfolder of the engine's exported programs
MIN_COMPILE_SECONDS = 0.2  # programs that compile faster than this are not worth a disk entry
MAX_CACHE_BYTES = 2**30  # a process that turns the cache on first prunes it to this (an NCTL configuration: ~1 MB)
QUIET_ENV = "NCTL_QUIET"  # set (and not 0): no notice that a learner is compiling, no warning of unscaled features
NOTICE_AFTER_SECONDS = 3.0  # a learner's first call that runs this long gives the notice (once per process)
# JAX's event timing the making of a program: an XLA compilation, or a load from the persistent cache
BACKEND_COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"
# the files of a cache folder that nctl's prune may remove: JAX's entries ("MODULE-SHA256-cache", with
# "-atime" beside it where JAX caps the size) and nctl's exported programs ("FUNCTION-HASH.jaxexport")
CACHE_ENTRY = re.compile(r".+-[0-9a-f]{64}-(cache|atime)|\w+-[0-9a-f]{32}\.jaxexport")
CONTROL_CHARACTER = re.compile(r"[\x00-\x1f\x7f]")
JAX_COMPILER_LOGGER = "jax._src.compiler"  # logs every miss of the persistent cache, with its key, at DEBUG
MISS_RECORD = "PERSISTENT COMPILATION CACHE MISS"  # how that record's message starts


def cache_off() -> bool:
    """Whether ``$NCTL_CACHE_DIR`` turns the default cache off (``off``, ``0``, ``false`` or ``no``)."""
    return os.environ.get(CACHE_ENV, "").strip().lower() in OFF


def default_cache_dir() -> Path:
    """``$NCTL_CACHE_DIR`` (unless off; surrounding whitespace dropped), else ``$XDG_CACHE_HOME/nctl/jax``
    where that is an absolute path (the XDG specification ignores a relative one), else
    ``~/.cache/nctl/jax``. ValueError where ``$NCTL_CACHE_DIR`` holds a control character."""
    named = os.environ.get(CACHE_ENV, "").strip()
    if named and not cache_off():
        if CONTROL_CHARACTER.search(named):
            raise ValueError(f"{CACHE_ENV}={named!r} is not a folder's name (it holds a control character)")
        return Path(named).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    valid = os.path.isabs(xdg) and not CONTROL_CHARACTER.search(xdg)
    return (Path(xdg) if valid else Path.home() / ".cache") / "nctl" / "jax"


def enable_compilation_cache(path: str | os.PathLike | None = None, exported: bool = True,
                             max_bytes: int | None = MAX_CACHE_BYTES) -> Path:
    """Store compiled programs in ``path`` (default ``default_cache_dir()``) and reuse them across
    processes; with ``exported``, also the NCTL engine's programs as exported by ``jax.export``
    (``path/exported``), which a new process loads without tracing them (``nctl.core.programs``).
    Where the folder holds more than ``max_bytes`` (None: no cap), the programs used least recently
    are removed first (``prune``). Returns the folder. Safe to call more than once; several processes may
    share a folder. Learners call it on their own (``default_cache``): call it to choose another
    folder, before the first learner runs. OSError, with nothing turned on, where the folder cannot be
    made or written to, or where another user can write to it (compiled code is loaded from it)."""
    folder = Path(path).expanduser() if path is not None else default_cache_dir()
    check_writable(native.own_folder(folder))
    programs.use_folder(folder / EXPORTED if exported else None)
    jax.config.update("jax_compilation_cache_dir", str(folder))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", MIN_COMPILE_SECONDS)
    if max_bytes is not None:
        prune([folder, folder / EXPORTED], max_bytes)
    UnreadableEntries.install()
    return folder


_default_lock = threading.Lock()
_default_tried = False


def default_cache() -> Path | None:
    """Turn on the default cache (module docstring) the first time it is called in a process: every
    learner calls it when it creates its state. Returns the folder, or None where nothing was turned on
    (turned off, JAX has a cache already, an earlier call, or a folder that cannot be used: a read-only
    home runs without a cache rather than fail, after one warning)."""
    global _default_tried
    with _default_lock:
        if _default_tried:
            return None
        _default_tried = True
        if cache_off() or jax.config.jax_compilation_cache_dir:
            return None
        try:
            return enable_compilation_cache()
        except (OSError, ValueError) as error:
            _warn_without_cache(error)
            return None


def _warn_without_cache(error: Exception) -> None:
    warnings.warn(f"nctl: {error}; this process runs without a compilation cache", RuntimeWarning, stacklevel=3)


def prune(folders: list[Path], max_bytes: int) -> None:
    """If the cache entries of ``folders`` (``CACHE_ENTRY``: not their subfolders, nor any other file, which
    is the user's) take more than ``max_bytes``, remove the ones used least recently (last read or written)
    until they take at most three quarters of it. JAX's own cap (``jax_compilation_cache_max_size``) is
    not used: its bookkeeping fails on entries that a process without the cap wrote into the same folder.
    Another process may be pruning too: a file gone is fine."""
    files = []
    for folder in folders:
        with contextlib.suppress(OSError):
            for entry in folder.iterdir():
                with contextlib.suppress(OSError):
                    if CACHE_ENTRY.fullmatch(entry.name) and entry.is_file():
                        info = entry.stat()
                        files.append((max(info.st_atime, info.st_mtime), info.st_size, entry))
    total = sum(size for _, size, _ in files)
    if total <= max_bytes:
        return
    for _, size, entry in sorted(files):
        if total <= 3 * max_bytes // 4:
            break
        with contextlib.suppress(OSError):
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
    that lacks the path's parent, say, after one warning): it then compiles for itself."""
    if cache is None or jax.config.jax_compilation_cache_dir:
        return
    try:
        enable_compilation_cache(cache[0], exported=cache[1])
    except OSError as error:  # compile without a cache rather than fail the seed
        _warn_without_cache(error)


class UnreadableEntries(logging.Filter):
    """On JAX's compiler logger: at a miss of the persistent cache whose entry is there (JAX found it, but
    could not read it: a damaged file, which it would never replace), remove the entry, so that the
    program compiled next is stored in its place and a later process loads it without a warning. The
    logger is set to DEBUG to see the misses; the filter passes on what it showed before."""

    @classmethod
    def install(cls) -> None:
        """Put the filter on JAX's compiler logger, unless that logger has a level already (the user's, or
        the one this sets: the filter is put on once)."""
        compiler = logging.getLogger(JAX_COMPILER_LOGGER)
        if compiler.level == logging.NOTSET:
            compiler.setLevel(logging.DEBUG)
            compiler.addFilter(cls())

    def filter(self, record: logging.LogRecord) -> bool:
        folder = jax.config.jax_compilation_cache_dir
        # JAX's check of the cache's contents misses every entry once on purpose
        if (folder and str(record.msg).startswith(MISS_RECORD)
                and not jax.config.jax_compilation_cache_check_contents):
            with contextlib.suppress(OSError):
                (Path(folder) / f"{record.args[1]}-cache").unlink(missing_ok=True)
        # what the logger showed before: its parent's level, or everything where it has a handler of its
        # own (jax_debug_log_modules adds one)
        compiler = logging.getLogger(JAX_COMPILER_LOGGER)
        return bool(compiler.handlers) or record.levelno >= compiler.parent.getEffectiveLevel()


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


logger = logging.getLogger("nctl")
notice_given = threading.Event()  # set by the notice, given once per process (a test may replace it to see one again)
_notice_lock = threading.Lock()


def quiet() -> bool:
    """Whether ``NCTL_QUIET`` is set (to anything but 0): no compiling notice, no unscaled-feature warning."""
    return os.environ.get(QUIET_ENV, "0").strip() not in ("", "0")


def notice_if_slow(what: str):
    """A context for a learner's first call of a kind, the one that compiles its programs: if it runs
    longer than ``NOTICE_AFTER_SECONDS``, one line on the ``nctl`` logger (stderr when logging is not
    configured) says that ``what`` is compiling, once per process; ``NCTL_QUIET=1`` (or the logger's
    level) silences it."""
    if notice_given.is_set() or quiet():
        return contextlib.nullcontext()
    return _notice_timer(what)


@contextlib.contextmanager
def _notice_timer(what: str):
    timer = threading.Timer(NOTICE_AFTER_SECONDS, _notice, args=(what,))
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()


def _notice(what: str) -> None:
    with _notice_lock:
        if notice_given.is_set():
            return
        folder = jax.config.jax_compilation_cache_dir
        later = (f"a later process loads them from {folder}" if folder
                 else "without a persistent compilation cache, every process compiles them again")
        logger.warning(f"nctl: {what} is compiling its programs for this configuration, which takes seconds to a "
                       f"minute once; {later} (NCTL_QUIET=1 hides this notice)")
        notice_given.set()
