"""The NCTL learner (``nctl.NCTL``): a GLN whose neurons are Forget-Me-Not processes, run by the engine
of ``nctl.core.engine``. (The module is not named ``nctl``, which would read as the package itself.)"""

from __future__ import annotations

from dataclasses import dataclass

from nctl.core import gln, mixing, tree
from nctl.core.rows import GGMRows
from nctl.learners.base import OnlineLearner
from nctl.learners.classifier import Classifier
from nctl.learners.engine_learner import EngineLearner
from nctl.learners.presets import PAPER_NETWORKS, PAPER_POOL, TABULAR
from nctl.params import GLN_RULES, TREE_RULES, check_fields
from nctl.pool import Pool, check_pool, pool_keywords


@pool_keywords
@dataclass(eq=False)
class NCTL(Classifier, EngineLearner, OnlineLearner):
    """Neural Combinatorial Transfer Learning ([algorithm §5](algorithm.md#5-nctl)): a GLN whose every
    neuron is a Forget-Me-Not process over its GGM, mixing remembered solutions over segmentations of time.

    ``depth=None`` grows the tree with the stream (anytime); a known stream length ``n`` is best
    served by ``depth = ceil(log2 n)``. ``split_prob = 0`` puts all prior mass on one segment, which
    makes NCTL a GLN; a sequence of split probabilities (e.g. ``SPLIT_GRID``) predicts with the
    Bayesian mixture over them (§3.6). ``pool=nctl.Pool(trained_members=B)`` trains only the ``B`` most probable
    members of every node (bounded mode, §5.3).

    The defaults are the paper's Split MNIST network (50-25-1, 16 contexts, learning rate 0.001) with
    the paper's FIFO pool; ``NCTL.tabular()`` gives the settings measured for tabular streams (the
    river and scikit-learn adapters' defaults) and ``NCTL.paper_*()`` the paper's other experiments.

    Args:
        layer_sizes: neurons per layer, ending with the single output neuron.
        context_bits: hyperplanes per neuron (``s``); each neuron has ``2^s`` contexts, a weight row each.
        learning_rate: the step size of every neuron's online gradient step on its log loss.
        pool: every neuron's pool of remembered states (``nctl.Pool``: its size, ``min_segment``, eviction,
            bounded mode, ...).
        depth: tree depth for a stream of ``2^depth`` steps; ``None`` grows with the stream.
        split_prob: the prior probability of a segment boundary at each tree node, or a sequence of them
            to mix over (``SPLIT_GRID``); 0 makes NCTL a GLN.
        n_classes: 2 for 0/1 labels; ``K > 2`` trains one network per class (one-vs-all).
        weight_init: initial weights: ``"zeros"`` (every neuron predicts 1/2) or ``"uniform"`` (1/fan-in).
        prob_eps: probabilities are clipped to ``[eps, 1 - eps]``.
        max_weight: weights are kept in ``[-max_weight, max_weight]``.
        seed: draws the gating hyperplanes.
    """

    layer_sizes: tuple = (50, 25, 1)
    context_bits: int = 4
    learning_rate: float = 1e-3
    pool: Pool = Pool()
    depth: int | None = None
    split_prob: float | tuple = 0.5
    n_classes: int = 2
    weight_init: str = "zeros"
    prob_eps: float = mixing.PROB_EPS
    max_weight: float = mixing.MAX_WEIGHT
    seed: int = 0

    def __post_init__(self) -> None:
        check_fields(self, {**GLN_RULES, **TREE_RULES, "pool": check_pool})
        self.layer_sizes = gln.check_layer_sizes(self.layer_sizes)
        tree.split_grid(self.split_prob)
        super().__post_init__()

    # -- presets

    @classmethod
    def paper_split_mnist(cls, **overrides) -> "NCTL":
        """The paper's Split MNIST learner
        ([protocols §1](protocols.md#1-split-mnist-and-split-fashion-mnist-domain-incremental)): 50-25-1, 16
        contexts, learning rate 0.001; the pool rules the paper states (FIFO) with its silent choices at their
        defaults (k = 15, L_min = 32, [algorithm §7.1](algorithm.md#71-where-the-paper-is-silent));
        ``overrides`` change any parameter."""
        return cls(**{**PAPER_NETWORKS["split_mnist"], **PAPER_POOL, **overrides})

    @classmethod
    def paper_permuted_mnist(cls, **overrides) -> "NCTL":
        """The paper's Permuted MNIST learner ([protocols §2](protocols.md#2-permuted-mnist)): ten one-vs-all
        10-5-1 networks, 64 contexts, learning rate 0.001, the same pool as ``paper_split_mnist``."""
        return cls(**{**PAPER_NETWORKS["permuted_mnist"], **PAPER_POOL, "n_classes": 10, **overrides})

    @classmethod
    def paper_electricity(cls, **overrides) -> "NCTL":
        """The paper's Electricity learner ([protocols §4](protocols.md#4-electricity-elec2)): 50-25-1, 16
        contexts, learning rate 0.1."""
        return cls(**{**PAPER_NETWORKS["electricity"], **overrides})

    @classmethod
    def tabular(cls, **overrides) -> "NCTL":
        """The defaults of the river and scikit-learn adapters (``TABULAR``), measured on tabular
        streams against river's learners (docs/guide-river.md, "Defaults")."""
        return cls(**{**TABULAR, **overrides})

    @property
    def rows(self) -> GGMRows:
        """The row model of every neuron: GGM rows with this learner's settings (§1.3)."""
        return GGMRows(float(self.learning_rate), float(self.prob_eps), float(self.max_weight), self.weight_init)
