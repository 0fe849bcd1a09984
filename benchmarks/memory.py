"""NCTL's memory at the paper's Permuted MNIST network, as JSON: the bound ``state_bytes`` promises and
what a process actually holds.

Ten one-vs-all 10-5-1 networks, 784 inputs, k = 15, spacing eviction, L_min = 256, a growing tree,
at C = 2^6 and 2^8 contexts, exact and in bounded mode (``--trained-members``). Each configuration runs
in a process of its own: it learns ``--steps`` rows of random data and reports its peak resident
memory (``VmHWM``), the bytes of its state, and ``state_bytes`` for the state's first example, after
the steps learned and for the full protocol (600,000 steps).

    python benchmarks/memory.py [--steps 1024] [--trained-members 4]
"""

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import jax
import numpy as np

import nctl
from nctl.experiments.run import cpu_name
from nctl.pool import Pool

N_FEATURES, CLASSES, PROTOCOL_STEPS = 784, 10, 600_000


def peak_resident_bytes() -> int:
    """The largest resident memory this process has held (``VmHWM`` of /proc/self/status; Linux)."""
    line = next(line for line in Path("/proc/self/status").read_text().splitlines() if line.startswith("VmHWM:"))
    return int(line.split()[1]) * 1024


def learner(context_bits: int, trained_members: int | None) -> "nctl.NCTL":
    pool = Pool(eviction="spacing", min_segment=256, trained_members=trained_members)
    return nctl.NCTL.paper_permuted_mnist(context_bits=context_bits, pool=pool)


def measure(context_bits: int, trained_members: int | None, steps: int) -> dict:
    """One configuration, in this process."""
    model = learner(context_bits, trained_members)
    rng = np.random.default_rng(0)
    X = rng.standard_normal((steps, N_FEATURES)).astype(np.float32)
    y = rng.integers(0, CLASSES, steps)
    start = time.perf_counter()
    model.learn_many(X, y)
    seconds = time.perf_counter() - start
    held = sum(leaf.nbytes for leaf in jax.tree.leaves(model.state_))
    row = {"context_bits": context_bits, "trained_members": trained_members, "steps": steps,
           "seconds": round(seconds, 1), "peak_rss_gb": peak_resident_bytes() / 1e9, "state_gb": held / 1e9,
           "bound_first_example_gb": model.state_bytes(N_FEATURES, 0) / 1e9,
           "bound_after_steps_gb": model.state_bytes(N_FEATURES, steps) / 1e9,
           "bound_protocol_gb": model.state_bytes(N_FEATURES, PROTOCOL_STEPS) / 1e9}
    device = jax.devices()[0].memory_stats()  # an accelerator's own memory (None on a CPU)
    if device and "peak_bytes_in_use" in device:
        row["peak_device_gb"] = device["peak_bytes_in_use"] / 1e9
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=1024)
    parser.add_argument("--trained-members", type=int, default=4, help="B of the bounded rows")
    parser.add_argument("--one", nargs=2, metavar=("CONTEXT_BITS", "TRAINED_MEMBERS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        bits, members = int(args.one[0]), None if args.one[1] == "exact" else int(args.one[1])
        print(json.dumps(measure(bits, members, args.steps)))
        return
    rows = []
    for bits in (6, 8):
        for members in ("exact", str(args.trained_members)):
            out = subprocess.run([sys.executable, __file__, "--steps", str(args.steps), "--one", str(bits), members],
                                 capture_output=True, text=True)
            rows.append(json.loads(out.stdout.strip().splitlines()[-1]) if out.returncode == 0
                        else {"context_bits": bits, "trained_members": members, "error": out.stderr.strip()[-300:]})
    print(json.dumps({"cpu": cpu_name(), "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
