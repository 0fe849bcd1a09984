"""The learners' preset settings: the paper's networks and pool, the tabular defaults of the river and
scikit-learn adapters, and a grid of split probabilities to mix over."""

from types import MappingProxyType

from nctl.pool import Pool

# The paper's networks (docs/protocols.md): the experiments of nctl.experiments.configs and the presets
# NCTL.paper_split_mnist() etc. are built from them. The object API's own defaults are the Split MNIST one.
PAPER_NETWORKS = MappingProxyType({
    "split_mnist": MappingProxyType({"layer_sizes": (50, 25, 1), "context_bits": 4, "learning_rate": 1e-3}),
    "permuted_mnist": MappingProxyType({"layer_sizes": (10, 5, 1), "context_bits": 6, "learning_rate": 1e-3}),
    "electricity": MappingProxyType({"layer_sizes": (50, 25, 1), "context_bits": 4, "learning_rate": 0.1}),
})
# The paper's pool rule (FIFO) with the choices it leaves open at this project's values (docs/algorithm.md)
PAPER_POOL = MappingProxyType({"pool": Pool(size=15, eviction="fifo", min_segment=32)})
# Defaults for tabular streams, chosen by benchmarks/tabular_search.py (docs/guide-river.md, "Defaults"): the
# river and scikit-learn classifiers start from them. NCTL and its GLN share the network, so that comparing
# the two compares the pool.
TABULAR_NETWORK = MappingProxyType({"layer_sizes": (4, 1), "context_bits": 4, "learning_rate": 0.1})
TABULAR = MappingProxyType({**TABULAR_NETWORK, "pool": Pool(size=7, min_segment=128)})
GLN_TABULAR = TABULAR_NETWORK
# A grid of split probabilities, 2^-i and 1 - 2^-i for i = 1..6: ``split_prob=SPLIT_GRID`` mixes the PTWs of
# all of them (docs/algorithm.md §3.6) instead of fixing one.
SPLIT_GRID = tuple(sorted({2.0**-i for i in range(1, 7)} | {1 - 2.0**-i for i in range(1, 7)}))
