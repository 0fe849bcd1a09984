"""The object API: online learners with river-style methods over the pure functional core.

``GLN`` and ``NCTL`` learn from one example at a time (``learn_one``) or from a batch in stream order
(``learn_many``, which returns the prequential predictions and equals a loop of
``predict_proba_one`` + ``learn_one``). Features ``x`` are standardised side information; labels are
0/1, or class indices with ``n_classes > 2`` (one-vs-all networks). The constructor stores
hyper-parameters only; the state (``state_``) is created on the first example.

>>> import numpy as np, nctl
>>> rng = np.random.default_rng(0)
>>> X = rng.standard_normal((200, 5)).astype(np.float32)
>>> y = (X[:, 0] > 0).astype(int)
>>> model = nctl.GLN(layer_sizes=(8, 1), learning_rate=0.1)
>>> p = model.learn_many(X, y)
>>> bool(np.mean((p[100:] > 0.5) == y[100:]) > 0.8)
True
"""

from __future__ import annotations

import json
import os
import zipfile
from collections.abc import Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from functools import partial, wraps
from types import MappingProxyType

import jax
import jax.numpy as jnp
import numpy as np

from nctl import _atomic, _memory, compilation
from nctl.core import engine, gln, mixing, tree
from nctl.params import GLN_RULES, NCTL_RULES, check_fields
from nctl.core.pool import PoolConfig
from nctl.core.rows import GGMRows

# The paper's networks (docs/protocols.md): the experiments of nctl.experiments.configs and the presets
# NCTL.paper_split_mnist() etc. are built from them. The object API's own defaults are the Split MNIST one.
PAPER_NETWORKS = MappingProxyType({
    "split_mnist": MappingProxyType({"layer_sizes": (50, 25, 1), "context_bits": 4, "learning_rate": 1e-3}),
    "permuted_mnist": MappingProxyType({"layer_sizes": (10, 5, 1), "context_bits": 6, "learning_rate": 1e-3}),
    "electricity": MappingProxyType({"layer_sizes": (50, 25, 1), "context_bits": 4, "learning_rate": 0.1}),
})
# The paper's pool rule (FIFO) with the choices it leaves open at this project's values (docs/algorithm.md)
PAPER_POOL = MappingProxyType({"pool_size": 15, "eviction": "fifo", "min_segment": 32})
# Defaults for tabular streams, chosen by benchmarks/tabular_defaults.py (docs/guide-river.md,
# "Defaults"): the river and scikit-learn adapters start from them.
TABULAR = MappingProxyType({"learning_rate": 0.1, "layer_sizes": (16, 8, 1), "context_bits": 2, "pool_size": 7,
                            "min_segment": 64})
GLN_TABULAR = MappingProxyType({"learning_rate": 0.1})
# A grid of split probabilities, 2^-i and 1 - 2^-i for i = 1..6: ``split_prob=SPLIT_GRID`` mixes the PTWs of
# all of them (docs/algorithm.md §3.6) instead of fixing one.
SPLIT_GRID = tuple(sorted({2.0**-i for i in range(1, 7)} | {1 - 2.0**-i for i in range(1, 7)}))

FORKED_LEARNS = "a learner inside fork() only predicts; learn after the with block"
PENDING_ROWS = engine.LEARN_BLOCK  # learn_one keeps back at most this many rows (one compiled call's worth)
SAVE_FORMAT = 7  # version of the save file layout (3: the v2 NCTL engine; 4: its blocks [A, W, width];
# 5: PTW weights per split probability [S, A, N]; 6: each record's contexts; 7: layers with fixed blocks)
READABLE_FORMATS = {"GLN": (2, 3, 4, 5, 6, 7), "NCTL": (3, 4, 5, 6, 7)}


def _check_features(x, n_features: int | None, what: str = "x") -> np.ndarray:
    array = np.asarray(x)
    if array.dtype.kind not in "iuf":
        if array.dtype == object and array.size and isinstance(array.flat[0], Mapping):
            raise TypeError(f"{what} holds dicts, but the learners take arrays of numbers; for examples as dicts of "
                            "feature name -> number (river's kind), use nctl.river.NCTLClassifier or GLNClassifier")
        raise ValueError(f"{what} must hold real numbers, got dtype {array.dtype}")
    if array.ndim and array.shape[-1] == 0:
        raise ValueError(f"{what} has no features (shape {array.shape}); a learner needs at least one")
    if n_features is not None and array.shape[-1:] != (n_features,):
        raise ValueError(f"{what} must have {n_features} features, got shape {array.shape}")
    if array.dtype == np.float32:
        single = array.copy()  # a copy: rows kept back by learn_one do not change with x
    else:
        with np.errstate(over="ignore"):
            single = array.astype(np.float32)
    if not np.isfinite(single).all():  # one check on the usual path: finite in float32 means finite before
        if not np.isfinite(array).all():
            raise ValueError(f"{what} contains NaN or infinity")
        raise ValueError(f"{what} has values beyond float32's range (+-{np.finfo(np.float32).max:.3g}), "
                         "which would become infinity")
    return single


