"""The state as the native engine holds it: the JAX engine's layout (the same nested tuples, the same
shapes and dtypes), each array a writable, C-ordered numpy array that the C++ code updates in place; and
a state's arrays in order (``leaves``, ``rebuilt``), as JAX orders them, without JAX."""

import numpy as np


def host_arrays(state, copy: bool = True):
    """``state`` (nested tuples and named tuples of arrays of any kind, and None for fields a configuration
    has not) with every array copied into a writable, C-ordered numpy array; with ``copy`` False, a numpy
    array that is one already, owns its memory and is no other field's is taken as it is (a fresh state, a
    loaded one: the C++ code then updates those arrays)."""
    taken: set[int] = set()

    def held(leaf):
        if not copy and isinstance(leaf, np.ndarray) and id(leaf) not in taken:
            taken.add(id(leaf))
            return np.require(leaf, requirements=("C", "W", "O"))
        return np.array(leaf, order="C", copy=True)

    return rebuilt(state, [held(leaf) for leaf in leaves(state)])


def leaves(state) -> list:
    """The arrays of ``state`` (nested tuples and named tuples, None for a field a configuration has not), in
    the order ``jax.tree.leaves`` gives them: the order of a save's arrays."""
    if state is None:
        return []
    if isinstance(state, tuple):
        return [leaf for part in state for leaf in leaves(part)]
    return [state]


def rebuilt(template, arrays):
    """``template``'s nested tuples with its arrays replaced by ``arrays``, in the order of ``leaves``."""
    remaining = iter(arrays)

    def build(part):
        if part is None:
            return None
        if isinstance(part, tuple):
            parts = [build(item) for item in part]
            return type(part)(*parts) if hasattr(part, "_fields") else tuple(parts)
        return next(remaining)

    return build(template)
