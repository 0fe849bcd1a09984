"""The NCTL engine: a network of FMN processes over any row model (docs/algorithm.md §3-§6).

One engine serves NCTL (GGM rows, ``nctl.learners.NCTL``), NCTL for regression (Gaussian rows,
``nctl.learners.NCTLRegressor``) and the binary sequence predictors (KT counts, ``nctl.sequence``). A
prediction is a probability per class network, or what the row model predicts
(``rows.prediction_shape``: a Gaussian's mean and precision). What this package exports is the whole
contract:

* ``configure(...)`` and ``init(cfg, seed)``: a fresh state, prepared for step 1, as numpy arrays (the JAX
  engine's callers put it on their device, ``jax.device_put``);
* ``learn(state, cfg, X, Y, observe=None)``: learn the rows in order; returns the (possibly enlarged)
  state and configuration, the pre-update predictions and, per step, ``observe(state, cfg)`` taken
  after the step is learned and before its boundary is processed;
* ``predict(state, cfg, X)``: frozen predictions; the state never changes;
* ``learn_then_predict(state, cfg, X, Y, z)``: ``learn``, then ``predict`` of one row, in one compiled
  call where possible (the river path, §6.9);
* ``journal(state, cfg, X, on_disk)`` and ``undo(state, journal)``: learn a few rows and give the state back
  (forks; ``on_disk``: the pool entries' copy goes to a temporary file);
* ``reserve(state, cfg, n_steps)``: a growing tree's arenas sized now for its first ``n_steps`` steps.

The configuration and a fresh state come from modules that import no JAX; the other names (``ON_JAX``)
import their modules, and JAX, when first read, so that a learner on the native engine never does.

The state is always *prepared*: the boundary of the next step (closing segments, pool updates,
pruning, the restart) has been processed at the end of the step before (§4.2), so predicting is a
pure read. ``learn`` runs two compiled programs: ``run_steps`` (steps whose boundary needs no pool
update) and ``pool_boundary`` (one pool update, every ``P`` steps), and it enlarges the state when the
record arena or the tree needs room.

Where each part lives, in the order a step runs through them:

* ``config``: the static configuration and the sizes it implies; ``state``: the state's types and a
  fresh state; ``ops``: array helpers shared by the programs;
* ``driver``: ``learn`` and ``predict`` on the host, calling the programs of ``compiled`` (those that
  ``ahead`` compiles in the background before they are needed);
* ``step``: one step: the posteriors (``posterior``), every layer (``layer``: member predictions and row
  updates, rows found through ``members``, blocks from ``arena``), the record, and the end of the step:
  the pool update when due (``pool_update``, each neuron's decision by ``decisions``), the restart;
* ``records``: the record arena's garbage collection, and the records' contexts of an old save;
  ``resize``: a larger engine for a growing learner; ``forks``: journals and undo.

Layout (§6): neurons of all layers sit side by side in every per-neuron array (``N`` in all); each
layer keeps its pool entries as ``arena.pool_rows [N_i, C, E, width]`` and its slots' trained rows as
``arena.blocks [A_i, W, width]``, one block (the ``W`` lanes' rows, contiguous) per (slot, neuron, context)
the slot's segment has visited. A step reads and writes whole blocks; a lane new to its block reads its
source row instead (§6.2).

Shapes: ``S`` slots (tree levels), ``k`` pool capacity, ``M = k + 1`` members (fresh last), ``E``
physical pool entries, ``W`` lanes (rows trained per block), ``N`` neurons, ``C`` contexts, ``R``
reservoir size, ``A_r`` record rows, ``d`` features, ``H`` hidden inputs recorded per step.
"""

import importlib

from nctl.core.engine.config import (
    LEARN_BLOCK, PREDICT_BLOCK, EngineConfig, configure, configured, lean_arena_depth, max_depth_for,
)
from nctl.core.engine.state import Net, Records, State, gates, init

# the names of the JAX programs' modules, imported when one is first read: a learner on the native engine
# configures and makes its state here, and never imports JAX
ON_JAX = {"finish_compiling": "ahead", "learn": "driver", "learn_then_predict": "driver", "pad_to_grown": "driver",
          "predict": "driver", "reserve": "driver", "Journal": "forks", "journal": "forks", "undo": "forks",
          "with_record_contexts": "records"}


def __getattr__(name: str):
    if name in ON_JAX:  # kept here once imported: the JAX engine's calls read it per call
        value = globals()[name] = getattr(importlib.import_module(f"{__name__}.{ON_JAX[name]}"), name)
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["EngineConfig", "Journal", "LEARN_BLOCK", "Net", "PREDICT_BLOCK", "Records", "State", "configure",
           "configured", "finish_compiling", "gates", "init", "journal", "lean_arena_depth", "learn",
           "learn_then_predict", "max_depth_for", "pad_to_grown", "predict", "reserve", "undo",
           "with_record_contexts"]
