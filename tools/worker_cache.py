"""Seeds in worker processes and the compilation cache, as JSON: the wall time of
``nctl run demo --seeds 4 --workers 2 --quiet`` in a new process with a new, empty cache folder
(``NCTL_CACHE_DIR``), so that the run compiles every program it needs; a worker that takes over the
command's cache (``nctl.compilation.adopt``) loads what an earlier seed of its configuration compiled.

    python tools/worker_cache.py [--seeds 4] [--workers 2] [--experiment demo]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from nctl.experiments.run import cpu_name


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=4)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--experiment", default="demo")
    args = parser.parse_args()
    run = ["run", args.experiment, "--seeds", str(args.seeds), "--workers", str(args.workers), "--quiet"]
    with tempfile.TemporaryDirectory() as folder:
        env = {**os.environ, "NCTL_CACHE_DIR": str(Path(folder) / "cache")}
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "nctl.cli", *run, "--out", str(Path(folder) / "out")],
                       check=True, env=env, stdout=subprocess.DEVNULL)
        wall = time.perf_counter() - start
    print(json.dumps({"cpu": cpu_name(), "command": f"nctl {' '.join(run)} (a new NCTL_CACHE_DIR)",
                      "wall_s": round(wall, 1)}))


if __name__ == "__main__":
    main()
