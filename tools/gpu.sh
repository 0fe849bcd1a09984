#!/usr/bin/env bash
# The engine's benchmark and exactness tests on a machine with a GPU, bounded in time so that the whole
# ends within nine minutes, into OUTDIR: log.txt (the machine's GPU, CPU and versions, then each part's
# exit status), tests-gpu.txt (tests/core and tests/test_learners.py on the GPU, each test's result as
# it finishes, then the failures' tracebacks), tests-cpu.txt (the same tests on that machine's CPU,
# JAX_PLATFORMS=cpu, run beside them: a failure on the GPU alone is the GPU's arithmetic, one on both is
# the machine's JAX or NumPy), throughput.json, trace-gpu.npz, decisions-gpu.txt and decisions-cpu.txt:
# seven files, one fewer than the eight a device call of this workplace returns (a ninth is dropped).
# Needs nctl importable (PYTHONPATH=src will do).
#
#     bash tools/gpu.sh OUTDIR
set -u
out=${1:?usage: bash tools/gpu.sh OUTDIR}
mkdir -p "$out"
log="$out/log.txt"
export XLA_PYTHON_CLIENT_PREALLOCATE=false
{ nvidia-smi -L; python3 -c 'import jax, jaxlib, numpy; print("jax", jax.__version__, "jaxlib", jaxlib.__version__,
  "numpy", numpy.__version__, jax.devices())'; lscpu | grep "Model name"; } > "$log" 2>&1
tests="tests/core tests/test_learners.py"
pytest_args=(-p no:cacheprovider -o addopts="" -v --tb=short -rfE)
JAX_PLATFORMS=cpu timeout 240 python3 -m pytest "${pytest_args[@]}" -n 5 $tests > "$out/tests-cpu.txt" 2>&1 &
cpu=$!
timeout 240 python3 -m pytest "${pytest_args[@]}" -n 8 $tests > "$out/tests-gpu.txt" 2>&1
echo "tests on the GPU: rc $?" >> "$log"
wait $cpu
echo "tests on the CPU: rc $?" >> "$log"
timeout 120 python3 benchmarks/throughput.py > "$out/throughput.json" 2>>"$log"
echo "throughput: rc $?" >> "$log"
# a bounded-mode case of the literal test, step by step, to compare here with
# `python tools/trace_steps.py k3-binary-D7-L1-bounded2-1layer --compare trace-gpu.npz`
timeout 60 python3 tools/trace_steps.py k3-binary-D7-L1-bounded2-1layer --save "$out/trace-gpu.npz" >>"$log" 2>&1
echo "trace: rc $?" >> "$log"
# the pool decisions of its first 10 steps on the GPU and on this machine's CPU, from the same hyperplanes:
# the first line that differs names the decision that parted them
decisions=(tools/trace_steps.py k3-binary-D7-L1-bounded2-1layer --compare "$out/trace-gpu.npz" --decisions 10)
timeout 60 python3 "${decisions[@]}" > "$out/decisions-gpu.txt" 2>&1
echo "decisions on the GPU: rc $?" >> "$log"
JAX_PLATFORMS=cpu timeout 60 python3 "${decisions[@]}" > "$out/decisions-cpu.txt" 2>&1
echo "decisions on the CPU: rc $?" >> "$log"
