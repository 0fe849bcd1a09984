"""Compiled programs that a new process loads without tracing them (docs/algorithm.md §6.10).

JAX's persistent compilation cache spares a new process XLA's compilation, but not the tracing and
lowering that compute the cache's key: for the engine's step and boundary programs these take seconds
(most of a river stream's first example). ``jit(fun, ...)`` here is ``jax.jit`` with one addition:
once ``use_folder(path)`` has named a folder (``nctl.enable_compilation_cache`` does), each program is
exported (``jax.export``: its StableHLO, for the static arguments and argument shapes of the call)
into that folder the first time it is needed, and a later process reads it from there; either way the
program runs as ``jax.jit`` of the exported function, which compiles it (or loads it from the
persistent cache) without tracing ``fun``. A stored program's key covers the function's name, its
static arguments, the shapes and types of the others, the source of ``nctl.core``, the JAX version,
the platform and whether the CPU kernel is in use, so an edited engine or another JAX never loads an old
program.

A stored file starts with the SHA-256 of the program's whole key and of the serialised program after
it: a file that is damaged, or was made for another key (swapped, or copied in), does not match, and
its program is exported and written again. Programs are loaded only from a folder that no other user
can write to (``nctl.core.native.own_folder``). Where a program cannot be written (a full disk, a
read-only folder), one warning says so and the process goes on without the folder.

Programs whose static arguments include a function (an observation hook) are not stored; without a
folder, or without the ``flatbuffers`` package that ``jax.export`` serialises with, everything is
plain ``jax.jit``. Writes are atomic (``nctl.atomic``), so processes may share a folder.
"""

from __future__ import annotations

import hashlib
import os
import threading
import warnings
from collections import OrderedDict
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any, Callable

from nctl.atomic import check_writable, write_bytes
from nctl.core import native
from nctl.deferred import Deferred, jax

export = Deferred("jax.export")

_folder: Path | None = None
_folder_lock = threading.Lock()
PROGRAMS_KEPT = 32  # stored programs held in memory (each: its module, and jit's compiled executable)
DIGEST_BYTES = 32  # a stored file's first bytes: the SHA-256 of its program's key and of the program


def use_folder(path: str | os.PathLike | None) -> Path | None:
    """Store and load exported programs in ``path`` (None: stop). Returns the folder, or None when
    this JAX cannot serialise exported programs. OSError (and no folder) where ``path`` cannot be made or
    written to, or where others can write to it."""
    global _folder
    _folder = None
    if path is None or not can_serialise():
        return None
    _folder = check_writable(native.own_folder(Path(path)))
    return _folder


def folder() -> Path | None:
    return _folder


@lru_cache(maxsize=1)
def can_serialise() -> bool:
    """Whether programs can be stored: ``jax.export`` serialises with ``flatbuffers``."""
    try:
        import flatbuffers  # noqa: F401  (what jax.export serialises with)
    except ImportError:
        return False
    return True


@lru_cache(maxsize=1)
def _source_digest() -> str:
    """A digest of every module of ``nctl.core`` (the CPU kernels' sources too), of the JAX that lowers
    them, and of whether the kernel is in use (its programs call it)."""
    from jaxlib.version import __version__ as jaxlib_version

    digest = hashlib.sha256(f"{jax.__version__} {jaxlib_version} {jax.default_backend()} {native.enabled()}".encode())
    root = Path(__file__).parent
    for path in sorted([*root.rglob("*.py"), *root.rglob("*.cc"), *root.rglob("*.h")]):
        digest.update(str(path.relative_to(root)).encode() + path.read_bytes())
    return digest.hexdigest()


@lru_cache(maxsize=1)
def _kernel_checks() -> list:
    """The CPU kernel's targets (§6.11), this package's own, which each process that loads a program
    registers."""
    return [export.DisabledSafetyCheck.custom_call(target) for target in native.TARGETS]


_kinds_to_register: list[type] = []  # named by ``register``, registered with jax.export by the first program made
_register_lock = threading.Lock()


def register(*kinds: type) -> None:
    """Name the NamedTuple types that stored programs take or return, so that they can be serialised
    (registered with ``jax.export`` when the first stored program is made: importing JAX waits till then)."""
    with _register_lock:
        _kinds_to_register.extend(kinds)


def _register_named_types() -> None:
    with _register_lock:
        for kind in _kinds_to_register:
            export.register_namedtuple_serialization(kind, serialized_name=f"{kind.__module__}.{kind.__qualname__}")
        _kinds_to_register.clear()


def _signature(args) -> tuple:
    """The structure of ``args`` and the shape, dtype and weak type of each array (or shape struct)
    among them, the type of each Python scalar: what a program exported for ``args`` is specific to."""
    leaves, treedef = jax.tree.flatten(args)
    return treedef, tuple((a.shape, a.dtype, getattr(a, "weak_type", False)) if hasattr(a, "shape") else type(a)
                          for a in leaves)


def _kinds(args) -> tuple:
    """A cheaper key than ``_signature`` for the programs of one process (one call per river row): the
    shape and dtype of each array argument, the structure of each pytree argument (the engine's state,
    whose shapes its configuration, a static argument, determines), the type of each Python scalar."""
    return tuple((a.shape, a.dtype) if hasattr(a, "shape") else jax.tree.structure(a) if isinstance(a, tuple)
                 else type(a) for a in args)


