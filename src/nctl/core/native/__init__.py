"""Hand-written CPU kernels for the engine, registered with XLA's FFI (docs/algorithm.md §6.11).

``ggm_rows.cc`` trains a layer's GGM rows in place (one pass over each row where XLA's gather, update
and scatter make three), and predicts that layer's other rows (pool entries, the states a pool decision
compares) with the same dot product; ``member_values.cc`` gives each member of a layer's nodes its
source's or its lane's prediction or log-likelihood; ``largest_first.cc`` takes a reservoir merge's
largest keys and gives bounded mode's lanes to the most probable members; ``free_blocks.cc`` pushes the
blocks of the slots that close back onto their free stacks; ``store_rows.cc`` copies the states a pool
boundary stores into their entries. They are compiled into one library with the system's C++ compiler (``$CXX``,
else ``c++``) against the headers jaxlib ships, under a name that hashes the sources, the compiler, its
flags, jaxlib's version and the machine. Installing the package builds it into the package
(``setup.py``), so that no process waits for it; where that library is missing or was built for another
jaxlib, the first process that needs the kernels builds it into a cache directory
(``$NCTL_NATIVE_CACHE``, else ``~/.cache/nctl/native``). A library ends with the SHA-256 of the rest of
it, appended when it is built (the dynamic loader ignores what follows the ELF sections), and is loaded only
if that still matches (a truncated library kills the process with SIGBUS when loaded), and only from a
folder that no other user can write to (``own_folder``). Without a
compiler, where the build fails, with a cache folder others can write to, or with ``NCTL_NATIVE=0``, the
engine runs its XLA code instead, on every platform it runs on; other platforms than the CPU always do.
"""

import ctypes
import hashlib
import os
import platform
import shlex
import stat
import subprocess
import tempfile
import threading
import warnings
from pathlib import Path

import numpy as np

from nctl.deferred import jax, jnp

SOURCES = tuple(Path(__file__).with_name(name)
                for name in ("ggm_rows.cc", "member_values.cc", "largest_first.cc", "free_blocks.cc", "store_rows.cc"))
HEADERS = (Path(__file__).with_name("kernel_common.h"),)  # included by the sources
TARGETS = {"nctl_train_rows": "NctlTrainRows", "nctl_predict_rows": "NctlPredictRows",
           "nctl_row_predictions": "NctlRowPredictions", "nctl_entry_predictions": "NctlEntryPredictions",
           "nctl_pool_predictions": "NctlPoolPredictions",
           "nctl_member_values_f32": "NctlMemberValuesF32", "nctl_member_values_f64": "NctlMemberValuesF64",
           "nctl_largest_first": "NctlLargestFirst", "nctl_free_blocks": "NctlFreeBlocks",
           "nctl_assign_lanes": "NctlAssignLanes", "nctl_store_rows": "NctlStoreRows"}
FLAGS = ["-std=c++17", "-O3", "-ffp-contract=off", "-fPIC", "-shared", "-w"]
DIGEST_BYTES = 32  # a library's last bytes: the SHA-256 of the bytes before them

_lock = threading.Lock()
_state: dict = {}


def cache_dir() -> Path:
    return Path(os.environ.get("NCTL_NATIVE_CACHE") or Path.home() / ".cache" / "nctl" / "native")


def _compiler() -> list[str]:
    """``$CXX`` (else ``c++``) split as the shell would; RuntimeError where it cannot be (a lone quote)."""
    command = os.environ.get("CXX") or "c++"
    try:
        return shlex.split(command)
    except ValueError as error:
        raise RuntimeError(f"CXX={command!r} is not a command: {error}") from None


def own_folder(folder: Path) -> Path:
    """Create ``folder`` (for its owner alone) unless it exists, and check that compiled code loaded from it
    can only be this user's: PermissionError unless the folder belongs to this user (or root) and no
    other user can write to it. (Here rather than elsewhere in nctl: ``setup.py`` runs this module alone.)"""
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    info = folder.stat()
    if info.st_uid not in (os.geteuid(), 0):
        raise PermissionError(f"{folder} belongs to another user: nctl loads no compiled code from it")
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise PermissionError(f"{folder} is writable by other users: nctl loads no compiled code from it")
    return folder


def library_name() -> str:
    """The library's file name: a hash of the sources and their header, the compiler and its flags,
    jaxlib's version and the machine (not of where jaxlib's headers are, so that a library built at
    install time matches)."""
    from jaxlib.version import __version__ as jaxlib_version

    key = hashlib.sha256(b"".join(source.read_bytes() for source in SOURCES + HEADERS))
    key.update(" ".join(_compiler() + FLAGS + [jaxlib_version, platform.machine()]).encode())
    return f"kernels-{key.hexdigest()[:16]}.so"


