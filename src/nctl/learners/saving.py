"""Reading save files: ``load``, the checks of a save's description, and the migrations that let saves
of older formats load.

A save (written by ``OnlineLearner.save``, format ``nctl.learners.base.SAVE_FORMAT``) is an npz archive:
``meta``, a JSON description (format, class, parameters, ``n_features``, ``t``, the shapes of the state
beyond what the parameters give), and the state's arrays as ``leaf_0``, ``leaf_1``, ... in the order of
``jax.tree.leaves`` (``nctl.native.state.leaves``). A learner loaded onto the native engine reads it
without JAX.
"""

import json
import os
import zipfile

import numpy as np

from nctl import engines
from nctl.core import engine, shape_only
from nctl.deferred import jax, jnp
from nctl.learners.gln import GLN
from nctl.learners.nctl_learner import NCTL
from nctl.learners.nctl_regressor import NCTLRegressor
from nctl.learners.regressor import GLNRegressor
from nctl.native.state import leaves, rebuilt
from nctl.pool import default_pool, with_pool

# the save formats load reads, per class
READABLE_FORMATS = {"GLN": (2, 3, 4, 5, 6, 7, 8), "NCTL": (3, 4, 5, 6, 7, 8), "GLNRegressor": (7, 8),
                    "NCTLRegressor": (7, 8)}

# what reading a damaged, truncated or foreign file raises
UNREADABLE_SAVE = (ValueError, KeyError, TypeError, AttributeError, EOFError, OSError, zipfile.BadZipFile)


def load(path):
    """Restore a learner written by ``save``; it continues exactly where it stopped. A file that is not
    a complete save of this version raises ValueError naming the file and the problem."""
    if not os.path.exists(path):
        raise FileNotFoundError(f"no saved learner at {path}")
    if not _starts_as_npz(path):
        raise ValueError(f"{path} is not an nctl save file: a save is an npz archive, and this file is not one")
    try:
        return _restore(path)
    except UNREADABLE_SAVE as error:
        problem = f"{type(error).__name__}: {error}" if isinstance(error, (KeyError, zipfile.BadZipFile)) else error
        raise ValueError(f"{path} is not a readable nctl save ({problem}); save the learner again, or delete "
                         "the file") from error


NPZ_MAGIC = b"PK\x03\x04"  # how an npz archive (a zip file) begins


def _starts_as_npz(path) -> bool:
    """Whether the file begins as an npz archive does (True when it cannot be read: ``_restore`` says why)."""
    try:
        with open(path, "rb") as file:
            return file.read(len(NPZ_MAGIC)) == NPZ_MAGIC
    except OSError:
        return True


def _restore(path):
    with np.load(path, allow_pickle=False) as data:
        meta = json.loads(str(data["meta"]))
        classes = {"GLN": GLN, "NCTL": NCTL, "GLNRegressor": GLNRegressor, "NCTLRegressor": NCTLRegressor}
        kind = meta.get("class") if isinstance(meta, dict) else None
        if kind not in classes:
            raise ValueError(f"unknown learner class {kind!r}; known: {', '.join(classes)}")
        if type(meta.get("format")) is not int or meta["format"] not in READABLE_FORMATS[kind]:
            raise ValueError(f"an {kind} saved in format {meta.get('format')!r}, but this version of nctl reads {kind} "
                             f"saves of format {' or '.join(map(str, READABLE_FORMATS[kind]))} (the NCTL engine "
                             "changed in format 3): train the learner again")
        _check_meta(meta, kind)
        params = {k: tuple(v) if isinstance(v, list) else v for k, v in meta["params"].items()}
        pool = default_pool(classes[kind])
        if pool is not None:  # before format 8 the pool's settings were flat parameters
            params = with_pool(params, pool)
        learner = classes[meta["class"]](**params)
        learner.choose_engine(meta["n_features"])  # before the template: its configuration is the engine's
        # shapes only: a large state (gigabytes for NCTL with many contexts) is never built twice
        template = learner.restore_template(meta["n_features"], meta["shapes"], shape_only)
        added = _added_leaves(template, kind, meta["format"])
        taken = np.asarray if learner.engine_ == engines.NATIVE else jnp.asarray  # JAX's: into XLA, one at a time
        arrays = []
        for i, want in enumerate(leaves(template)):  # one array at a time: memory peaks at state + largest array
            if i in added:  # filled in below
                arrays.append(np.zeros(want.shape, want.dtype))
                continue
            got = data[f"leaf_{i - sum(j < i for j in added)}"]
            if meta["format"] < 5 and got.ndim + 1 == len(want.shape) and got.size == want.size:
                # format 3 stored each block's lanes as one flat row; formats 3-4 one PTW weight per level
                got = got.reshape(want.shape)
            if want.shape != got.shape or want.dtype != got.dtype:
                raise ValueError(f"array {i} has shape {got.shape} {got.dtype}, expected {want.shape} {want.dtype}")
            arrays.append(taken(got))
            del got
    learner.adopt(rebuilt(template, arrays), handed_over=True)
    learner.n_features_, learner.t_ = meta["n_features"], meta["t"]
    if kind == "NCTL" and meta["format"] < 6:
        learner.adopt(engine.with_record_contexts(learner.state_), handed_over=True)
    return learner


def _check_meta(meta: dict, kind: str) -> None:
    """ValueError naming the first field of a save's description that has the wrong type or range (the
    parameters are checked by the learner's constructor, the arrays against the shapes they imply)."""
    def integer(low):
        return lambda value: type(value) is int and value >= low

    fields = [("params", lambda value: isinstance(value, dict), "an object of the learner's parameters"),
              ("n_features", integer(1), "an integer >= 1"),
              ("t", integer(0), "an integer >= 0"),
              ("shapes", lambda value: isinstance(value, dict), "an object")]
    shapes = meta.get("shapes")
    if kind in ("NCTL", "NCTLRegressor") and isinstance(shapes, dict):
        fields += [("shapes.max_depth", integer(0), "an integer >= 0"),
                   ("shapes.record_rows", integer(1), "an integer >= 1"),
                   ("shapes.arena_depth", lambda value: integer(0)(value) and value <= shapes.get("max_depth", 0),
                    "an integer in [0, shapes.max_depth]"),
                   ("shapes.fixed_blocks",  # absent before format 7
                    lambda value: value is None or (isinstance(value, list) and all(type(v) is bool for v in value)),
                    "a list of true/false")]
    for name, valid, wanted in fields:
        value = shapes.get(name.split(".")[1]) if name.startswith("shapes.") else meta.get(name)
        if not valid(value):
            raise ValueError(f"field {name} must be {wanted}, got {value!r}")


def _added_leaves(template, kind: str, fmt: int) -> set[int]:
    """Indices of the state's leaves that a save of format ``fmt`` does not hold: the records' contexts
    before format 6 (recomputed from the records by ``_restore``, on JAX)."""
    if kind != "NCTL" or fmt >= 6:
        return set()
    paths = [jax.tree_util.keystr(path) for path, _ in jax.tree_util.tree_leaves_with_path(template)]
    return {i for i, path in enumerate(paths) if path.endswith(".record_contexts")}
