"""The plumbing GLN and NCTL share (``OnlineLearner``): input checks, the state created on the first
example, the rows ``learn_one`` keeps back, prediction outputs, copies, forks and ``save`` (read back by
``nctl.learners.saving``)."""

from __future__ import annotations

import dataclasses
import json
import warnings
from abc import ABC, abstractmethod
from contextlib import contextmanager
from functools import wraps

import numpy as np

from nctl import atomic, compilation, engines, interrupts, memory
from nctl.core import shape_only
from nctl.deferred import jax, jnp
from nctl.learners.inputs import SCALE_ROWS, check_features, unscaled
from nctl.learners.row_buffer import RowBuffer
from nctl.native.state import host_arrays, leaves
from nctl.pool import Pool

FORKED_LEARNS = "a learner inside fork() only predicts; learn after the with block"
SAVE_FORMAT = 8  # version of the save file layout (3: the v2 NCTL engine; 4: its blocks [A, W, width];
# 5: PTW weights per split probability [S, A, N]; 6: each record's contexts; 7: layers with fixed blocks;
# 8: the pool's settings as one object of the parameters)


def _first_call_noticed(method):
    """``method``, whose first call on a learner, the one that compiles its programs, gives a notice when it
    runs long (``compilation.notice_if_slow``); later calls run as they are."""
    @wraps(method)
    def run(self, *args):
        done = self.__dict__.get("_methods_run")  # (no set made per call: a native row feels it)
        if done is not None and method.__name__ in done:
            return method(self, *args)
        self.__dict__.setdefault("_methods_run", set()).add(method.__name__)
        with compilation.notice_if_slow(type(self).__name__):
            return method(self, *args)

    return run