def _check_labels(y, n_classes: int) -> np.ndarray:
    array = np.asarray(y)
    if array.ndim == 0 and array.dtype.kind in "biu" and 0 <= array.item() < n_classes:  # one label, the usual kind
        return array.astype(np.int32)
    if array.dtype.kind not in "biuf":
        raise ValueError(f"labels must be integers, got dtype {array.dtype}")
    if array.dtype.kind == "f" and not np.isfinite(array).all():
        raise ValueError("labels contain NaN or infinity")
    valid = (array >= 0) & (array < n_classes)
    if array.dtype.kind == "f":
        valid &= array == np.round(array)
    if not valid.all():
        bad = array[~valid].ravel()[0]
        allowed = "0 or 1" if n_classes == 2 else f"a class index in 0..{n_classes - 1}"
        hint = f"; for more classes, set n_classes (e.g. n_classes={int(bad) + 1})" if bad > 0 and bad == int(bad) else ""
        raise ValueError(f"labels must be {allowed}, found {bad!r}{hint}")
    return array.astype(np.int32)


def _first_call_noticed(method):
    """``method``, whose first call on a learner, the one that compiles its programs, gives a notice when it
    runs long (``compilation.notice_if_slow``); later calls run as they are."""
    @wraps(method)
    def run(self, *args):
        done = self.__dict__.setdefault("_methods_run", set())
        if method.__name__ in done:
            return method(self, *args)
        done.add(method.__name__)
        with compilation.notice_if_slow(type(self).__name__):
            return method(self, *args)

    return run


