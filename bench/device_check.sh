#!/bin/bash
# The GPU checks of issue 28 and of GPU health, as ONE prepared run on a lent GPU machine (the `device`
# tool: about 15 minutes a session, start included). Each step has its own time limit, and its output is
# kept under $OUT (or ./device-out) even when a later step runs out of time.
#   bash bench/device_check.sh            (from the repository root; python3 there holds a CUDA torch)
# Wheels the image lacks (orjson, xxhash, plotly for its Python) travel in .whl/ (see bench/README.md).
set -u
OUT=${OUT:-device-out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site || exit 1
fi
export PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH}
{ nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit,clocks.max.sm --format=csv; nproc;
  python3 -c 'import torch; print("torch", torch.__version__, torch.cuda.get_device_name())'; } 2>&1 | tee "$OUT/machine.txt"
step() {  # step NAME LIMIT_S COMMAND...
  local name=$1 limit=$2; shift 2
  echo "=== $name ($(date -u +%T), limit ${limit}s): $*"
  timeout "$limit" "$@" > "$OUT/$name.txt" 2>&1; echo "rc $?" >> "$OUT/$name.txt"
  grep -v -E '^(USDT|STAGE:|\[W)' "$OUT/$name.txt" | tail -n 14
}
step overhead_gpt2 200 python3 bench/overhead.py --model gpt2-small --device cuda --rounds 11 --steps 30
step overhead_tiny 110 python3 bench/overhead.py --device cuda --rounds 11 --steps 30
step cuda_paths 60 python3 bench/cuda_paths.py
step gpu_health 60 python3 bench/gpu_health_real.py
step checkpoint 120 python3 bench/checkpoint_speed.py --mb 300 --rounds 3 --dir /tmp
echo "=== done $(date -u +%T)"
