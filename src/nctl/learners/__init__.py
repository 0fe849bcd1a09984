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

The modules: ``base`` (what every learner shares, and ``save``), ``classifier`` (the classifiers' front
end: labels in, probabilities out), ``inputs`` (checks of features and labels), ``gln`` (``GLN``),
``engine_learner`` (what the learners run by the NCTL engine share), ``nctl_learner`` (``NCTL``),
``regressor`` (``GLNRegressor``, and the regressors' front end), ``nctl_regressor`` (``NCTLRegressor``),
``presets`` (the paper's and the tabular settings), ``saving`` (``load``, and the save formats it reads),
``xla_calls`` (the GLNs' calls on the JAX engine, imported where a learner runs on it).
Every public name is also here.
"""

from nctl.learners.base import FORKED_LEARNS, SAVE_FORMAT, OnlineLearner
from nctl.learners.gln import GLN, GLN_CHUNK
from nctl.learners.engine_learner import DEFAULT_MAX_DEPTH, EngineLearner
from nctl.learners.nctl_learner import NCTL
from nctl.learners.presets import GLN_TABULAR, PAPER_NETWORKS, PAPER_POOL, SPLIT_GRID, TABULAR
from nctl.learners.nctl_regressor import NCTLRegressor
from nctl.learners.regressor import GLNRegressor, Regressor
from nctl.learners.row_buffer import PENDING_ROWS, RowBuffer
from nctl.learners.saving import NPZ_MAGIC, READABLE_FORMATS, UNREADABLE_SAVE, load

__all__ = ["DEFAULT_MAX_DEPTH", "EngineLearner", "FORKED_LEARNS", "GLN", "GLN_CHUNK", "GLN_TABULAR", "GLNRegressor",
           "NCTL", "NCTLRegressor", "NPZ_MAGIC", "OnlineLearner", "PAPER_NETWORKS", "PAPER_POOL", "PENDING_ROWS",
           "READABLE_FORMATS", "Regressor", "SAVE_FORMAT", "SPLIT_GRID", "TABULAR", "UNREADABLE_SAVE", "load"]
