"""Free memory for new arrays, and a check that a planned allocation fits in it.

On the CPU, the room a process has is the least of what the host has available and what its own
limits leave: the address-space and data-segment limits (``ulimit -v``, ``ulimit -d``) and the memory
limits of its cgroups (containers, batch schedulers), none of which the host's free memory shows.
"""

from __future__ import annotations

import contextlib
import resource
import sys
from dataclasses import dataclass
from pathlib import Path

from nctl import engines
from nctl.deferred import jax

GB = 1e9
UNLIMITED = 2**62  # a cgroup v1 memory limit at least this large is no limit (the kernel's "unlimited" is ~2^63)


@dataclass(frozen=True)
class Room:
    """Bytes free for new arrays under one bound: ``left`` of ``limit`` (None: the bound is free memory
    itself), named by ``source``."""

    source: str
    left: int
    limit: int | None = None
    kept: int = 0  # bytes of the limit kept for XLA's runtime (``runtime_to_come``), not counted in left

    def __str__(self) -> str:
        free = f"{max(self.left, 0) / GB:.1f} GB is free"
        if self.limit is None:
            return f"{free} ({self.source})"
        kept = f" once {self.kept / GB:.1f} GB is kept for XLA's compiler and threads" if self.kept else ""
        return f"{free} under the {self.source} of {self.limit / GB:.1f} GB{kept}"


def rooms() -> list[Room]:
    """Every bound known on this process's new arrays: the accelerator's free memory when JAX runs on
    one; else the host's ``MemAvailable``, the rlimits and the cgroup limits (Linux). Empty when none is
    known. JAX is not imported to ask where no accelerator can be in use (``engines.accelerator``)."""
    if not engines.accelerator():
        return host_rooms()
    device = jax.devices()[0]
    if device.platform != "cpu":
        stats = device.memory_stats() or {}
        if "bytes_limit" not in stats:
            return []
        return [Room(f"{device.platform} memory", stats["bytes_limit"] - stats.get("bytes_in_use", 0),
                     stats["bytes_limit"])]
    return host_rooms()


def host_rooms() -> list[Room]:
    """Every bound known on this process's host memory: the host's ``MemAvailable``, the rlimits and the
    cgroup limits (Linux)."""
    found = rlimit_rooms() + cgroup_rooms()
    available = _proc_bytes("/proc/meminfo", "MemAvailable")
    return found + ([Room("the host's available memory, MemAvailable", available)] if available is not None else [])


def tightest() -> Room | None:
    """The bound with the least room, or None when none is known."""
    return min(rooms(), key=lambda room: room.left, default=None)


def available_memory() -> int | None:
    """Bytes free for new arrays (the ``tightest`` bound's); None when unknown."""
    room = tightest()
    return None if room is None else max(room.left, 0)


def available_host_memory() -> int | None:
    """Bytes free for new host arrays (the tightest of ``host_rooms``), also where JAX runs on an
    accelerator; None when unknown."""
    room = min(host_rooms(), key=lambda room: room.left, default=None)
    return None if room is None else max(room.left, 0)


# (resource, its name and shell option, the /proc/self/status field of what the process holds under it)
RLIMITS = ((resource.RLIMIT_AS, "address-space limit RLIMIT_AS (ulimit -v)", "VmSize"),
           (resource.RLIMIT_DATA, "data-segment limit RLIMIT_DATA (ulimit -d)", "VmData"))


# Address space that XLA's runtime and compiler take beyond the arrays, which a limit on it (ulimit -v, -d)
# counts and the arrays' bytes do not: the process of the smallest NCTL learner grew from 0.4 GB after
# importing nctl to 1.7 GB at its first learned row, for a 12 MB state (threads' stacks, the compiler's
# memory, the programs' code).
RUNTIME_ADDRESS_SPACE = int(1.5 * GB)


def rlimit_rooms() -> list[Room]:
    """What this process's soft limits on address space and data leave beyond what it already holds and
    what XLA's runtime will still take (``runtime_to_come``)."""
    found = []
    for which, source, held_field in RLIMITS:
        limit = resource.getrlimit(which)[0]
        held = _proc_bytes("/proc/self/status", held_field)
        if limit != resource.RLIM_INFINITY and held is not None:
            kept = runtime_to_come()
            found.append(Room(source, limit - held - kept, limit, kept))
    return found


def runtime_to_come() -> int:
    """``RUNTIME_ADDRESS_SPACE`` less what the process has grown since JAX started (its largest address
    space, ``VmPeak``, against ``VmSize`` when this module was imported, after JAX): a process that has
    compiled and run its programs has taken most of it already."""
    peak = _proc_bytes("/proc/self/status", "VmPeak")
    if peak is None or _SIZE_AT_IMPORT is None:
        return RUNTIME_ADDRESS_SPACE
    return max(0, RUNTIME_ADDRESS_SPACE - (peak - _SIZE_AT_IMPORT))


# per cgroup version: the mount's file system type and controller option, the limit, usage and
# statistics files, and the statistic of page cache the kernel can reclaim before it refuses memory
CGROUP_FILES = {2: ("cgroup2", None, "memory.max", "memory.current", "inactive_file"),
                1: ("cgroup", "memory", "memory.limit_in_bytes", "memory.usage_in_bytes", "total_inactive_file")}


