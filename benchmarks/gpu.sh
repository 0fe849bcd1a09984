#!/usr/bin/env bash
# The engine's benchmarks on a machine with a GPU, each bounded in time so that the whole ends within
# ten minutes, into OUTDIR: versions.txt, throughput.json, river_speed.json, tests.txt (the exactness
# tests on the GPU, up to the first failure), memory.jsonl (benchmarks/memory.py's configurations, one
# line each) and log.txt.
# Needs nctl importable (PYTHONPATH=src will do), river for river_speed and NCTL_DATA holding Elec2.
#
#     bash benchmarks/gpu.sh OUTDIR
set -u
out=${1:?usage: bash benchmarks/gpu.sh OUTDIR}
mkdir -p "$out"
log="$out/log.txt"
{ nvidia-smi -L; python3 -c 'import jax, jaxlib; print("jax", jax.__version__, "jaxlib", jaxlib.__version__, jax.devices())'; } \
  > "$out/versions.txt" 2>>"$log"
timeout 170 python3 benchmarks/throughput.py > "$out/throughput.json" 2>>"$log"
echo "throughput: rc $?" >> "$log"
timeout 120 python3 benchmarks/river_speed.py --cache "$(mktemp -d)" > "$out/river_speed.json" 2>>"$log"
echo "river_speed: rc $?" >> "$log"
# one process, stopped at the first failure: pytest reports it at once, well inside the time limit
# (runs with workers were cut before their report: docs/RESULTS.md, "the same benchmarks on a GPU")
timeout 150 python3 -m pytest -q -p no:cacheprovider -p no:xdist -o addopts="" -x --tb=short \
  tests/core tests/test_learners.py > "$out/tests.txt" 2>&1
echo "tests: rc $?" >> "$log"
for config in "6 exact" "8 exact" "8 4"; do
  timeout 50 python3 benchmarks/memory.py --steps 256 --one $config >> "$out/memory.jsonl" 2>>"$log"
  echo "memory $config: rc $?" >> "$log"
done
