"""Which engine runs a learner's arithmetic, chosen here and nowhere else.

``native``: the C++ engine (``nctl.native``), built at install time, for the CPU: no compiler between a
process and its first row, microseconds per row. ``jax``: the JAX engine (``nctl.core``), compiled by XLA,
for accelerators and as the cross-check of the native one. Both keep one state layout and one save format:
a learner saved by one loads and continues in the other.

The choice is ``$NCTL_ENGINE`` (``native``, ``jax`` or ``auto``), else ``use(...)``; ``auto`` (the default)
takes the native engine where it loads and no accelerator plugin of JAX is installed, else JAX. A learner
asks once, when it creates its state (``learner.engine_``), and keeps its engine. Learners the native
engine does not run yet (NCTL in bounded mode, the paper's image-sized NCTL networks) run on JAX whatever is
chosen (``learner.native_engine_for(n_features)``).
"""

from __future__ import annotations

import importlib.util
import os
import sys
import threading
import warnings

NATIVE, JAX, AUTO = "native", "jax", "auto"
ENGINE_ENV = "NCTL_ENGINE"
ACCELERATOR_PLUGINS = ("jax_cuda12_plugin", "jax_cuda13_plugin", "jax_rocm60_plugin", "jax_rocm7_plugin", "libtpu")

_chosen: str | None = None  # set by use()
_native_lock = threading.Lock()
_native: dict = {}


def use(engine: str) -> None:
    """Run the learners created from now on with ``engine`` (``native``, ``jax`` or ``auto``), unless
    ``$NCTL_ENGINE`` says otherwise."""
    global _chosen
    _chosen = _checked(engine, "use(engine)")


def requested() -> str:
    """What was asked for: ``$NCTL_ENGINE``, else ``use(...)``'s choice, else ``auto``."""
    if os.environ.get(ENGINE_ENV, "").strip():
        return _checked(os.environ[ENGINE_ENV].strip().lower(), f"${ENGINE_ENV}")
    return _chosen or AUTO


def choose() -> str:
    """The engine a new learner runs on: ``native`` or ``jax`` (module docstring). Asking for ``native``
    where it cannot load raises RuntimeError naming why; ``auto`` then runs JAX, with one warning."""
    wanted = requested()
    if wanted == JAX or (wanted == AUTO and accelerator()):
        return JAX
    error = native_error()
    if error is None:
        return NATIVE
    if wanted == NATIVE:
        raise RuntimeError(f"the native engine cannot load ({error}); set {ENGINE_ENV}=jax to run on JAX")
    return JAX


def native_error() -> str | None:
    """None where the native engine's library loads (built now if it has to be), else why not, said once
    in a warning."""
    with _native_lock:
        if "error" not in _native:
            from nctl.native import library

            try:
                _native["library"], _native["error"] = library.load(), None
            except (OSError, RuntimeError) as error:
                _native["error"] = str(error)
                warnings.warn(f"nctl: the native engine could not be built or loaded, learners run on JAX: {error}",
                              RuntimeWarning, stacklevel=3)
        return _native["error"]


def native_library():
    """The loaded native library (``native_error()`` is None first)."""
    native_error()
    return _native["library"]


def accelerator() -> bool:
    """Whether JAX would run on an accelerator: its default backend where JAX is imported already, else
    whether an accelerator plugin is installed (found without importing JAX)."""
    if "jax" in sys.modules:
        return sys.modules["jax"].default_backend() != "cpu"
    return any(importlib.util.find_spec(name) is not None for name in ACCELERATOR_PLUGINS)


def _checked(engine: str, where: str) -> str:
    if engine not in (NATIVE, JAX, AUTO):
        raise ValueError(f"{where} must be 'native', 'jax' or 'auto', got {engine!r}")
    return engine
