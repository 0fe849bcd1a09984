"""``by_platform``: the branch of the platform a program runs on, the other branch not traced where it
cannot be taken."""

import jax
import jax.numpy as jnp
import numpy as np

from nctl.core.platform import by_platform


def test_the_branch_of_this_platform_runs_and_the_other_is_traced_only_where_it_may_be_taken():
    traced = []

    def branch(name, scale):
        def fn(x):
            traced.append(name)
            return x * scale
        return fn

    out = jax.jit(lambda x: by_platform(x, cpu=branch("cpu", 2.0), default=branch("default", 3.0)))(jnp.ones(3))
    on_cpu = jax.default_backend() == "cpu"
    np.testing.assert_array_equal(np.asarray(out), np.full(3, 2.0 if on_cpu else 3.0))
    assert traced == (["cpu"] if on_cpu else ["cpu", "default"])