def intact(library: Path) -> bool:
    """Whether ``library`` is there, whole: its last ``DIGEST_BYTES`` are the SHA-256 of the rest."""
    try:
        data = library.read_bytes()
    except OSError:
        return False
    return hashlib.sha256(data[:-DIGEST_BYTES]).digest() == data[-DIGEST_BYTES:]


def build(folder: Path) -> Path:
    """Compile the library into ``folder`` unless an intact one is there: each source on its own
    compiler process, at once, then linked; its digest appended, then written atomically (temp file +
    rename). Raises RuntimeError where the compiler fails."""
    path = folder / library_name()
    if intact(path):
        return path
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    include = f"-I{jax.ffi.include_dir()}"
    with tempfile.TemporaryDirectory(dir=folder) as temp:
        objects = [Path(temp) / f"{source.stem}.o" for source in SOURCES]
        commands = [[*_compiler(), *FLAGS, include, "-c", str(source), "-o", str(obj)]
                    for source, obj in zip(SOURCES, objects)]
        compiling = [subprocess.Popen(command, stderr=subprocess.PIPE, text=True) for command in commands]
        errors = [run.communicate()[1] for run in compiling]  # read while waiting: a full pipe would block
        failures = [(command, error) for command, run, error in zip(commands, compiling, errors) if run.returncode]
        linked = Path(temp) / path.name
        link = [*_compiler(), *FLAGS, *map(str, objects), "-o", str(linked)]
        if not failures:
            run = subprocess.run(link, capture_output=True, text=True)
            failures = [(link, run.stderr)] if run.returncode else []
        if failures:
            command, error = failures[0]
            raise RuntimeError(f"{shlex.join(command)} failed:\n{error[-2000:]}")
        with open(linked, "ab") as library:
            library.write(hashlib.sha256(linked.read_bytes()).digest())
        os.replace(linked, path)
    return path


def _library() -> Path:
    """The library installed with the package if it is intact and matches, else the cache's (built there
    if missing or damaged). The package's own folder is not checked: whoever can write there can also
    change this module."""
    installed = Path(__file__).with_name(library_name())
    return installed if intact(installed) else build(own_folder(cache_dir()))


def enabled() -> bool:
    """Whether the kernels are built and registered with XLA for the CPU (built on the first call)."""
    with _lock:
        if "enabled" not in _state:
            _state["enabled"] = _register()
        return _state["enabled"]


def _register() -> bool:
    if os.environ.get("NCTL_NATIVE", "1") == "0":
        return False
    try:
        library = ctypes.cdll.LoadLibrary(str(_library()))
    except (OSError, RuntimeError) as error:
        warnings.warn(f"nctl: the CPU kernels could not be built or loaded, the engine runs its XLA code: {error}",
                      RuntimeWarning, stacklevel=3)
        return False
    for name, symbol in TARGETS.items():
        jax.ffi.register_ffi_target(name, jax.ffi.pycapsule(getattr(library, symbol)), platform="cpu")
    _state["library"] = library
    return True


def ggm_rows(blocks, pool_rows, read, write, entry, stale, contexts, u, x, size, rows, learn: bool):
    """Every live slot's rows of one layer (§6.11): ``q`` [S, N, W] of each lane's row, which is its
    block's, or its source where ``stale`` (pool entry ``entry`` >= 0, else the fresh row); when
    ``learn``, the blocks [B, W, K] with ``write``'s blocks (out of range: none) updated in place.
    -> (blocks, q). On the CPU only: callers pick it with ``nctl.core.platform.by_platform``."""
    q_type = jax.ShapeDtypeStruct(read.shape + (blocks.shape[-2],), jnp.float32)
    attributes = dict(learning_rate=np.float32(rows.learning_rate), prob_eps=np.float32(rows.prob_eps),
                      max_weight=np.float32(rows.max_weight),
                      init_value=np.float32(rows.init_value(blocks.shape[-1])))
    args = (blocks, pool_rows, read.astype(jnp.int32), write.astype(jnp.int32), entry.astype(jnp.int32),
            stale, contexts.astype(jnp.int32), u, jnp.asarray(x, jnp.float32), jnp.asarray(size, jnp.int32))
    if learn:
        call = jax.ffi.ffi_call("nctl_train_rows", (jax.ShapeDtypeStruct(blocks.shape, blocks.dtype), q_type),
                                input_output_aliases={0: 0}, vmap_method="expand_dims")
        return tuple(call(*args, **attributes))
    call = jax.ffi.ffi_call("nctl_predict_rows", q_type, vmap_method="expand_dims")
    return blocks, call(*args, **attributes)


