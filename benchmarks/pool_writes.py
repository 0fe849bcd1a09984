"""How often a pool write overwrites an entry that a continuing slot's member still reads (its members
are then detached, docs/algorithm.md §6.4), on the river defaults' stream, as JSON.

``NCTL.tabular()`` learns the first Elec2 rows (8 features, column order); every pool write of every
boundary is counted, and those that hit a continuing member, with the number of members hit. The count
comes from a ``jax.debug.callback`` placed in front of ``nctl.core.boundary._detach`` (the engine
itself is not changed), so the learner's programs are compiled afresh and run slower than usual.

    python benchmarks/pool_writes.py [--rows 5000] [--data-dir DIR]
"""

import argparse
import json
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

import nctl
from nctl.core import boundary
from nctl.data.elec2 import read_elec2
from nctl.data.location import resolve_data_dir


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=5000)
    parser.add_argument("--data-dir", default=None)
    args = parser.parse_args()
    data = read_elec2(Path(resolve_data_dir(args.data_dir)) / "elec2" / "elecNormNew.arff")
    X, Y = data.features[:args.rows].astype(np.float32), data.labels[:args.rows].astype(np.int64)

    seen = []  # (members hit) per write call
    detach = boundary._detach

    def counted(net, writes, target, kept, cfg):
        continuing = (jnp.arange(cfg.slots) < kept)[:, None, None]
        hit = continuing & writes & (net.source == target) & ~net.detached
        jax.debug.callback(lambda hits: seen.append(int(hits)), jnp.sum(hit))
        return detach(net, writes, target, kept, cfg)

    boundary._detach = counted
    nctl.NCTL.tabular().learn_many(X, Y)
    hits = np.array(seen)
    print(json.dumps({"rows": args.rows, "writes": len(hits), "writes_that_hit": int((hits > 0).sum()),
                      "members_hit_per_write": round(float(hits.mean()), 2) if len(hits) else 0.0}, indent=2))


if __name__ == "__main__":
    main()