class _OnlineLearner:
    """Shared plumbing: input checks, lazy initialisation, prediction outputs, copies, save/load."""

    n_classes: int
    seed: int
    _memory_remedy = "lower context_bits or layer_sizes, or give the process more memory"  # when a state does not fit

    def __post_init__(self) -> None:
        self._state = None
        self._pending: list = []  # (x [d] float32, y) given to learn_one and not run yet
        self.n_features_: int | None = None
        self.t_ = 0  # examples learned, pending ones included
        self._forked = False  # inside ``fork``: the learner reads, and learns nothing

    # -- subclass hooks: _fresh_state(n_features) (pure), _learn(X, y) -> probs [n, classes],
    # _predict(X) -> [n, classes]; _init_state may also set host-side bookkeeping; _learn_then_predict
    # (X, y, x) -> the prediction [classes] of x after learning the rows, when one call can do both

    @property
    def state_(self):
        """The state (None before the first example), with every example given so far learned."""
        self._run_pending()
        return self._state

    @state_.setter
    def state_(self, state) -> None:
        self._state = state

    @_first_call_noticed
    def _run_pending(self) -> None:
        """Learn the rows ``learn_one`` kept back (it keeps up to ``PENDING_ROWS`` and runs them in one
        call, or together with the next prediction: ``predict_proba_one``; docs/algorithm.md §6.9)."""
        if self._pending:
            X, y = self._pending_batch()
            self._learn(X, y)

    def _pending_batch(self):
        X, y = np.array([x for x, _ in self._pending]), np.array([label for _, label in self._pending], np.int32)
        self._pending = []
        return X, y

    def _learn_then_predict(self, X, y, x):
        self._learn(X, y)
        return self._predict(x[None])[0]

    def _init_state(self, n_features: int):
        return self._fresh_state(n_features)

    def state_bytes(self, n_features: int) -> int:
        """Bytes of the state this learner creates for ``n_features`` inputs, from its shapes alone
        (nothing is allocated)."""
        return _bytes_of(partial(self._fresh_state, n_features))

    def _ensure_state(self, n_features: int) -> None:
        """Create the state for ``n_features`` inputs unless there is one; MemoryError, with the learner
        unchanged, when it does not fit (checked first, and where its allocation fails)."""
        if self._state is None:
            compilation.default_cache()  # on in the first learner of a process (nctl.compilation)
            what, needed = f"{type(self).__name__} with {n_features} features", self._first_state_bytes(n_features)
            _memory.check_fits(what, needed, self._memory_remedy)
            _memory.trim_compiled_programs()  # a process that creates many learners compiles many programs
            with _memory.allocation(what, needed, self._memory_remedy):
                state = _committed(self._init_state(n_features))
            self.n_features_, self.state_ = n_features, state

    def _outputs(self, probs: np.ndarray) -> np.ndarray:
        """Binary: P(y = 1) [n]; one-vs-all: the class outputs normalised to sum to one [n, K]."""
        probs = np.asarray(probs, np.float64)
        if self.n_classes == 2:
            return probs[:, 0]
        return probs / probs.sum(axis=1, keepdims=True)

    def learn_one(self, x, y) -> None:
        """Learn one example. The row is checked now and learned at the latest when anything reads the
        learner: by the next ``predict_proba_one`` in the same compiled call (the river path's one call
        per example), else with the rows after it, ``PENDING_ROWS`` per call."""
        y = np.asarray(y)
        if y.ndim != 0:
            raise ValueError(f"y must be a single label, got shape {y.shape}")
        if self._forked:
            raise RuntimeError(FORKED_LEARNS)
        x = _check_features(x, self.n_features_)
        if x.ndim != 1:
            raise ValueError(f"x must be a 1-D feature vector, got shape {x.shape}")
        if self._state is None:  # the first example creates the state now (and checks that it fits)
            self.learn_many(x[None], y[None])
            return
        self._pending.append((x, _check_labels(y, self.n_classes)))
        self.t_ += 1
        if len(self._pending) >= PENDING_ROWS:
            self._run_pending()

    @_first_call_noticed
    def learn_many(self, X, y) -> np.ndarray:
        """Learn the rows of ``X`` [n, d] in order; returns each row's pre-update prediction (no rows:
        nothing changes)."""
        X, y = self._checked_batch(X, y)
        if not len(X):
            return self._outputs(np.zeros((0, self.n_classes)))
        self._run_pending()
        probs = self._learn(X, y)
        self.t_ += len(X)
        return self._outputs(probs)

    def _checked_batch(self, X, y):
        """Validated ``X`` [n, d] float32 and ``y`` [n] int32; creates the state on the first rows."""
        if self._forked:
            raise RuntimeError(FORKED_LEARNS)
        X = _check_features(X, self.n_features_, "X")
        if X.ndim != 2:
            raise ValueError(f"X must be a 2-D array [n, features], got shape {X.shape}")
        y = _check_labels(y, self.n_classes)
        if y.shape != (X.shape[0],):
            raise ValueError(f"y must have one label per row of X ({X.shape[0]}), got shape {y.shape}")
        if len(X):
            self._ensure_state(X.shape[1])
        return X, y

    def _first_state_bytes(self, n_features: int) -> int:
        """Bytes of the state the first example creates."""
        return self.state_bytes(n_features)

    @_first_call_noticed
    def predict_proba_one(self, x):
        """P(y = 1 | x) (binary) or the class probabilities [K]; the learner does not change."""
        x = _check_features(x, self.n_features_)
        if x.ndim != 1:
            raise ValueError(f"x must be a 1-D feature vector, got shape {x.shape}")
        if self._pending:
            out = self._outputs(self._learn_then_predict(*self._pending_batch(), x)[None])[0]
        else:
            out = self.predict_proba_many(x[None])[0]
        return float(out) if self.n_classes == 2 else out

    @_first_call_noticed
    def predict_proba_many(self, X) -> np.ndarray:
        """Predictions for the rows of ``X`` [n, d], each as ``predict_proba_one`` would give it (P(y = 1)
        [n], or class probabilities [n, K]); the learner does not change."""
        X = _check_features(X, self.n_features_, "X")
        if X.ndim != 2:
            raise ValueError(f"X must be a 2-D array [n, features], got shape {X.shape}")
        if not len(X):
            return self._outputs(np.zeros((0, self.n_classes)))
        self._ensure_state(X.shape[1])
        return self._outputs(self._predict(X))

    def predict_one(self, x) -> int:
        """The most probable label of ``x``: 0/1, or a class index; the learner does not change."""
        p = self.predict_proba_one(x)
        return int(p > 0.5) if self.n_classes == 2 else int(np.argmax(p))

    @contextmanager
    def fork(self, X, y):
        """This learner as if it had also learned the rows ``X, y``, to read inside the ``with`` block:
        ``with learner.fork(X, y) as adapted: adapted.predict_proba_many(T)``. The learner itself is
        unchanged afterwards. Here the fork is a copy that learns the rows; NCTL forks without copying
        its arenas where it can (docs/algorithm.md §6.7)."""
        twin = self.copy()
        twin.learn_many(X, y)
        yield twin

    def copy(self):
        """An independent snapshot: learning on it never changes this learner."""
        twin = type(self)(**self.params())
        twin.state_ = None if self.state_ is None else _committed(jax.tree.map(jnp.copy, self.state_))
        twin.n_features_, twin.t_ = self.n_features_, self.t_
        self._copy_extra(twin)
        return twin

    def __copy__(self):
        """``copy.copy`` is ``copy()``: a copy that shared the state would lose it once either learner
        learned (learning donates the state's buffers, which deletes them for every holder)."""
        return self.copy()

    def __deepcopy__(self, memo):
        """``copy.deepcopy`` is ``copy()``, whose state stays committed to the device (``_committed``)."""
        return self.copy()

    def _copy_extra(self, twin) -> None:
        pass

    def params(self) -> dict:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}

    def save(self, path) -> None:
        """Write the hyper-parameters (JSON) and the state arrays (npz) to ``path`` (a .npz file); an
        existing file there is replaced only once the new one is complete."""
        if self.state_ is None:
            raise ValueError("nothing to save: the learner has not seen any example yet")
        leaves = jax.tree.leaves(jax.device_get(self.state_))
        meta = {"format": SAVE_FORMAT, "class": type(self).__name__, "params": _jsonable(self.params()),
                "n_features": self.n_features_, "t": self.t_, "shapes": self._shape_meta()}
        arrays = {f"leaf_{i}": np.asarray(a) for i, a in enumerate(leaves)}
        _atomic.write_atomic(path, lambda f: np.savez(f, meta=np.array(json.dumps(meta)), **arrays))

    def _shape_meta(self) -> dict:
        return {}


