"""Hand-written CPU kernels for the engine, registered with XLA's FFI (docs/algorithm.md §6.11).

``ggm_rows.cc`` trains a layer's GGM rows in place (one pass over each row where XLA's gather,
update and scatter make three), and predicts that layer's other rows (pool entries, the states a pool
decision compares) with the same dot product. It is compiled on first use with the system's C++ compiler
(``$CXX``, else ``c++``) against the headers jaxlib ships, and the library is kept in a cache directory
(``$NCTL_NATIVE_CACHE``, else ``~/.cache/nctl/native``) under a name that hashes the source, the
compiler command and jaxlib's version. Without a compiler, where the build fails, or with
``NCTL_NATIVE=0``, the engine runs its XLA code instead, on every platform it runs on; other
platforms than the CPU always do.
"""

import ctypes
import hashlib
import os
import platform
import shlex
import subprocess
import tempfile
import threading
import warnings
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

SOURCE = Path(__file__).with_name("ggm_rows.cc")
TARGETS = {"nctl_train_rows": "NctlTrainRows", "nctl_predict_rows": "NctlPredictRows",
           "nctl_row_predictions": "NctlRowPredictions", "nctl_pool_predictions": "NctlPoolPredictions"}
FLAGS = ["-std=c++17", "-O3", "-ffp-contract=off", "-fPIC", "-shared", "-w"]

_lock = threading.Lock()
_state: dict = {}


def cache_dir() -> Path:
    return Path(os.environ.get("NCTL_NATIVE_CACHE") or Path.home() / ".cache" / "nctl" / "native")


def _command(output: Path) -> list[str]:
    compiler = shlex.split(os.environ.get("CXX", "c++"))
    return [*compiler, *FLAGS, f"-I{jax.ffi.include_dir()}", str(SOURCE), "-o", str(output)]


def _library() -> Path:
    """The compiled kernels, built into the cache unless already there (atomic: temp file + rename)."""
    from jaxlib.version import __version__ as jaxlib_version

    key = hashlib.sha256(SOURCE.read_bytes())
    key.update(" ".join(_command(Path("out")) + [jaxlib_version, platform.machine()]).encode())
    path = cache_dir() / f"ggm_rows-{key.hexdigest()[:16]}.so"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temp = tempfile.mkstemp(suffix=".so", dir=path.parent)
        os.close(handle)
        try:
            run = subprocess.run(_command(Path(temp)), capture_output=True, text=True)
            if run.returncode:
                raise RuntimeError(f"{shlex.join(_command(path))} failed:\n{run.stderr[-2000:]}")
            os.replace(temp, path)
        finally:
            if os.path.exists(temp):
                os.unlink(temp)
    return path


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
        warnings.warn(f"nctl: the CPU kernels could not be built, the engine runs its XLA code: {error}",
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
    -> (blocks, q). On the CPU only: callers pick it with ``lax.platform_dependent``."""
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


def pool_predictions(pool_rows, neuron, contexts, entries, u, prob_eps: float):
    """``q[r, j]`` of the stored row ``pool_rows[neuron, contexts[r], entries[j]]`` on ``u[r]``: pool_rows
    [N, C, E, K], contexts [R], entries [J], u [R, K] -> [R, J], read in place (no gathered copy) and
    summed as ``row_predictions`` sums."""
    call = jax.ffi.ffi_call("nctl_pool_predictions", jax.ShapeDtypeStruct(contexts.shape + entries.shape, jnp.float32),
                            vmap_method="expand_dims")
    return call(pool_rows, jnp.asarray(neuron, jnp.int32), contexts.astype(jnp.int32), entries.astype(jnp.int32), u,
                prob_eps=np.float32(prob_eps))
