"""Array helpers of the engine's programs: scatters that drop, loops that update in place, and the
axis of the class networks (docs/algorithm.md §6).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np


def unique_or_drop(index, keep, size: int):
    """``index`` where ``keep``, else a distinct out-of-range index: scatters that drop the rest can then
    promise unique indices, which makes them several times faster on a CPU."""
    spare = size + jnp.arange(int(np.prod(index.shape)), dtype=jnp.int32).reshape(index.shape)
    return jnp.where(keep, index, spare)


def when(predicate, fn, operand):
    """``fn(operand)`` if ``predicate`` else ``operand``, as a loop that runs zero times or once: unlike
    ``lax.cond``, XLA then updates the operand's buffers in place instead of copying them."""
    return jax.lax.while_loop(lambda c: c[0], lambda c: (jnp.bool_(False), fn(c[1])), (predicate, operand))[1]


def put(items: tuple, index: int, value) -> tuple:
    return items[:index] + (value,) + items[index + 1:]


def per_net(fn, *args, keep_axis: bool = False):
    """``fn`` over the class networks (the leading axis of ``args``): vmapped, or called directly when
    there is one network, which keeps the traced program small (a binary learner's first call).
    ``keep_axis`` vmaps one network too: the CPU kernel that updates blocks in place (§6.11) must receive
    the state's own buffer, and XLA hands it a copy of a reshaped one."""
    if jax.tree.leaves(args[0])[0].shape[0] == 1 and not keep_axis:
        out = fn(*jax.tree.map(lambda a: a[0], args))
        return jax.tree.map(lambda a: a[None], out)
    return jax.vmap(fn, axis_name=NET_AXIS)(*args)


NET_AXIS = "nets"


def any_net(flag):
    """``flag`` of any class network, inside ``per_net``'s vmap (``flag`` itself outside it). A loop whose
    condition is per network becomes, under vmap, a select of its whole carry per iteration: a copy of
    the network's arenas. With the condition shared, the loop runs in place, and a body that masks its
    writes by each network's own flag leaves the finished networks unchanged."""
    try:
        return jax.lax.psum(flag.astype(jnp.int32), NET_AXIS) > 0
    except NameError:  # one network: not vmapped
        return flag