def _committed(state):
    """``state`` committed to the default device. Programs compiled ahead of need (engine §6.8) return
    committed arrays, and a jitted program compiles once per committed-ness of its inputs: a state that
    is committed from the start has one kind of array all its life, so nothing compiles twice. Waits
    for the state first, so that a failed allocation raises here (an array whose computation failed
    can hang, once moved, whatever reads it)."""
    return jax.device_put(jax.block_until_ready(state), jax.devices()[0])


def _jsonable(params: dict) -> dict:
    return {k: list(v) if isinstance(v, tuple) else v for k, v in params.items()}


# what reading a damaged, truncated or foreign file raises
UNREADABLE_SAVE = (ValueError, KeyError, TypeError, AttributeError, EOFError, OSError, zipfile.BadZipFile)


def _bytes_of(make_state) -> int:
    """Bytes of the state ``make_state()`` would create, from its shapes alone."""
    return sum(leaf.size * leaf.dtype.itemsize for leaf in jax.tree.leaves(jax.eval_shape(make_state)))


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
        classes = {"GLN": GLN, "NCTL": NCTL}
        kind = meta.get("class") if isinstance(meta, dict) else None
        if kind not in classes:
            raise ValueError(f"unknown learner class {kind!r}; known: {', '.join(classes)}")
        if type(meta.get("format")) is not int or meta["format"] not in READABLE_FORMATS[kind]:
            raise ValueError(f"an {kind} saved in format {meta.get('format')!r}, but this version of nctl reads {kind} "
                             f"saves of format {' or '.join(map(str, READABLE_FORMATS[kind]))} (the NCTL engine "
                             "changed in format 3): train the learner again")
        _check_meta(meta, kind)
        params = {k: tuple(v) if isinstance(v, list) else v for k, v in meta["params"].items()}
        learner = classes[meta["class"]](**params)
        # shapes only: a large state (gigabytes for NCTL with many contexts) is never built twice
        template = jax.eval_shape(lambda: learner._restore_template(meta["n_features"], meta["shapes"]))
        wanted, treedef = jax.tree.flatten(template)
        added = _added_leaves(template, kind, meta["format"])
        leaves = []
        for i, want in enumerate(wanted):  # one array at a time: memory peaks at state + largest array
            if i in added:  # filled in by the learner below
                leaves.append(jnp.zeros(want.shape, want.dtype))
                continue
            got = data[f"leaf_{i - sum(j < i for j in added)}"]
            if meta["format"] < 5 and got.ndim + 1 == len(want.shape) and got.size == want.size:
                # format 3 stored each block's lanes as one flat row; formats 3-4 one PTW weight per level
                got = got.reshape(want.shape)
            if want.shape != got.shape or want.dtype != got.dtype:
                raise ValueError(f"array {i} has shape {got.shape} {got.dtype}, expected {want.shape} {want.dtype}")
            leaves.append(jnp.asarray(got))
            del got
    learner.state_ = _committed(jax.tree.unflatten(treedef, leaves))
    learner.n_features_, learner.t_ = meta["n_features"], meta["t"]
    learner._after_restore(meta["shapes"], meta["format"])
    return learner


