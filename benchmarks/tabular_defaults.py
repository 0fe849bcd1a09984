"""How NCTL settings score on tabular streams, against river's own learners in the same run, as JSON.

The evidence behind the defaults of ``nctl.river.NCTLClassifier`` and ``nctl.sklearn.NCTLClassifier``
(docs/guide-river.md, "Defaults"). Every model is ``StandardScaler() | model`` in river's
``progressive_val_score`` (predict, score, then learn, row by row) on six streams:

* ``elec2``: the first rows of Elec2 (8 features; needs the data folder, else skipped);
* ``sea-recurring``: river's SEA concepts, variants 0, 1, 2, 3 in turn, recurring without warning;
* ``agrawal-recurring``: river's Agrawal functions 0, 2, 4 in turn, recurring without warning;
* ``hyperplane-drift``: river's rotating hyperplane (10 features, 5 drifting, 5% label noise);
* ``phishing``: river's Phishing data (1,250 rows);
* ``synthetic``: nctl's recurring half-space concepts (``nctl.streams.synthetic``).

    python benchmarks/tabular_defaults.py [--rows 5000] [--block 500] [--data-dir DIR] [--cache DIR]
                                          [--candidates '{"name": {"learning_rate": 0.1}, ...}'] [--streams a,b]
"""

import argparse
import itertools
import json
import time

import numpy as np
from river import datasets, evaluate, forest, linear_model, metrics, preprocessing, tree
from river.datasets import synth

from nctl import enable_compilation_cache
from nctl.experiments.run import cpu_name
from nctl.river import GLNClassifier, NCTLClassifier
from nctl.streams import synthetic

from river_speed import elec2_rows

CANDIDATES = {  # NCTL settings compared; the object API's defaults first
    "nctl lr 0.001 (50-25-1)": {"learning_rate": 0.001},
    "nctl lr 0.01 (50-25-1)": {"learning_rate": 0.01},
    "nctl lr 0.1 (50-25-1)": {"learning_rate": 0.1},
    "nctl lr 0.1 (16-8-1)": {"learning_rate": 0.1, "layer_sizes": (16, 8, 1)},
    "nctl lr 0.1 (16-8-1, 4 contexts)": {"learning_rate": 0.1, "layer_sizes": (16, 8, 1), "context_bits": 2},
}


def recurring(make, settings, rows: int, block: int) -> list:
    """``block`` rows of each setting in turn, cycling until ``rows``; each setting's generator resumes."""
    generators = [iter(make(s)) for s in settings]
    out = []
    for g in itertools.cycle(generators):
        out += list(itertools.islice(g, min(block, rows - len(out))))
        if len(out) >= rows:
            return out


def streams(rows: int, block: int, data_dir) -> dict:
    found = {
        "sea-recurring": recurring(lambda v: synth.SEA(variant=v, seed=1), (0, 1, 2, 3), rows, block),
        "agrawal-recurring": recurring(lambda f: synth.Agrawal(classification_function=f, seed=1), (0, 2, 4), rows,
                                       block),
        "hyperplane-drift": list(itertools.islice(synth.Hyperplane(
            seed=1, n_features=10, n_drift_features=5, mag_change=0.001, noise_percentage=0.05), rows)),
        "phishing": list(datasets.Phishing()),
    }
    stream = synthetic(seed=0, segment_length=block, n_segments=-(-rows // block))
    X, y, _ = next(stream.chunks(size=rows))
    found["synthetic"] = [(dict(enumerate(map(float, x))), bool(label)) for x, label in zip(X, y)]
    try:
        found["elec2"] = elec2_rows(data_dir, rows)
    except (FileNotFoundError, ValueError) as error:
        print(json.dumps({"skipped": "elec2", "why": str(error)}))
    return found


def score(make, stream) -> dict:
    metric = metrics.Accuracy()
    start = time.perf_counter()
    evaluate.progressive_val_score(stream, preprocessing.StandardScaler() | make(), metric)
    seconds = time.perf_counter() - start
    return {"accuracy": round(100 * metric.get(), 2), "examples_per_s": round(len(stream) / seconds, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=5000)
    parser.add_argument("--block", type=int, default=500, help="rows per concept before the next one")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--cache", default=None, help="a persistent compilation cache folder")
    parser.add_argument("--candidates", default=None, help="JSON {name: NCTLClassifier parameters}")
    parser.add_argument("--streams", default=None, help="comma-separated stream names (default: all)")
    args = parser.parse_args()
    if args.cache:
        enable_compilation_cache(args.cache)
    candidates = json.loads(args.candidates) if args.candidates else CANDIDATES
    models = {name: (lambda p=params: NCTLClassifier(**{k: tuple(v) if isinstance(v, list) else v
                                                        for k, v in p.items()}))
              for name, params in candidates.items()}
    models.update({
        "gln lr 0.001 (50-25-1)": lambda: GLNClassifier(learning_rate=0.001),
        "gln lr 0.1 (50-25-1)": lambda: GLNClassifier(learning_rate=0.1),
        "river ARF": lambda: forest.ARFClassifier(seed=0),
        "river HAT": lambda: tree.HoeffdingAdaptiveTreeClassifier(seed=0),
        "river logistic regression": linear_model.LogisticRegression,
    })
    results = {}
    chosen = streams(args.rows, args.block, args.data_dir)
    if args.streams:
        chosen = {name: chosen[name] for name in args.streams.split(",")}
    for stream_name, stream in chosen.items():
        results[stream_name] = {name: score(make, stream) for name, make in models.items()}
        print(json.dumps({stream_name: results[stream_name]}), flush=True)
    mean = {name: round(float(np.mean([results[s][name]["accuracy"] for s in results])), 2) for name in models}
    print(json.dumps({"rows": args.rows, "block": args.block, "cpu": cpu_name(), "candidates": candidates,
                      "accuracy_by_stream": results, "mean_accuracy": mean}, indent=2))


if __name__ == "__main__":
    main()
