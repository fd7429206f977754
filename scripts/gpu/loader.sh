#!/usr/bin/env bash
# The loader's GPU checks and figures, for the H200 machine (Ubuntu 24.04, Python 3.12, torch 2.11,
# CUDA 13, none of Debian's -dev packages). Prepare with scripts/gpu/carry.sh on the build machine
# (a CUDA build in .devcarry/build and its shared libraries in .devcarry/lib), carry .devcarry, then:
#
#   scripts/gpu/loader.sh [BUILD]        (BUILD default: .devcarry/build, else build)
#
#   1. the C++ loader tests (CUDA tests must run: batches on the GPU equal the CPU's);
#   2. the Python loader tests with torch's CUDA (device="cuda");
#   3. examples/loader_resume.py on cuda;
#   4. bench/python/bench_loader.py --device cuda at ~2, ~9 and ~18 MB batches: delivered GB/s
#      beside the pinned host-to-device ceiling measured in the same run (torch pinned tensor
#      .to('cuda', non_blocking=True)) and the DataLoader baseline; start-up versus dataset size;
#      and `grist bench loader --device cuda` when the grist binary was carried; each run also has
#      CPU-seconds per billion tokens, and the ~9 MB run torchdata's StatefulDataLoader (when
#      installed) and a blend of 3 releases against one (target: <= 1.1x the cost; look for
#      "blend of 3 vs one release");
#   5. bench/python/gpu/loader_train_step.py: a GPT-2-small-sized bf16 training step (micro batch
#      4 x 4096) fed by grist.Loader vs a tensor already on the GPU (target: overhead <= 0.5 %) and
#      vs the DataLoader; look for "grist: +X % over a tensor already on the GPU".
# Environment: PYTHON (default python3), GRIST_GPU_OUT (default gpu-out) for the results.
set -euo pipefail
cd "$(dirname "$0")/../.."
DEFAULT_BUILD=build
[[ -d .devcarry/build ]] && DEFAULT_BUILD=.devcarry/build
BUILD=${1:-$DEFAULT_BUILD}
PY=${PYTHON:-python3}
OUT=${GRIST_GPU_OUT:-gpu-out}
mkdir -p "$OUT"
if [[ -d .devcarry/lib ]]; then
  export LD_LIBRARY_PATH="$(pwd)/.devcarry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
export PYTHONPATH="$(pwd)/$BUILD/python${PYTHONPATH:+:$PYTHONPATH}"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true

echo "== 1. C++ loader tests (CUDA tests must run, not skip)"
"$BUILD/tests/loader/loader_test" --gtest_brief=1 2>&1 | tee "$OUT/loader_test.txt"
if grep -q "SKIPPED.*Cuda" "$OUT/loader_test.txt"; then
  echo "loader.sh: CUDA tests were skipped: no usable GPU?" >&2
  exit 1
fi

echo "== 2. Python loader tests (torch CUDA)"
"$PY" -c 'import torch; print("torch", torch.__version__, "cuda", torch.cuda.is_available())'
"$PY" -m unittest discover -v -s tests/python -p 'test_loader*.py' 2>&1 | tee "$OUT/test_loader_py.txt"

echo "== 3. Resume example on cuda"
"$PY" examples/loader_resume.py --device cuda 2>&1 | tee "$OUT/loader_resume.txt"

echo "== 4. Benchmarks: delivered GB/s vs pinned H2D ceiling, DataLoader baseline, start-up"
# seq_len 4096, all fields = 28 bytes per token (+ cu_seqlens): micro batch 16 ~ 1.9 MB,
# 80 ~ 9.2 MB, 160 ~ 18.4 MB.
# The ~9 MB run also has torchdata's StatefulDataLoader and the blend of 3 releases (device time
# is scarce: the other two sizes run the DataLoader peer only).
for mb in 16 80 160; do
  extra=(--peers dataloader --blend 0)
  [[ $mb == 80 ]] && extra=(--peers dataloader,stateful --blend 3)
  "$PY" bench/python/bench_loader.py --device cuda --seq-len 4096 --samples 8192 \
    --micro-batch "$mb" --workers 0,4,8 --grist-workers 12 --prefetch 8 --seconds 2 "${extra[@]}" \
    --json "$OUT/bench_loader_cuda_mb$mb.json" 2>&1 | tee "$OUT/bench_loader_cuda_mb$mb.txt"
done
"$PY" bench/python/bench_loader.py --device cuda --seq-len 4096 --samples 2048 --micro-batch 8 \
  --workers 0 --repetitions 1 --startup-sizes 10000,100000,1000000,4000000 \
  --json "$OUT/bench_loader_startup.json" 2>&1 | tee "$OUT/bench_loader_startup.txt"
if [[ -x "$BUILD/grist" ]]; then
  "$BUILD/grist" bench loader --device cuda --workers 12 --baseline-workers 0,4,8 \
    --output "$OUT" 2>&1 | tee "$OUT/grist_bench_loader_cuda.txt"
fi
echo "== 5. Training-step overhead: GPT-2-small bf16, micro batch 4 x 4096"
"$PY" bench/python/gpu/loader_train_step.py --json "$OUT/loader_train_step.json" 2>&1 | tee "$OUT/loader_train_step.txt"
echo "loader.sh: done; results in $OUT/"