def row_predictions(rows, u, prob_eps: float):
    """``clip(sigma(rows . u), eps, 1 - eps)`` of rows [..., K] on ``u``, one [K] for all rows or one
    per row (the shape of ``rows``) -> [...], summed as ``ggm_rows`` sums (members that share a state
    then predict the same, wherever their rows are read)."""
    call = jax.ffi.ffi_call("nctl_row_predictions", jax.ShapeDtypeStruct(rows.shape[:-1], jnp.float32),
                            vmap_method="expand_dims")
    return call(rows, u, rows_rank=np.int64(rows.ndim), u_rank=np.int64(u.ndim), prob_eps=np.float32(prob_eps))


def entry_predictions(pool_rows, contexts, u, prob_eps: float, source, offset: int, live):
    """``q`` [N, E] of the pool entries of each neuron ``n`` at its context ``contexts[n]`` (``pool_rows``
    [N, C, E, K]) on ``u`` [K] that a member of a ``live`` [S] slot starts from (``source`` [S, k,
    columns], the layer's columns ``offset .. offset + N - 1``), read where they are stored (no gathered
    copy) and summed as ``row_predictions`` sums; the other entries are not read (their q are 1/2)."""
    N, _, E, _ = pool_rows.shape
    call = jax.ffi.ffi_call("nctl_entry_predictions", jax.ShapeDtypeStruct((N, E), jnp.float32),
                            vmap_method="expand_dims")
    return call(pool_rows, contexts.astype(jnp.int32), u, source.astype(jnp.int32), live, offset=np.int64(offset),
                prob_eps=np.float32(prob_eps))


def member_values(entries, fresh, source, offset: int, lanes, member):
    """Every member's value [S, k + 1, N] in one layer's nodes (float32 or float64): its source's, a pool
    entry's of ``entries`` [N, E] where ``source`` [S, k, columns] (the layer's columns ``offset ..
    offset + N - 1``) is >= 0, else ``fresh``'s (member k: always), then ``lanes`` [S, N, W] at the
    lanes' members ``member`` [S, N, W] (-1: none)."""
    name = {jnp.dtype(jnp.float32): "nctl_member_values_f32", jnp.dtype(jnp.float64): "nctl_member_values_f64"}
    S, k, _ = source.shape
    N = entries.shape[0]
    call = jax.ffi.ffi_call(name[jnp.dtype(entries.dtype)], jax.ShapeDtypeStruct((S, k + 1, N), entries.dtype),
                            vmap_method="expand_dims")
    return call(entries, jnp.asarray(fresh, entries.dtype), source.astype(jnp.int32), lanes.astype(entries.dtype),
                member.astype(jnp.int32), offset=np.int64(offset))


def pool_predictions(pool_rows, blocks, neurons, contexts, entries, rows, scored, table, ids, offset: int,
                     bound: float, bias: float, init_value: float, prob_eps: float):
    """A pool decision's scores of ``neurons`` [B] on records ``ids`` ([B, R], or [R] for every neuron) at
    ``contexts`` [B, R], every row and record read in place (no gathered copy) and summed as
    ``row_predictions`` sums -> q [B, R, J + M]: ``q[b, r, j]`` of the pool entry ``entries[b, j]`` ([B, J])
    of ``pool_rows`` [N, C, E, K], ``q[b, r, J + m]`` of the row ``rows[m, b, r]`` ([M, B, R]: ``a x W +
    lane`` of ``blocks`` [A, W, K] if >= 0, the fresh row of ``init_value`` if -1, else pool entry ``-2 -
    code``). A record's inputs are ``(clip(table[id, offset : offset + K - 1], -bound, bound), bias)``
    (``table`` [T, D]). A neuron outside ``[0, N)``, or member ``m`` where ``scored[m, b]`` is false, is not
    computed: its ``q`` are 1/2."""
    out = jax.ShapeDtypeStruct(contexts.shape + (entries.shape[-1] + rows.shape[0],), jnp.float32)
    call = jax.ffi.ffi_call("nctl_pool_predictions", out, vmap_method="expand_dims")
    return call(pool_rows, blocks, jnp.asarray(neurons, jnp.int32), contexts.astype(jnp.int32),
                entries.astype(jnp.int32), rows.astype(jnp.int32), scored, table, ids.astype(jnp.int32),
                ids_rank=np.int64(ids.ndim), offset=np.int64(offset), bound=np.float32(bound), bias=np.float32(bias),
                init_value=np.float32(init_value), prob_eps=np.float32(prob_eps))