@lru_cache(maxsize=None)
def _known_option(name: str, value) -> bool:
    """Whether the default backend's XLA takes the compiler option ``name``: XLA drops options between
    releases (jaxlib 0.11's XLA:CPU refuses ``xla_cpu_use_fusion_emitters``), and a refused option would
    fail every program; it is left out instead."""
    try:
        jax.jit(lambda: 0, compiler_options={name: value}).lower().compile()
    except jax.errors.JaxRuntimeError as error:
        if "No such compile option" in str(error):
            return False
        raise
    return True


class jit:
    """``jax.jit(fun, static_argnums=..., donate_argnums=..., compiler_options=...)``, whose programs
    are stored in and loaded from ``use_folder``'s folder when one is set (module docstring).
    ``compiler_options`` maps a platform (``"cpu"``, ``"gpu"``, ...) to XLA options for that platform
    alone; they are chosen when the first program is made, on the default backend of that moment."""

    def __init__(self, fun: Callable, static_argnums: tuple = (), donate_argnums: tuple = (),
                 compiler_options: dict[str, dict] | None = None):
        if not fun.__module__.startswith("nctl.core.") or "<" in fun.__qualname__:
            raise ValueError(f"{fun.__qualname__}: stored programs are named by module and name, so they must be "
                             "module-level functions of nctl.core (whose source their key covers)")
        self._fun, self._static, self._donate = fun, tuple(static_argnums), tuple(donate_argnums)
        self._options_by_platform = compiler_options or {}
        self._programs: OrderedDict = OrderedDict()  # key -> jax.jit of the exported function
        self._lock = threading.Lock()  # programs are also made in compile-ahead threads
        self.__name__, self.__doc__, self.__wrapped__ = fun.__name__, fun.__doc__, fun

    @cached_property
    def _options(self) -> dict | None:
        """The compiler options for the default backend that its XLA knows (none where
        ``compiler_options`` names none)."""
        options = self._options_by_platform.get(jax.default_backend(), {})
        return {name: value for name, value in options.items() if _known_option(name, value)} or None

    @cached_property
    def _jitted(self):
        return jax.jit(self._fun, static_argnums=self._static, donate_argnums=self._donate,
                       compiler_options=self._options)

    def __call__(self, *args):
        program, dynamic = self._program(args)
        return program(*dynamic)

    def lower(self, *args):
        """Lowered for ``args`` (arrays or ``jax.ShapeDtypeStruct``): ``.compile()`` also makes the
        program that calls with these kinds of arguments find."""
        program, dynamic = self._program(args)
        return program.lower(*dynamic)

    def _program(self, args) -> tuple[Any, tuple]:
        """The program for ``args``, and the arguments it takes (the dynamic ones)."""
        statics = tuple(args[i] for i in self._static)
        folder = _folder  # read once: a failed write in another thread may drop it (_store)
        if folder is None or any(callable(s) for s in statics):
            return self._jitted, args
        dynamic = tuple(a for i, a in enumerate(args) if i not in self._static)
        key = (statics, _kinds(dynamic))
        with self._lock:
            program = self._programs.get(key)
            if program is None:
                program = self._make(folder, args, (statics, _signature(dynamic)))
                self._programs[key] = program
                while len(self._programs) > PROGRAMS_KEPT:
                    self._programs.popitem(last=False)
            self._programs.move_to_end(key)
        return program, dynamic

    def _make(self, folder: Path, args, key):
        """Load the exported program from ``folder``, or export it there; wrap it in ``jax.jit``."""
        key = f"{self._fun.__module__}.{self._fun.__qualname__} {key!r} {_source_digest()}".encode()
        path = folder / f"{self._fun.__name__}-{hashlib.sha256(key).hexdigest()[:32]}.jaxexport"
        _register_named_types()
        exported = _load(path, key)
        if exported is None:
            exported = export.export(self._jitted, disabled_checks=_kernel_checks())(*args)
            _store(path, key, exported.serialize())
        positions = [i for i in range(len(args)) if i not in self._static]
        donate = tuple(positions.index(i) for i in self._donate)
        return jax.jit(exported.call, donate_argnums=donate, compiler_options=self._options)


def _digest(key: bytes, program: bytes) -> bytes:
    """What a stored file starts with: the SHA-256 of ``key``'s SHA-256 (a fixed length, so that no key and
    program run into each other) followed by ``program``."""
    return hashlib.sha256(hashlib.sha256(key).digest() + program).digest()


def _load(path: Path, key: bytes) -> export.Exported | None:
    """The program stored at ``path`` for ``key``; None where there is none, or the file cannot be read,
    is damaged or holds another key's program (it is then made again)."""
    try:
        data = path.read_bytes()
    except OSError:
        return None
    program = data[DIGEST_BYTES:]
    if data[:DIGEST_BYTES] != _digest(key, program):
        return None
    return export.deserialize(bytearray(program))


def _store(path: Path, key: bytes, program: bytes) -> None:
    """Write ``program`` to ``path`` for ``key``; where that fails, warn and store nothing more in this process
    (the cache only saves time)."""
    global _folder
    try:
        write_bytes(path, _digest(key, program) + program)
    except OSError as error:
        with _folder_lock:
            if _folder is not None:
                warnings.warn(f"nctl: cannot store compiled programs in {_folder} ({error}); this process "
                              "runs without them", RuntimeWarning, stacklevel=2)
            _folder = None