def cgroup_rooms(proc: Path = Path("/proc/self")) -> list[Room]:
    """What the memory limits of this process's cgroups (v2 ``memory.max``, v1 ``memory.limit_in_bytes``,
    of its group and every group above it) leave beyond their usage less reclaimable page cache."""
    try:
        groups = (proc / "cgroup").read_text().splitlines()
        mounts = [line.split() for line in (proc / "mountinfo").read_text().splitlines()]
    except OSError:
        return []
    found = []
    for line in groups:
        _, controllers, path = line.split(":", 2)
        version = 2 if controllers == "" else 1 if "memory" in controllers.split(",") else None
        mounted = None if version is None else _cgroup_folder(mounts, version, path)
        if mounted is None:
            continue
        mount, folder = mounted
        for level in (folder, *folder.parents):  # a group's limit binds every group below it
            room = _cgroup_room(level, version)
            found += [room] if room is not None else []
            if level == mount:
                break
    return found


def _cgroup_folder(mounts: list[list[str]], version: int, path: str) -> tuple[Path, Path] | None:
    """(the mount point of the hierarchy, the folder of cgroup ``path`` in it); the folder is the mount
    point when the path lies outside the mount's root (a cgroup namespace); None when the hierarchy is
    not mounted. mountinfo's fields: the mount's root is the 4th, its mount point the 5th, the file
    system type and its options follow the ``-``."""
    fstype, option = CGROUP_FILES[version][:2]
    for fields in mounts:
        if "-" not in fields:
            continue
        tail = fields[fields.index("-") + 1:]
        if tail[0] != fstype or (option is not None and option not in tail[-1].split(",")):
            continue
        root, mount = fields[3], Path(fields[4])
        inside = path == root or path.startswith(root.rstrip("/") + "/")
        return mount, mount / path[len(root):].lstrip("/") if inside else mount
    return None


def _cgroup_room(folder: Path, version: int) -> Room | None:
    """The room the memory limit of the cgroup at ``folder`` leaves; None without a limit there."""
    _, _, limit_file, usage_file, cache_field = CGROUP_FILES[version]
    try:
        limit_text = (folder / limit_file).read_text().strip()
        if limit_text == "max" or int(limit_text) >= UNLIMITED:
            return None
        limit, usage = int(limit_text), int((folder / usage_file).read_text())
        stat = dict(line.split() for line in (folder / "memory.stat").read_text().splitlines())
    except (OSError, ValueError):
        return None
    reclaimable = int(stat.get(cache_field, 0))
    return Room(f"cgroup memory limit {folder / limit_file}", limit - max(usage - reclaimable, 0), limit)


def _proc_bytes(path: str, field: str) -> int | None:
    """A ``field: N kB`` line of a Linux /proc file, in bytes; None off Linux or without the field."""
    try:
        lines = Path(path).read_text().splitlines()
    except OSError:
        return None
    found = [int(line.split()[1]) * 1024 for line in lines if line.startswith(field + ":")]
    return found[0] if found else None


_SIZE_AT_IMPORT = _proc_bytes("/proc/self/status", "VmSize")  # after importing JAX (above)


def peak_resident_bytes() -> int | None:
    """The largest resident memory this process has held so far (``VmHWM``, Linux); None when unknown."""
    return _proc_bytes("/proc/self/status", "VmHWM")


def check_fits(what: str, needed: int, remedy: str) -> None:
    """MemoryError, naming ``what``, the GB needed, the bound that has too little room and the
    ``remedy``, when ``needed`` bytes exceed the room of the ``tightest`` bound (nothing is checked
    when no bound is known)."""
    room = tightest()
    if room is not None and needed > room.left:
        raise MemoryError(f"{what} needs {needed / GB:.1f} GB but {room}; {remedy}")


@contextlib.contextmanager
def allocation(what: str, needed: int, remedy: str):
    """Raise MemoryError, naming ``what``, the GB needed and the ``remedy``, where an allocation of the
    block fails, in numpy (a fresh state is made there) or in XLA (``RESOURCE_EXHAUSTED``): a bound
    ``rooms`` does not see, or memory taken since ``check_fits``. The block must wait for its arrays
    (``jax.block_until_ready``): an array whose computation failed can otherwise surface later, where
    reading it may never return."""
    try:
        yield
    except Exception as error:
        if not isinstance(error, MemoryError) and not _xla_exhausted(error):
            raise
        raise MemoryError(f"{what} needs {needed / GB:.1f} GB and its allocation failed "
                          f"({str(error).splitlines()[0]}); {remedy}") from error


def _xla_exhausted(error: Exception) -> bool:
    """Whether ``error`` is XLA's failure to allocate (JAX is imported where XLA allocated anything)."""
    jax_module = sys.modules.get("jax")
    return (jax_module is not None and isinstance(error, jax_module.errors.JaxRuntimeError)
            and "RESOURCE_EXHAUSTED" in str(error))


MAPS_SHARE = 0.5  # drop compiled programs once the process holds this share of the kernel's mapping limit


def map_counts() -> tuple[int, int] | None:
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
    configurations (a sweep, a test suite) would otherwise pass the limit and abort. Programs still
    needed compile again (or load from the persistent cache). Returns whether they were dropped."""
    counts = map_counts()
    if counts is None or counts[0] < MAPS_SHARE * counts[1]:
        return False
    jax.clear_caches()
    return True