def largest_first(score, k: int):
    """The indices [..., k] of the ``k`` largest of each row of ``score`` [..., m] (float64, no NaN),
    largest first, equal scores in index order (``jax.lax.top_k``'s order)."""
    call = jax.ffi.ffi_call("nctl_largest_first", jax.ShapeDtypeStruct(score.shape[:-1] + (k,), jnp.int32),
                            vmap_method="broadcast_all")
    return call(score)


def assign_lanes(logprior, loglik, held, since, size, t):
    """Bounded mode's lanes (§5.3) of every node of the slots below ``size``: the ``W`` most probable
    members (by ``logprior + loglik`` [S, M, N], float64; a member of prior -inf is absent; equal weights
    in member order, ``lax.top_k``'s), a member that holds a lane of ``held`` [S, N, W] and stays keeping
    it and its ``since``, newcomers taking the lanes given up in rank order with ``since = t``; the other
    slots' lanes as they were. -> (lanes, since) [S, N, W]."""
    out = jax.ShapeDtypeStruct(held.shape, jnp.int32)
    call = jax.ffi.ffi_call("nctl_assign_lanes", (out, out), vmap_method="expand_dims")
    return tuple(call(logprior.astype(jnp.float64), loglik.astype(jnp.float64), held.astype(jnp.int32),
                      since.astype(jnp.int32), jnp.asarray(size, jnp.int32).reshape(1),
                      jnp.asarray(t, jnp.int32).reshape(1)))


def free_blocks(block_of, free, n_free, first, stop, layer: int, offset: int, neurons: int, clear: bool):
    """The blocks of slots ``first .. stop - 1`` of one layer (``block_of`` [S, columns, C], the layer's
    columns ``offset .. offset + neurons - 1``) pushed onto its free stack ``free`` [A] at ``n_free[layer]``
    (``n_free`` [L]), slot by slot, each neuron's contexts in order; a push past the stack's end is
    dropped and counted. Where ``clear``, then every column of slot ``first`` is set to -1. -> (block_of,
    free, n_free), updated in place."""
    call = jax.ffi.ffi_call("nctl_free_blocks", tuple(jax.ShapeDtypeStruct(a.shape, jnp.int32)
                                                      for a in (block_of, free, n_free)),
                            input_output_aliases={0: 0, 1: 1, 2: 2}, vmap_method="expand_dims")
    return tuple(call(block_of.astype(jnp.int32), free.astype(jnp.int32), n_free.astype(jnp.int32),
                      jnp.asarray(first, jnp.int32), jnp.asarray(stop, jnp.int32),
                      layer=np.int64(layer), offset=np.int64(offset), neurons=np.int64(neurons), clear=bool(clear)))


def store_rows(pool_rows, blocks, stamps, block_of, lanes, lane_since, source, slot, winner, entry, offset: int,
               init_value: float):
    """One layer's pool rows ``pool_rows`` [N, C, E, K] with, for each neuron ``n`` whose ``entry[n]`` is in
    ``[0, E)``, member ``winner[n]`` of ``slot`` stored there at every context (§6.3): its row in ``blocks``
    [A, W, K] where it holds a current one (``block_of`` [S, columns, C]; in bounded mode its lane in
    ``lanes`` [S, columns, W], current where ``stamps`` [A, W] >= ``lane_since``; exact mode passes None for
    the three), else the row it started from (``source`` [S, k, columns]: a pool entry, or the fresh row of
    ``init_value``). The layer's columns are ``offset .. offset + N - 1``. -> pool_rows, updated in place."""
    bounded = lanes is not None
    if not bounded:
        stamps, lanes, lane_since = (jnp.zeros((0,) * rank, jnp.int32) for rank in (2, 3, 3))
    call = jax.ffi.ffi_call("nctl_store_rows", jax.ShapeDtypeStruct(pool_rows.shape, jnp.float32),
                            input_output_aliases={0: 0}, vmap_method="expand_dims")
    ids = lambda a: jnp.asarray(a, jnp.int32)
    return call(pool_rows, blocks, ids(stamps), ids(block_of), ids(lanes), ids(lane_since), ids(source), ids(slot),
                ids(winner), ids(entry), offset=np.int64(offset), bounded=bounded, init_value=np.float32(init_value))
