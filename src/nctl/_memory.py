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
    return _proc_bytes("/proc/meminfo", "MemAvailable")


def peak_resident_bytes() -> int | None:
    """The largest resident memory this process has held so far (``VmHWM``, Linux); None when unknown."""
    return _proc_bytes("/proc/self/status", "VmHWM")


def _proc_bytes(path: str, field: str) -> int | None:
    """A ``field: N kB`` line of a Linux /proc file, in bytes; None off Linux or without the field."""
    try:
        lines = Path(path).read_text().splitlines()
    except OSError:
        return None
    found = [int(line.split()[1]) * 1024 for line in lines if line.startswith(field + ":")]
    return found[0] if found else None


def check_fits(what: str, needed: int, remedy: str) -> None:
    """MemoryError, naming ``what``, the GB needed and free and the ``remedy``, when ``needed`` bytes
    exceed the free memory (nothing is checked when that is unknown)."""
    free = available_memory()
    if free is not None and needed > free:
        raise MemoryError(f"{what} needs {needed / GB:.1f} GB but {free / GB:.1f} GB is free; {remedy}")


MAPS_SHARE = 0.5  # drop compiled programs once the process holds this share of the kernel's mapping limit


def _map_counts() -> tuple[int, int] | None:
    """(memory mappings this process holds, the kernel's limit vm.max_map_count); None off Linux."""
    try:
        limit = int(Path("/proc/sys/vm/max_map_count").read_text())
        with open("/proc/self/maps", "rb") as maps:
            return sum(1 for _ in maps), limit
    except (OSError, ValueError):
        return None


def trim_compiled_programs() -> bool:
    """Drop JAX's compiled programs when this process's memory mappings near the kernel's limit. Each
    program XLA compiles for the CPU holds about a thousand mappings; a process that compiles many
    configurations (a sweep, a test session) would otherwise pass the limit and abort. Programs still
    needed compile again (or load from the persistent cache). Returns whether they were dropped."""
    counts = _map_counts()
    if counts is None or counts[0] < MAPS_SHARE * counts[1]:
        return False
    jax.clear_caches()
    return True
