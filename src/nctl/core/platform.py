"""Code that differs by platform (the CPU kernel, loops that suit one device and not another).

``jax.lax.platform_dependent`` traces every branch, and a program lowered for one platform keeps only
that platform's. A process whose default backend is the CPU has no accelerator to lower for, so
``by_platform`` traces the CPU branch alone there: the same program, without tracing the other branch
(a new process's first call traces the engine's programs; docs/algorithm.md §6.10).
"""

import jax


def by_platform(operand, cpu, default):
    """``cpu(operand)`` on the CPU, ``default(operand)`` on any other platform."""
    if jax.default_backend() == "cpu":
        return cpu(operand)
    return jax.lax.platform_dependent(operand, cpu=cpu, default=default)