class OnlineLearner(ABC):
    """Shared plumbing: input checks, lazy initialisation, the rows ``learn_one`` keeps back, copies, save.

    A learner is this, its front end mixed in before it (``Classifier`` or ``Regressor``: what its targets
    and outputs are) and its model's calls (the abstract methods below; ``EngineLearner`` for the NCTL
    engine's learners)."""

    n_classes: int
    seed: int
    _target_kind: str  # what each y is, in error messages (the front end's)
    _memory_remedy = "lower context_bits or layer_sizes, or give the process more memory"  # when a state does not fit

    def __post_init__(self) -> None:
        self.state_ = None  # the state of the rows learned so far (``flush``); None before the first
        self._waiting = RowBuffer()  # the rows learn_one keeps back (the JAX engine's)
        self.n_features_: int | None = None
        self.t_ = 0  # examples learned, pending ones included
        self._forked = False  # inside ``fork``: the learner reads, and learns nothing
        self._first_rows: list | None = []  # the first rows learned, up to SCALE_ROWS; None once judged
        self.engine_: str | None = None  # the engine that runs the state (nctl.engines), chosen with it

    # -- the front end's: the targets checked, the model's outputs as the learner gives them

    @abstractmethod
    def _checked_targets(self, y) -> np.ndarray:
        """``y`` [n] (or one target) checked, as the model learns them."""

    @abstractmethod
    def _outputs(self, raw: np.ndarray) -> np.ndarray:
        """The model's predictions [n, networks] as the learner gives them."""

    # -- the model's: its state and the calls that learn and predict on it

    @abstractmethod
    def _fresh_state(self, n_features: int, xp=np):
        """A fresh state for ``n_features`` inputs (pure; ``xp``: numpy, or ``nctl.core.shape_only`` for its
        shapes alone)."""

    @abstractmethod
    def _learn(self, X, y, stop) -> np.ndarray:
        """Learn the rows in order, all of them unless a Ctrl-C was noted in ``stop`` (``interrupts.held``),
        where it ends after a block of rows with the state whole; the predictions [done, networks] of the
        rows learned, each before it was learned."""

    @abstractmethod
    def _predict(self, X) -> np.ndarray:
        """The predictions [n, networks] of the rows ``X``; the state does not change."""

    @abstractmethod
    def restore_template(self, n_features: int, shapes: dict, xp=np):
        """The state a save with ``n_features`` inputs and ``shapes`` (``_shape_meta``) holds, made by ``xp``."""

    @_first_call_noticed
    def flush(self) -> None:
        """Learn the rows ``learn_one`` kept back, in one call: on the JAX engine it keeps up to
        ``PENDING_ROWS`` (``RowBuffer``) to learn them with the next prediction; ``state_`` then holds every
        row given so far. The native engine learns each row at once: nothing to do."""
        if self._waiting:
            self._waiting.learned_by(lambda X, y, stop: (len(self._learn(X, y, stop)), None), type(self).__name__)

    def _learn_then_predict(self, X, y, x, stop):
        """(rows of ``X, y`` learned, the prediction [networks] of ``x`` after them); a model that can do
        both in one call does (the JAX engine's NCTL)."""
        done = len(self._learn(X, y, stop))
        return done, self._predict(x[None])[0]

    def _init_state(self, n_features: int):
        """The first state, for ``n_features`` inputs; a model may also set what it keeps beside it."""
        return self._fresh_state(n_features)

    def state_bytes(self, n_features: int) -> int:
        """Bytes of the state this learner creates for ``n_features`` inputs, from its shapes alone
        (nothing is allocated)."""
        return bytes_of(self._fresh_state(n_features, xp=shape_only))

    def fork_bytes(self, n_features: int) -> int:
        """Bytes a ``fork`` holds beyond the state, at most: here a copy of the state."""
        return self.state_bytes(n_features)

    def allocate(self, n_features: int) -> None:
        """Create the state for ``n_features`` inputs unless there is one; MemoryError, with the learner
        unchanged, when it does not fit (checked first, and where its allocation fails)."""
        if self.state_ is None:
            self.choose_engine(n_features)
            if self.engine_ == engines.JAX:
                compilation.default_cache()  # on in the first learner of a process (nctl.compilation)
                memory.trim_compiled_programs()  # a process that creates many learners compiles many programs
            what, needed = f"{type(self).__name__} with {n_features} features", self._first_state_bytes(n_features)
            memory.check_fits(what, needed, self._memory_remedy)
            with memory.allocation(what, needed, self._memory_remedy):
                self.adopt(self._init_state(n_features), handed_over=True)
            self.n_features_ = n_features

    def choose_engine(self, n_features: int) -> str:
        """The engine of this learner's state, chosen once (``nctl.engines.choose``) for ``n_features``
        inputs: JAX where the native engine does not run this learner (``native_engine_for``)."""
        if self.engine_ is None:
            self.engine_ = engines.choose() if self.native_engine_for(n_features) else engines.JAX
        return self.engine_

    def native_engine_for(self, n_features: int) -> bool:
        """Whether the native engine runs this learner with ``n_features`` inputs (else JAX, whatever
        ``nctl.engines`` says)."""
        return True

    def adopt(self, state, handed_over: bool = False) -> None:
        """Make ``state`` (arrays of any kind, in the engines' one layout) this learner's state, held as its
        engine holds it: writable host arrays for the native engine, arrays committed to the default device
        for JAX (``committed``): the engine ``choose_engine`` chose. The arrays are copied, unless
        ``handed_over``: the caller holds them no longer (a fresh or a loaded state), and the learner takes
        them as they are where it can (the native engine then updates its numpy arrays in place; JAX's
        learning donates its arrays' buffers)."""
        if self.engine_ is None:
            raise RuntimeError(f"{type(self).__name__}.adopt: no engine chosen yet (choose_engine)")
        if self.engine_ == engines.NATIVE:
            self.state_ = host_arrays(state, copy=not handed_over)  # a JAX array whose allocation failed raises here
        else:
            self.state_ = committed(state if handed_over else jax.tree.map(jnp.copy, state))

    def learn_one(self, x, y) -> None:
        """Learn one example. The row is checked now; the native engine learns it now, and JAX at the latest
        when anything reads the learner: by the next ``predict_proba_one`` in the same compiled call (the
        river path's one call per example), else with the rows after it, ``PENDING_ROWS`` per call
        (``RowBuffer``)."""
        y = np.asarray(y)
        if y.ndim != 0:
            raise ValueError(f"y must be a single {self._target_kind}, got shape {y.shape}")
        if self._forked:
            raise RuntimeError(FORKED_LEARNS)
        x = check_features(x, self.n_features_)
        if x.ndim != 1:
            raise ValueError(f"x must be a 1-D feature vector, got shape {x.shape}")
        if self.state_ is None:  # the first example creates the state now (and checks that it fits)
            self.learn_many(x[None], y[None])
            return
        if self._first_rows is not None:  # (checked here: a call costs a native row a tenth of its time)
            self._watch_scale(x[None])
        target = self._checked_targets(y)
        if self.engine_ == engines.NATIVE:  # a native call costs microseconds: nothing is kept back
            with interrupts.held() as stop:
                self._learn(x[None], target[None], stop)
                self.t_ += 1
            if stop.asked:  # (the message is made only then: it costs a native row a tenth of a microsecond)
                raise interrupts.Interrupted(f"interrupted: {type(self).__name__} learned the row and is whole")
            return
        self.t_ += 1
        if self._waiting.add(x, target):
            self.flush()

    @_first_call_noticed
    def learn_many(self, X, y) -> np.ndarray:
        """Learn the rows of ``X`` [n, d] in order; returns each row's pre-update prediction (no rows:
        nothing changes)."""
        X, y = self._checked_batch(X, y)
        if not len(X):
            return self._outputs(np.zeros((0, self.n_classes)))
        self.flush()
        with interrupts.held() as stop:
            probs = self._learn(X, y, stop)
            self.t_ += len(probs)
        interrupts.raise_if_asked(stop, f"learn_many interrupted: {type(self).__name__} learned the first "
                                  f"{len(probs)} of the {len(X)} rows, and is whole, usable and savable")
        return self._outputs(probs)

    def _checked_batch(self, X, y):
        """Validated ``X`` [n, d] float32 and ``y`` [n] int32; creates the state on the first rows."""
        if self._forked:
            raise RuntimeError(FORKED_LEARNS)
        X = check_features(X, self.n_features_, "X")
        if X.ndim != 2:
            raise ValueError(f"X must be a 2-D array [n, features], got shape {X.shape}")
        y = self._checked_targets(y)
        if y.shape != (X.shape[0],):
            raise ValueError(f"y must have one {self._target_kind} per row of X ({X.shape[0]}), got shape {y.shape}")
        if len(X):
            self._watch_scale(X)
            self.allocate(X.shape[1])
        return X, y

    def _watch_scale(self, X: np.ndarray) -> None:
        """Keep the rows ``X`` [n, d] about to be learned until there are ``SCALE_ROWS``, then warn once if
        their features are plainly not standardised (``unscaled``; ``NCTL_QUIET=1`` silences it)."""
        if self._first_rows is None:
            return
        self._first_rows.extend(X[:SCALE_ROWS - len(self._first_rows)])
        if len(self._first_rows) == SCALE_ROWS:
            message, self._first_rows = unscaled(np.array(self._first_rows), type(self).__name__), None
            if message and not compilation.quiet():
                warnings.warn(message, UserWarning)

    def _first_state_bytes(self, n_features: int) -> int:
        """Bytes of the state the first example creates."""
        return self.state_bytes(n_features)

    def _predict_row(self, x):
        """The outputs (``_outputs``) for one row ``x`` (``_row_prediction``)."""
        return self._outputs(self._row_prediction(x)[None])[0]

    @_first_call_noticed
    def _row_prediction(self, x):
        """The prediction [networks] of the engine for one row ``x``, with the rows ``learn_one`` kept back
        learned first, in the same call."""
        x = check_features(x, self.n_features_)
        if x.ndim != 1:
            raise ValueError(f"x must be a 1-D feature vector, got shape {x.shape}")
        if self._waiting:
            return self._waiting.learned_by(lambda X, y, stop: self._learn_then_predict(X, y, x, stop),
                                            type(self).__name__)
        if self.state_ is None:
            self.allocate(x.shape[0])
        return self._predict(x[None])[0]

    @_first_call_noticed
    def _predict_rows(self, X) -> np.ndarray:
        """The outputs for the rows of ``X`` [n, d] (``_checked_rows``), without learning."""
        X = self._checked_rows(X)
        if not len(X):
            return self._outputs(np.zeros((0, self.n_classes)))
        return self._outputs(self._predict(X))

    def _checked_rows(self, X) -> np.ndarray:
        """Validated rows ``X`` [n, d] float32 to predict, with the rows ``learn_one`` kept back learned
        (``flush``); creates the state (unlearned) when there is none."""
        X = check_features(X, self.n_features_, "X")
        if X.ndim != 2:
            raise ValueError(f"X must be a 2-D array [n, features], got shape {X.shape}")
        self.flush()
        if len(X):
            self.allocate(X.shape[1])
        return X

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
        self.flush()
        twin = type(self)(**self.params())
        if self.state_ is not None:
            twin.engine_ = self.engine_
            twin.adopt(self.state_)
        twin.n_features_, twin.t_ = self.n_features_, self.t_
        twin._first_rows = None if self._first_rows is None else list(self._first_rows)
        self._copy_extra(twin)
        return twin

    def __copy__(self):
        """``copy.copy`` is ``copy()``: a copy that shared the state would lose it once either learner
        learned (learning donates the state's buffers, which deletes them for every holder)."""
        return self.copy()

    def __deepcopy__(self, memo):
        """``copy.deepcopy`` is ``copy()``, whose state stays committed to the device (``committed``)."""
        return self.copy()

    def _copy_extra(self, twin) -> None:
        pass

    def calls_for(self, layers, make):
        """The calls that learn and predict on ``layers`` (``make(layers)``: an object whose ``layers`` are
        the ones it holds), made again only when the learner's layers are other arrays than theirs."""
        calls = self.__dict__.get("_state_calls")
        if calls is None or calls.layers is not layers:
            calls = self._state_calls = make(layers)
        return calls

    def __getstate__(self) -> dict:
        """Pickling: without the calls bound to the state's arrays (made again when needed)."""
        return {name: value for name, value in self.__dict__.items() if name != "_state_calls"}

    def __setstate__(self, state: dict) -> None:
        """Unpickling: the native engine's state arrays become its own writable host arrays again (a
        pickle may give read-only ones, say memory-mapped)."""
        self.__dict__.update(state)
        if self.__dict__.get("engine_") == engines.NATIVE and self.state_ is not None:
            self.state_ = host_arrays(self.state_)

    def params(self) -> dict:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}

    def save(self, path) -> None:
        """Write the hyper-parameters (JSON) and the state arrays (npz) to ``path`` (a .npz file); an
        existing file there is replaced only once the new one is complete."""
        self.flush()
        if self.state_ is None:
            raise ValueError("nothing to save: the learner has not seen any example yet")
        arrays = leaves(self.state_ if self.engine_ == engines.NATIVE else jax.device_get(self.state_))
        meta = {"format": SAVE_FORMAT, "class": type(self).__name__, "params": _jsonable(self.params()),
                "n_features": self.n_features_, "t": self.t_, "shapes": self._shape_meta()}
        arrays = {f"leaf_{i}": np.asarray(a) for i, a in enumerate(arrays)}
        atomic.write_atomic(path, lambda f: np.savez(f, meta=np.array(json.dumps(meta)), **arrays))

    def _shape_meta(self) -> dict:
        """What a save needs beyond the parameters to rebuild the state's shapes (``restore_template``)."""
        return {}


def committed(state):
    """``state`` committed to the default device. Programs compiled ahead of need (engine §6.8) return
    committed arrays, and a jitted program compiles once per committed-ness of its inputs: a state that
    is committed from the start has one kind of array all its life, so nothing compiles twice. Waits
    for the state first, so that a failed allocation raises here (an array whose computation failed
    can hang, once moved, whatever reads it)."""
    return jax.device_put(jax.block_until_ready(state), jax.devices()[0])


def _jsonable(params: dict) -> dict:
    """The parameters as JSON holds them: tuples as lists, the pool as an object of its fields."""
    return {k: list(v) if isinstance(v, tuple) else dataclasses.asdict(v) if isinstance(v, Pool) else v
            for k, v in params.items()}


def bytes_of(state) -> int:
    """Bytes of the arrays of ``state`` (made with ``nctl.core.shape_only``: its shapes alone)."""
    return sum(leaf.size * leaf.dtype.itemsize for leaf in leaves(state))

