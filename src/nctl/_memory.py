"""Free memory for new arrays, and a check that a planned allocation fits in it."""

from __future__ import annotations

from pathlib import Path

import jax

GB = 1e9


def available_memory() -> int | None:
    """Bytes free for new arrays: the accelerator's free memory when JAX runs on one, else the host's
    ``MemAvailable`` (Linux); None when unknown."""
    device = jax.devices()[0]
    if device.platform != "cpu":
        stats = device.memory_stats() or {}
        return stats["bytes_limit"] - stats.get("bytes_in_use", 0) if "bytes_limit" in stats else None
    try:
        lines = Path("/proc/meminfo").read_text().splitlines()
    except OSError:
        return None
    free = [int(line.split()[1]) * 1024 for line in lines if line.startswith("MemAvailable:")]
    return free[0] if free else None


def check_fits(what: str, needed: int, remedy: str) -> None:
    """MemoryError, naming ``what``, the GB needed and free and the ``remedy``, when ``needed`` bytes
    exceed the free memory (nothing is checked when that is unknown)."""
    free = available_memory()
    if free is not None and needed > free:
        raise MemoryError(f"{what} needs {needed / GB:.1f} GB but {free / GB:.1f} GB is free; {remedy}")
