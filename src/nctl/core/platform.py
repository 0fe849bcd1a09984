"""Code that differs by platform (the CPU kernel, loops that suit one device and not another).

``jax.lax.platform_dependent`` traces every branch, and a program lowered for one platform keeps only
that platform's. A process whose default backend is the CPU has no accelerator to run on, so
``by_platform`` traces the CPU branch alone there: the program it runs is the same, without tracing
the other branch (a new process's first call traces the engine's programs; docs/algorithm.md §6.10).
Such a trace lowers for the CPU only; a process with an accelerator traces both branches.
"""

from nctl.deferred import jax


def cpu_only() -> bool:
    """Whether this process's programs run on the CPU: its default backend is the CPU."""
    return jax.default_backend() == "cpu"


def by_platform(operand, cpu, default):
    """``cpu(operand)`` on the CPU, ``default(operand)`` on any other platform."""
    if cpu_only():
        return cpu(operand)
    return jax.lax.platform_dependent(operand, cpu=cpu, default=default)
