"""The state as the native engine holds it: the JAX engine's layout (the same nested tuples, the same
shapes and dtypes), each array a writable, C-ordered numpy array that the C++ code updates in place."""

import numpy as np


def host_arrays(state):
    """``state`` (nested tuples and named tuples of arrays of any kind, and None for fields a configuration
    has not) with every array copied into a writable, C-ordered numpy array."""
    if state is None:
        return None
    if isinstance(state, tuple):
        parts = [host_arrays(part) for part in state]
        return type(state)(*parts) if hasattr(state, "_fields") else tuple(parts)
    return np.array(state, order="C", copy=True)