# ----------------------------------------------------------------------------- GLN

GLN_CHUNK = 256  # rows per compiled call; learn_one runs the same compiled loop with one row


@partial(jax.jit, static_argnums=(5,), donate_argnums=(0,))
def _gln_chunk(layers, Z, Y, n, positive, cfg):
    return gln.run_chunk(layers, Z, Y, n, positive, cfg)


_gln_predict = jax.jit(gln.predict_many, static_argnums=(2,))


@partial(jax.jit, static_argnums=(1, 2, 3, 4))
def _gln_init(gates, n_features, layer_sizes, context_bits, weight_init):
    """One compiled program per configuration (run op by op, a state's creation compiles dozens)."""
    return jax.vmap(lambda g: gln.init(g, n_features, layer_sizes, context_bits, weight_init))(gates)


def _positive_labels(n_classes: int) -> jnp.ndarray:
    return jnp.arange(n_classes, dtype=jnp.int32) if n_classes > 2 else jnp.array([1], jnp.int32)


def _padded_chunks(X, y, size):
    """Rows in pieces of at most ``size``, each padded to ``size`` rows for one compiled shape."""
    for a in range(0, X.shape[0], size):
        n = min(size, X.shape[0] - a)
        Z = np.zeros((size, X.shape[1]), np.float32)
        Y = np.zeros(size, np.int32)
        Z[:n], Y[:n] = X[a:a + n], y[a:a + n]
        yield n, Z, Y


