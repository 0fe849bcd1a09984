"""JAX, imported where it is first used: ``from nctl.deferred import jax, jnp, lax`` in a module the native
engine's path imports (importing JAX takes about a second, and a learner on the native engine never needs
it). Each name stands for its module: an attribute read imports the module the first time and is that
module's attribute. Code that runs when its module is imported must not read one: a function compiled by
``jax.jit`` is decorated with ``jit(...)`` here instead."""

from __future__ import annotations

import functools
import importlib
from types import ModuleType


class Deferred:
    """The module ``name``, imported when an attribute is first read."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._module: ModuleType | None = None

    def __getattr__(self, attribute: str):
        if self._module is None:
            self._module = importlib.import_module(self._name)
        return getattr(self._module, attribute)

    def __repr__(self) -> str:
        return f"<{self._name}, imported when first used>"


jax, jnp, lax = Deferred("jax"), Deferred("jax.numpy"), Deferred("jax.lax")


def jit(**options):
    """A decorator: ``jax.jit(fun, **options)``, made at the first call (which imports JAX), for a module the
    native engine's path imports; the decorated function is called as the jitted one is."""
    def decorate(fun):
        jitted = None

        @functools.wraps(fun)
        def call(*args, **kwargs):
            nonlocal jitted
            if jitted is None:
                jitted = jax.jit(fun, **options)
            return jitted(*args, **kwargs)

        return call

    return decorate
