"""One named, typed, frozen configuration per experiment of the paper (docs/protocols.md), plus the demo.

A configuration says which stream, which learners, which evaluation protocol and which
hyper-parameters; ``nctl run NAME --set key=value`` overrides any field (``nctl.pool_size=31`` sets
one NCTL hyper-parameter). Numbers the paper reports are kept as ``anchors`` for the report.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping

from nctl.learners import PAPER_NETWORKS

MNIST_NETWORK = PAPER_NETWORKS["split_mnist"]
PERMUTED_NETWORK = PAPER_NETWORKS["permuted_mnist"]
ELEC2_NETWORK = PAPER_NETWORKS["electricity"]
# Free Split tasks last about 200 examples. The paper does not state their learning rate; at its MNIST
# rate of 0.001 a fresh GLN stays near log 2 within a task, which leaves the oracles nothing to show, so
# Free Split uses 0.01, where every learner learns within a task (docs/RESULTS.md compares both).
FREE_SPLIT_NETWORK = MappingProxyType({**MNIST_NETWORK, "learning_rate": 0.01})
# Pool settings chosen by the eviction ablation of docs/RESULTS.md: FIFO loses the early tasks of a long
# stream; "spacing" eviction keeps remembered states spread over the whole past (task-free). Long tasks
# (thousands of examples) also gain from a larger L_min, which keeps the pool from churning within a task.
LONG_TASK_POOL = MappingProxyType({"eviction": "spacing", "min_segment": 256})
SHORT_TASK_POOL = MappingProxyType({"eviction": "spacing", "min_segment": 32})
TASK_MATRIX, BACKWARD, FORWARD, ORACLES, PREQUENTIAL, SUBSTRATE, REGRESSION = (
    "task-matrix", "free-split-backward", "free-split-forward", "free-split-oracles", "prequential", "substrate",
    "regression")
KINDS = (TASK_MATRIX, BACKWARD, FORWARD, ORACLES, PREQUENTIAL, SUBSTRATE, REGRESSION)
# the settings that only some kinds of experiment read; any other kind would ignore them
USED_BY = {
    "variants": (TASK_MATRIX,), "eval_every": (TASK_MATRIX,), "max_test": (TASK_MATRIX,),
    "steps_per_task": (TASK_MATRIX,), "max_steps": (PREQUENTIAL, SUBSTRATE, REGRESSION),
    "conditions": (BACKWARD, FORWARD), "window": (BACKWARD, FORWARD),
    "curve_points": (PREQUENTIAL, ORACLES, REGRESSION),
}


@dataclass(frozen=True)
class Experiment:
    """Everything an experiment run depends on, apart from the seeds and the data folder."""

    name: str
    kind: str
    description: str
    stream: str  # name of a constructor in nctl.streams
    learners: tuple[str, ...]
    stream_args: Mapping[str, Any] = field(default_factory=dict)
    # NCTL, GLN, oracles; of a regression experiment, the settings of GLNRegressor and NCTLRegressor that
    # differ from their defaults
    network: Mapping[str, Any] = field(default_factory=lambda: dict(MNIST_NETWORK))
    nctl: Mapping[str, Any] = field(default_factory=dict)  # NCTL-only hyper-parameters
    mlp: Mapping[str, Any] = field(default_factory=dict)
    seeds: int = 1  # default number of seeds (task sequences for Free Split)
    variants: tuple[str, ...] = ("frozen", "adapt50")
    eval_every: int | None = None
    max_test: int | None = None  # cap on test examples per task and evaluation
    steps_per_task: int | None = None  # truncate every task segment (tiny runs); None = full protocol
    max_steps: int | None = None  # truncate a prequential stream; None = full protocol
    conditions: tuple[int, ...] = ()  # distractor / source counts of the Free Split transfer runs
    window: int = 200  # steps of the curves recorded after a task (re)appears
    curve_points: int = 200  # prequential curves are stored at this many evenly spaced steps
    anchors: Mapping[str, Any] = field(default_factory=dict)

    def replace(self, overrides: Mapping[str, str]) -> "Experiment":
        """A copy with ``key=value`` overrides; ``group.key`` sets one entry of a parameter group.
        ValueError for a setting that does not exist or that this kind of experiment would ignore
        (``nctl.experiments.validate`` checks the values)."""
        changes: dict[str, Any] = {}
        settable = [f.name for f in dataclasses.fields(self) if f.name != "name"]
        for key, raw in overrides.items():
            value = _parse(raw)
            top, _, sub = key.partition(".")
            if top not in settable:
                raise ValueError(f"unknown setting {key!r} for experiment {self.name}; settings: {', '.join(settable)}")
            if sub and not isinstance(getattr(self, top), Mapping):
                raise ValueError(f"setting {top!r} has no entries: set it with --set {top}=VALUE, not {key!r}")
            if sub:
                group = dict(changes.get(top, getattr(self, top)))
                group[sub] = tuple(value) if isinstance(value, list) else value
                changes[top] = group
            else:
                changes[top] = tuple(value) if isinstance(value, list) else value
        kind = changes.get("kind", self.kind)
        for top in changes:
            if kind in KINDS and kind not in USED_BY.get(top, (kind,)):
                raise ValueError(f"setting {top!r} does not apply to {kind} experiments such as {self.name} "
                                 f"(it applies to {', '.join(USED_BY[top])})")
        return dataclasses.replace(self, **changes)

    def to_json(self) -> dict:
        return json.loads(json.dumps(dataclasses.asdict(self), default=dict))


def _parse(raw: str) -> Any:
    """JSON if it parses (numbers, lists, true/false/null), else the string itself."""
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return raw


SPLIT_ANCHORS = {
    "acc": {"NCTL (paper)": 95.07, "NCTL third-party replication": 95.25, "EWC": 58.85, "Online EWC": 57.33,
            "SI": 64.76, "MAS": 68.57, "LwF": 71.02, "GEM (replay)": 96.16, "RtF (replay)": 97.31,
            "Offline upper bound": 98.59}
}
PERMUTED_ANCHORS = {
    "acc": {"NCTL (paper)": 95.27, "EWC": 91.04, "Online EWC": 92.51, "SI": 93.94, "MAS": 94.08,
            "GEM (replay)": 96.19, "RtF (replay)": 97.06, "Offline upper bound": 97.90}
}
SUBSTRATE_ANCHORS = {"test_accuracy": {"pygln": 96.1, "DeepMind GLN example": 95.0, "GLN paper": 98.0}}
ELEC2_ANCHORS = {
    "accuracy": {"NCTL (paper, 5 features)": 86.37, "No-change": 85.3, "DWM-NB (8 features)": 80.75,
                 "river ALMA (8)": 90.64, "river Leveraging Bagging (8)": 89.27,
                 "river Adaptive Random Forest (8)": 87.66, "river Hoeffding Adaptive Tree (8)": 82.13,
                 "river logistic regression (8)": 82.21}
}
# Continual regression (issue 57): one experiment per stream, so that each stream has its own results file,
# seed store and cost row, and a long stream can be shortened or rerun without touching the others. Every
# learner runs with its defaults (network={}, nctl={}), behind river's StandardScaler, row by row.
REGRESSION_LEARNERS = ("nctl", "gln", "river:adaptive_random_forest", "river:hoeffding_adaptive_tree",
                       "river:linear_regression")


# The regressors' defaults (docs/algorithm.md §8.4), written out so that a seed store's configuration changes
# when they do: the network both learners share, and NCTL's learning rate (its GLN keeps its own, 0.01).
REGRESSION_NETWORK = MappingProxyType({"layer_sizes": (16, 8, 1), "context_bits": 2})
REGRESSION_NCTL = MappingProxyType({"learning_rate": 0.02})


def _regression(name: str, stream: str, description: str, **stream_args) -> Experiment:
    return Experiment(name, REGRESSION, description, stream=stream, learners=REGRESSION_LEARNERS,
                      stream_args=stream_args, network=dict(REGRESSION_NETWORK), nctl=dict(REGRESSION_NCTL), seeds=3,
                      curve_points=100)


def _permuted_variant(name: str, description: str, deskewed: bool, trained_members: int | None,
                      variants: tuple = ("frozen", "adapt50"), **network) -> Experiment:
    """A full-protocol Permuted MNIST run of the GLN and NCTL (bounded with ``trained_members``, exact with
    None) with the paper's network changed by ``network`` (context bits, learning rate), on deskewed digits
    or plain pixels, scored under ``variants`` (both evaluations unless a setting's adapt50 forks do not fit
    in memory)."""
    stream_args = {"stream_args": {"deskewed": True, "z_clip": 3.0}} if deskewed else {}
    return Experiment(name, TASK_MATRIX, description, stream="permuted_mnist", **stream_args, learners=("gln", "nctl"),
                      network={**PERMUTED_NETWORK, **network}, seeds=3, max_test=1000, anchors=PERMUTED_ANCHORS,
                      nctl={**LONG_TASK_POOL, "trained_members": trained_members}, variants=variants)


EXPERIMENTS: dict[str, Experiment] = {
    e.name: e
    for e in [
        Experiment(
            "demo", PREQUENTIAL, "NCTL vs GLN on a built-in stream of recurring concepts (no download)",
            stream="synthetic", learners=("nctl", "gln"),
            stream_args={"n_features": 10, "n_concepts": 3, "segment_length": 300, "n_segments": 12},
            network={"layer_sizes": (20, 10, 1), "context_bits": 4, "learning_rate": 0.1},
            nctl={"min_segment": 32}, curve_points=120,
        ),
        Experiment(
            "split-mnist", TASK_MATRIX, "Domain-incremental Split MNIST, one online pass (paper Table 1)",
            stream="split_mnist", learners=("nctl", "gln"), seeds=10, anchors=SPLIT_ANCHORS,
            nctl=dict(LONG_TASK_POOL),
        ),
        Experiment(
            "split-mnist-deskewed", TASK_MATRIX,
            "Split MNIST on deskewed digits, z clipped to +-3 (the substrate anchors' input; a named variant)",
            stream="split_mnist", stream_args={"deskewed": True, "z_clip": 3.0}, learners=("nctl", "gln"),
            seeds=10, anchors=SPLIT_ANCHORS, nctl=dict(LONG_TASK_POOL),
        ),
        Experiment(
            "split-fashion-mnist", TASK_MATRIX,
            "Split Fashion-MNIST, every task evaluated every 500 examples (paper Figure 4)",
            stream="split_fashion_mnist", learners=("nctl", "gln", "ewc", "online-ewc"), seeds=3,
            eval_every=500, max_test=500, nctl=dict(LONG_TASK_POOL),
        ),
        Experiment(
            "permuted-mnist", TASK_MATRIX, "Permuted MNIST, 10 tasks x 60,000 examples (paper Table 1)",
            stream="permuted_mnist", learners=("nctl",), network=dict(PERMUTED_NETWORK), seeds=1,
            max_test=1000, anchors=PERMUTED_ANCHORS, nctl=dict(LONG_TASK_POOL),
        ),
        Experiment(
            "permuted-mnist-deskewed", TASK_MATRIX,
            "Permuted MNIST at the full protocol on deskewed digits, z clipped to +-3 (the substrate anchors' input)",
            stream="permuted_mnist", stream_args={"deskewed": True, "z_clip": 3.0}, learners=("gln", "nctl"),
            network=dict(PERMUTED_NETWORK), seeds=1, max_test=1000, anchors=PERMUTED_ANCHORS,
            nctl=dict(LONG_TASK_POOL),
        ),
        _permuted_variant(
            "permuted-mnist-deskewed-c256-exact",
            "Permuted MNIST at the full protocol on deskewed digits, 2^8 contexts, exact NCTL (every member trained), "
            "frozen evaluation only (an adapt50 fork of the 18 GB state does not fit beside it in 24 GB)",
            deskewed=True, trained_members=None, context_bits=8, variants=("frozen",)),
        _permuted_variant(
            "permuted-mnist-deskewed-c256-bounded",
            "Permuted MNIST at the full protocol on deskewed digits, 2^8 contexts, bounded mode (4 trained members)",
            deskewed=True, trained_members=4, context_bits=8),
        _permuted_variant(
            "permuted-mnist-deskewed-c256-lr0.003-bounded",
            "Permuted MNIST at the full protocol on deskewed digits, 2^8 contexts, lr 0.003 (each task learned to "
            "95.9% by the GLN), bounded mode (4 trained members)",
            deskewed=True, trained_members=4, context_bits=8, learning_rate=0.003),
        _permuted_variant(
            "permuted-mnist-deskewed-c512-lr0.003-bounded2",
            "Permuted MNIST at the full protocol on deskewed digits, 2^9 contexts, lr 0.003 (each task learned to "
            "96.0% by the GLN, which forgets 1.5 points), bounded mode (2 trained members)",
            deskewed=True, trained_members=2, context_bits=9, learning_rate=0.003),
        _permuted_variant(
            "permuted-mnist-deskewed-c1024-lr0.005-bounded1",
            "Permuted MNIST at the full protocol on deskewed digits, 2^10 contexts, lr 0.005 (each task learned to "
            "96.0% by the GLN, which forgets 1.2 points), bounded mode (1 trained member), frozen evaluation only "
            "(an adapt50 fork across a pool boundary keeps a copy of the pool: 2 x 13.2 GB)",
            deskewed=True, trained_members=1, context_bits=10, learning_rate=0.005, variants=("frozen",)),
        _permuted_variant(
            "permuted-mnist-deskewed-c1024-lr0.005-bounded1-adapt50",
            "Permuted MNIST at the full protocol on deskewed digits, 2^10 contexts, lr 0.005, bounded mode (1 trained "
            "member), both evaluations (a fork across a pool boundary copies the pool to a temporary file)",
            deskewed=True, trained_members=1, context_bits=10, learning_rate=0.005),
        _permuted_variant(
            "permuted-mnist-c256-bounded",
            "Permuted MNIST at the full protocol on plain pixels, 2^8 contexts, lr 0.01 (its GLN's best), bounded "
            "mode (4 trained members)",
            deskewed=False, trained_members=4, context_bits=8, learning_rate=0.01),
        Experiment(
            "permuted-mnist-reduced", TASK_MATRIX,
            "Permuted MNIST, 10 tasks x 1,000 examples: a reduced variant, not the paper's protocol",
            stream="permuted_mnist", learners=("nctl", "gln"), network=dict(PERMUTED_NETWORK), seeds=10,
            stream_args={"examples_per_task": 1000}, max_test=1000, nctl=dict(LONG_TASK_POOL),
        ),
        Experiment(
            "free-split-backward", BACKWARD,
            "Free Split MNIST backward transfer: task A, N distractors, A again (paper Figure 2)",
            stream="free_split_backward", learners=("nctl",), seeds=100, conditions=(0, 5, 10, 15), window=100,
            network=dict(FREE_SPLIT_NETWORK), nctl=dict(SHORT_TASK_POOL),
        ),
        Experiment(
            "free-split-forward", FORWARD,
            "Free Split MNIST forward transfer: N source tasks, then a held-out target (paper Figure 3)",
            stream="free_split_forward", learners=("nctl",), seeds=100, conditions=(0, 1, 2, 4, 8, 16), window=100,
            network=dict(FREE_SPLIT_NETWORK), nctl=dict(SHORT_TASK_POOL),
        ),
        Experiment(
            "free-split-oracles", ORACLES,
            "Free Split MNIST: NCTL vs GLN oracles told boundaries (1) and task identities (2) (paper Figure 5)",
            stream="free_split_mnist", learners=("nctl", "oracle-1", "oracle-2", "gln"), seeds=100,
            stream_args={"n_steps": 4000}, curve_points=200, network=dict(FREE_SPLIT_NETWORK),
            nctl=dict(SHORT_TASK_POOL),
        ),
        Experiment(
            "elec2-5", PREQUENTIAL, "Electricity, the paper's 5 features, test-then-train (paper Figure 7)",
            stream="electricity", stream_args={"n_features": 5}, network=dict(ELEC2_NETWORK),
            learners=("nctl", "nctl-grid", "gln", "mlp", "no-change", "river:hoeffding_adaptive_tree",
                      "river:adaptive_random_forest", "river:logistic_regression", "river:leveraging_bagging"),
            seeds=10, anchors=ELEC2_ANCHORS,
        ),
        Experiment(
            "elec2-8", PREQUENTIAL, "Electricity, all 8 features (river's benchmark setting)",
            stream="electricity", stream_args={"n_features": 8}, network=dict(ELEC2_NETWORK),
            learners=("nctl", "nctl-grid", "gln", "mlp", "no-change", "river:hoeffding_adaptive_tree",
                      "river:adaptive_random_forest", "river:logistic_regression", "river:alma",
                      "river:leveraging_bagging"),
            seeds=10, anchors=ELEC2_ANCHORS,
        ),
        Experiment(
            "mnist-gln", SUBSTRATE, "GLN alone on MNIST, 10 classes one-vs-all, one pass (substrate check)",
            stream="mnist_classes", learners=("gln",), seeds=3,
            anchors=SUBSTRATE_ANCHORS,
        ),
        Experiment(
            "mnist-gln-deskewed", SUBSTRATE,
            "GLN alone on deskewed MNIST (the anchors' preprocessing), z clipped to +-3, 2^8 contexts, lr 0.003",
            stream="mnist_classes", stream_args={"deskewed": True, "z_clip": 3.0}, learners=("gln",), seeds=3,
            network={**MNIST_NETWORK, "context_bits": 8, "learning_rate": 0.003},
            anchors=SUBSTRATE_ANCHORS,
        ),
        _regression("regression-friedman-gra", "friedman_gra",
                    "river's FriedmanDrift, global recurring abrupt drift: concept A, B from row 4,000, A again from "
                    "8,000; progressive validation", n_rows=12_000, position=(4_000, 8_000)),
        _regression("regression-trump", "trump_approval",
                    "river's TrumpApproval (1,001 rows, one fixed sequence); progressive validation"),
        _regression("regression-chickweights", "chick_weights",
                    "river's ChickWeights (578 rows, one fixed sequence); progressive validation"),
        _regression("regression-recurring", "synthetic_regression",
                    "three nonlinear concepts taking turns, 2,000 rows a visit, A B C A B C, unannounced; "
                    "progressive validation", n_features=5, n_concepts=3, segment_length=2_000, n_segments=6,
                    noise=0.1),
    ]
}


def get(name: str) -> Experiment:
    if name not in EXPERIMENTS:
        raise ValueError(f"unknown experiment {name!r}; `nctl list` shows {', '.join(EXPERIMENTS)}")
    return EXPERIMENTS[name]