@dataclass(eq=False)
class GLN(_OnlineLearner):
    """A Gated Linear Network (docs/algorithm.md §2): GGM neurons with half-space gating, each trained
    online on its own log loss.

    Args:
        layer_sizes: neurons per layer, ending with the single output neuron.
        context_bits: hyperplanes per neuron (``s``); each neuron has ``2^s`` contexts, a weight row each.
        learning_rate: the step size of every neuron's online gradient step on its log loss.
        n_classes: 2 for 0/1 labels; ``K > 2`` trains one network per class (one-vs-all).
        weight_init: initial weights: ``"zeros"`` (every neuron predicts 1/2) or ``"uniform"`` (1/fan-in).
        prob_eps: probabilities are clipped to ``[eps, 1 - eps]``.
        max_weight: weights are kept in ``[-max_weight, max_weight]``.
        seed: draws the gating hyperplanes (the same as NCTL's with the same seed and layers).
    """

    layer_sizes: tuple = (50, 25, 1)
    context_bits: int = 4
    learning_rate: float = 1e-3
    n_classes: int = 2
    weight_init: str = "zeros"
    prob_eps: float = mixing.PROB_EPS
    max_weight: float = mixing.MAX_WEIGHT
    seed: int = 0

    @classmethod
    def tabular(cls, **overrides) -> "GLN":
        """The defaults of the river and scikit-learn adapters (``GLN_TABULAR``), measured on tabular
        streams (docs/guide-river.md, "Defaults")."""
        return cls(**{**GLN_TABULAR, **overrides})

    def __post_init__(self) -> None:
        check_fields(self, GLN_RULES)
        self.layer_sizes = gln.check_layer_sizes(self.layer_sizes)
        gln.init_weight_value(self.weight_init, 1)
        super().__post_init__()

    @property
    def ggm_config(self) -> mixing.GGMConfig:
        return mixing.GGMConfig(float(self.learning_rate), float(self.prob_eps), float(self.max_weight))

    def _fresh_state(self, n_features: int):
        gates = gln.network_gates(jax.random.PRNGKey(self.seed), _positive_labels(self.n_classes).shape[0],
                                  n_features, self.layer_sizes, self.context_bits)
        return _gln_init(gates, n_features, self.layer_sizes, self.context_bits, self.weight_init)

    def _learn(self, X, y):
        positive, cfg = _positive_labels(self.n_classes), self.ggm_config
        out = []
        for n, Z, Y in _padded_chunks(X, y, GLN_CHUNK):
            self.state_, p = _gln_chunk(self.state_, Z, Y, n, positive, cfg)
            out.append(np.asarray(p[:n]))
        return np.concatenate(out)

    def _predict(self, X):
        return np.asarray(_gln_predict(self.state_, jnp.asarray(X), self.ggm_config))

    def _restore_template(self, n_features: int, shapes: dict):
        return self._fresh_state(n_features)

    def _after_restore(self, shapes: dict, fmt: int) -> None:
        pass


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
    if kind == "NCTL" and isinstance(shapes, dict):
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
    before format 6 (recomputed from the records by ``NCTL._after_restore``)."""
    if kind != "NCTL" or fmt >= 6:
        return set()
    paths = [jax.tree_util.keystr(path) for path, _ in jax.tree_util.tree_leaves_with_path(template)]
    return {i for i, path in enumerate(paths) if path.endswith(".record_contexts")}


# ----------------------------------------------------------------------------- NCTL

DEFAULT_MAX_DEPTH = 20  # depth=None: room for 2^20 steps; a longer stream enlarges the engine once


@dataclass(eq=False)
class NCTL(_OnlineLearner):
    """Neural Combinatorial Transfer Learning (docs/algorithm.md §5): a GLN whose every neuron is a
    Forget-Me-Not process over its GGM, mixing remembered solutions over segmentations of time.

    ``depth=None`` grows the tree with the stream (anytime); a known stream length ``n`` is best
    served by ``depth = ceil(log2 n)``. ``split_prob = 0`` puts all prior mass on one segment, which
    makes NCTL a GLN; a sequence of split probabilities (e.g. ``SPLIT_GRID``) predicts with the
    Bayesian mixture over them (§3.6). ``trained_members = B`` trains only the ``B`` most probable members of every
    node (bounded mode, §5.3; ``None``: exact NCTL).

    The defaults are the paper's Split MNIST network (50-25-1, 16 contexts, learning rate 0.001) with
    the paper's FIFO pool; ``NCTL.tabular()`` gives the settings measured for tabular streams (the
    river and scikit-learn adapters' defaults) and ``NCTL.paper_*()`` the paper's other experiments.

    Args:
        layer_sizes: neurons per layer, ending with the single output neuron.
        context_bits: hyperplanes per neuron (``s``); each neuron has ``2^s`` contexts, a weight row each.
        learning_rate: the step size of every neuron's online gradient step on its log loss.
        pool_size: stored states per neuron (``k``); the mixture has ``k + 1`` members with the fresh one.
        depth: tree depth for a stream of ``2^depth`` steps; ``None`` grows with the stream.
        min_segment: ``L_min``, a power of two: segments shorter than this never change the pool.
        reservoir_size: examples kept per segment to score candidates at a pool update.
        refine_threshold: ``alpha``: the winner replaces its parent entry when it beats it by more.
        skip_threshold: ``beta``: the winner is not stored when the pool explains the segment better by more.
        joint_evidence: score the pool's evidence jointly over the segment instead of per example.
        eviction: what leaves a full pool: ``"fifo"`` (the paper's) or ``"spacing"``.
        split_prob: the prior probability of a segment boundary at each tree node, or a sequence of them
            to mix over (``SPLIT_GRID``); 0 makes NCTL a GLN.
        n_classes: 2 for 0/1 labels; ``K > 2`` trains one network per class (one-vs-all).
        weight_init: initial weights: ``"zeros"`` (every neuron predicts 1/2) or ``"uniform"`` (1/fan-in).
        prob_eps: probabilities are clipped to ``[eps, 1 - eps]``.
        max_weight: weights are kept in ``[-max_weight, max_weight]``.
        seed: draws the gating hyperplanes.
        trained_members: bounded mode: train only the ``B`` most probable members of every node; ``None``
            trains all (exact NCTL).
    """

    layer_sizes: tuple = (50, 25, 1)
    context_bits: int = 4
    learning_rate: float = 1e-3
    pool_size: int = 15
    depth: int | None = None
    min_segment: int = 32
    reservoir_size: int = 100
    refine_threshold: float = 0.0
    skip_threshold: float = 0.0
    joint_evidence: bool = False
    eviction: str = "fifo"
    split_prob: float | tuple = 0.5
    n_classes: int = 2
    weight_init: str = "zeros"
    prob_eps: float = mixing.PROB_EPS
    max_weight: float = mixing.MAX_WEIGHT
    seed: int = 0
    trained_members: int | None = None
    _memory_remedy = "lower context_bits, layer_sizes or pool_size, or give the process more memory"

    def __post_init__(self) -> None:
        check_fields(self, NCTL_RULES)
        self.layer_sizes = gln.check_layer_sizes(self.layer_sizes)
        gln.init_weight_value(self.weight_init, 1)
        self._pool_config()
        tree.split_grid(self.split_prob)
        super().__post_init__()

    # -- presets

    @classmethod
    def paper_split_mnist(cls, **overrides) -> "NCTL":
        """The paper's Split MNIST learner (docs/protocols.md §1): 50-25-1, 16 contexts, learning rate
        0.001; the pool rules the paper states (FIFO) with its silent choices at their defaults (k = 15,
        L_min = 32, docs/algorithm.md); ``overrides`` change any parameter."""
        return cls(**{**PAPER_NETWORKS["split_mnist"], **PAPER_POOL, **overrides})

    @classmethod
    def paper_permuted_mnist(cls, **overrides) -> "NCTL":
        """The paper's Permuted MNIST learner (docs/protocols.md §2): ten one-vs-all 10-5-1 networks,
        64 contexts, learning rate 0.001, the same pool as ``paper_split_mnist``."""
        return cls(**{**PAPER_NETWORKS["permuted_mnist"], **PAPER_POOL, "n_classes": 10, **overrides})

    @classmethod
    def paper_electricity(cls, **overrides) -> "NCTL":
        """The paper's Electricity learner (docs/protocols.md §4): 50-25-1, 16 contexts, learning rate 0.1."""
        return cls(**{**PAPER_NETWORKS["electricity"], **overrides})

    @classmethod
    def tabular(cls, **overrides) -> "NCTL":
        """The defaults of the river and scikit-learn adapters (``TABULAR``), measured on tabular
        streams against river's learners (docs/guide-river.md, "Defaults")."""
        return cls(**{**TABULAR, **overrides})

    def _pool_config(self) -> PoolConfig:
        return PoolConfig(int(self.pool_size), int(self.min_segment), int(self.reservoir_size),
                          float(self.refine_threshold), float(self.skip_threshold), bool(self.joint_evidence),
                          self.eviction, self.trained_members).validate()

    def engine_config(self, n_features: int, max_depth: int | None = None, record_rows: int | None = None,
                      arena_depth: int | None = None, full: bool = False,
                      fixed_blocks: tuple | None = None) -> engine.EngineConfig:
        """The engine of this learner for ``n_features`` inputs (sizes: docs/algorithm.md §6): room for
        a tree of ``depth`` (``DEFAULT_MAX_DEPTH`` when growing); a growing tree's block arenas start
        small and grow with it (``engine.lean_arena_depth``) unless ``full``; the layers with fixed
        blocks are ``fixed_blocks``, by default the engine's choice (``engine.configure``)."""
        rows = GGMRows(float(self.learning_rate), float(self.prob_eps), float(self.max_weight), self.weight_init)
        if max_depth is None:
            max_depth = DEFAULT_MAX_DEPTH if self.depth is None else self.depth
        cfg = engine.configure(n_features, self.layer_sizes, int(self.context_bits), rows, self._pool_config(),
                               tree.split_grid(self.split_prob), self.n_classes, max_depth, record_rows, arena_depth,
                               fixed_blocks)
        if self.depth is None and arena_depth is None and not full:
            cfg = engine.configured(cfg, arena_depth=engine.lean_arena_depth(cfg, 0))
        return cfg

    @property
    def cfg_(self) -> engine.EngineConfig:
        """The engine configuration of ``state_`` (it changes when the state grows)."""
        self._run_pending()
        return self._cfg

    @cfg_.setter
    def cfg_(self, cfg: engine.EngineConfig) -> None:
        self._cfg = cfg

    def _first_state_bytes(self, n_features: int) -> int:
        return self.state_bytes(n_features, n_steps=0)  # a growing tree's arenas grow later

    def state_bytes(self, n_features: int, n_steps: int | None = None) -> int:
        """Bytes of the largest state this learner reaches for ``n_features`` inputs on a stream of
        ``n_steps`` steps (default ``2^depth``, or ``2^DEFAULT_MAX_DEPTH`` when growing), from shapes
        alone (nothing is allocated): an upper bound to plan with."""
        cfg = self.engine_config(n_features, full=True)
        if n_steps is not None and self.depth is None:  # the arenas a growing tree has after n_steps
            cfg = self.engine_config(n_features, arena_depth=engine.lean_arena_depth(cfg, n_steps))
        return _bytes_of(partial(self._fresh_state, n_features, cfg))

    def _fresh_state(self, n_features: int, cfg: engine.EngineConfig | None = None):
        cfg = cfg or self.engine_config(n_features)
        return engine.init(cfg, jax.random.PRNGKey(self.seed), self.depth or 0)

    def _init_state(self, n_features: int):
        self.cfg_ = self.engine_config(n_features)
        return self._fresh_state(n_features, self.cfg_)

    def _copy_extra(self, twin) -> None:
        if self.state_ is not None:
            twin.cfg_ = self.cfg_

    # -- learning and predicting

    def _learn(self, X, y):
        return self._run(X, y, None)[0]

    def learn_observed(self, X, y, observe):
        """``learn_many`` that also returns ``observe(state, cfg)`` after every step (stacked), taken once
        the step is learned and before the next boundary is processed; ``observe`` is a module-level pure
        function of the engine state and configuration (``nctl.core.engine``), e.g.
        ``nctl.inspect.boundaries.segment_posterior``."""
        X, y = self._checked_batch(X, y)
        probs, observations = self._run(X, y, observe)
        self.t_ += len(X)
        return self._outputs(probs), observations

    def _run(self, X, y, observe):
        self.state_, self.cfg_, probs, observations = engine.learn(self.state_, self.cfg_, X, y, observe)
        return probs, observations

    def _learn_then_predict(self, X, y, x):
        self.state_, self.cfg_, _, p = engine.learn_then_predict(self.state_, self.cfg_, X, y, x)
        return p

    @contextmanager
    def fork(self, X, y):
        """``_OnlineLearner.fork``: the rows are learned by this learner itself, and what they overwrite
        is kept in a journal and put back on leaving the block (docs/algorithm.md §6.7), so a fork costs
        what its rows touch, not a copy of the learner; where a journal cannot serve (the rows would
        enlarge the learner), the fork is a copy."""
        X, y = self._checked_batch(X, y)
        self._run_pending()
        kept = engine.journal(self._state, self._cfg, X) if len(X) else None
        if kept is None:
            with super().fork(X, y) as twin:
                yield twin
            return
        t, cfg = self.t_, self._cfg
        try:
            self._learn(X, y)
            self._forked, self.t_ = True, t + len(X)
            yield self
        finally:
            self._forked = False
            self._state, self._cfg, self.t_ = engine.undo(self._state, kept), cfg, t

    def _predict(self, X):
        return engine.predict(self.state_, self.cfg_, X)

    # -- looking inside

    def hyperplanes(self, n_features: int) -> tuple:
        """The gating hyperplanes ``(normals [N, s, d], offsets [N, s])`` of every class network (one
        when binary) and layer, as the learner draws them for ``n_features`` inputs."""
        gates = engine.gates(self.engine_config(n_features), jax.random.PRNGKey(self.seed))
        return tuple(tuple((np.asarray(g.normals[net]), np.asarray(g.offsets[net])) for g in gates)
                     for net in range(gates[0].normals.shape[0]))

    def pool_events(self) -> tuple:
        """Per class network, per layer: ``[N_i, 4]`` counts of refine, skip, add and evict (§4.5)."""
        if self.state_ is None:
            raise ValueError("the learner has not seen any example yet")
        events = np.asarray(self.state_.nets.events)
        return tuple(tuple(net[s.offset:s.offset + s.neurons] for s in self.cfg_.layers) for net in events)

    # -- save / load

    def _shape_meta(self) -> dict:
        return {"max_depth": self.cfg_.max_depth, "record_rows": self.cfg_.record_rows,
                "arena_depth": self.cfg_.arena_depth, "fixed_blocks": [s.fixed for s in self.cfg_.layers]}

    def _restore_template(self, n_features: int, shapes: dict):
        fixed = shapes.get("fixed_blocks", [False] * len(self.layer_sizes))  # saves before format 7: free stacks
        self.cfg_ = self.engine_config(n_features, shapes["max_depth"], shapes["record_rows"], shapes["arena_depth"],
                                       fixed_blocks=tuple(fixed))
        return self._fresh_state(n_features, self.cfg_)

    def _after_restore(self, shapes: dict, fmt: int) -> None:
        if fmt < 6:
            self.state_ = engine.with_record_contexts(self.state_)
