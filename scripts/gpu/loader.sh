#!/usr/bin/env bash
# The loader's GPU checks and figures, for the H200 machine (Ubuntu 24.04, Python 3.12, torch 2.11,
# CUDA 13, none of Debian's -dev packages). Build here first, then carry the build folder.
#
#   On the build machine:  scripts/gpu/loader.sh bundle [BUILD]
#       copies the shared libraries the loader binaries need (Debian's Abseil, simdjson, ...) into
#       BUILD/gpu-libs, so the carried build runs where those packages are absent.
#   On the GPU machine:    scripts/gpu/loader.sh [BUILD]
#       1. the C++ loader tests (CUDA tests run: batches on the GPU equal the CPU's);
#       2. the Python loader tests with torch's CUDA (device="cuda");
#       3. examples/loader_resume.py on cuda;
#       4. bench/python/bench_loader.py --device cuda at ~2, ~9 and ~18 MB batches: delivered GB/s
#          beside the pinned host-to-device ceiling measured in the same run (torch pinned tensor
#          .to('cuda', non_blocking=True)) and the DataLoader baseline; start-up versus dataset size.
# Environment: PYTHON (default python3), GRIST_GPU_OUT (default gpu-out) for the JSON results.
set -euo pipefail
cd "$(dirname "$0")/../.."
MODE=run
if [[ "${1:-}" == bundle ]]; then MODE=bundle; shift; fi
BUILD=${1:-build}

if [[ $MODE == bundle ]]; then
  mkdir -p "$BUILD/gpu-libs"
  for bin in "$BUILD/tests/loader/loader_test" "$BUILD/python/grist/libgrist_capi.so" "$BUILD/grist"; do
    [[ -e $bin ]] || continue
    ldd "$bin" | awk '/=> \//{print $3}' | while read -r lib; do
      case "$(basename "$lib")" in
        libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|libstdc++.so*|libgcc_s.so*|ld-linux*) ;;
        *) cp -uL "$lib" "$BUILD/gpu-libs/" ;;
      esac
    done
  done
  echo "bundled $(ls "$BUILD/gpu-libs" | wc -l) libraries into $BUILD/gpu-libs"
  exit 0
fi

PY=${PYTHON:-python3}
OUT=${GRIST_GPU_OUT:-gpu-out}
mkdir -p "$OUT"
if [[ -d "$BUILD/gpu-libs" ]]; then
  export LD_LIBRARY_PATH="$(pwd)/$BUILD/gpu-libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
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
"$PY" -m unittest -v tests/python/test_loader.py 2>&1 | tee "$OUT/test_loader_py.txt"

echo "== 3. Resume example on cuda"
"$PY" examples/loader_resume.py --device cuda 2>&1 | tee "$OUT/loader_resume.txt"

echo "== 4. Benchmarks: delivered GB/s vs pinned H2D ceiling, DataLoader baseline, start-up"
# seq_len 4096, all fields = 28 bytes per token (+ cu_seqlens): micro batch 16 ~ 1.9 MB,
# 80 ~ 9.2 MB, 160 ~ 18.4 MB.
for mb in 16 80 160; do
  "$PY" bench/python/bench_loader.py --device cuda --seq-len 4096 --samples 8192 \
    --micro-batch "$mb" --workers 0,4,8 --grist-workers 8 --prefetch 6 --seconds 2 \
    --json "$OUT/bench_loader_cuda_mb$mb.json" 2>&1 | tee "$OUT/bench_loader_cuda_mb$mb.txt"
done
"$PY" bench/python/bench_loader.py --device cuda --seq-len 4096 --samples 2048 --micro-batch 8 \
  --workers 0 --repetitions 1 --startup-sizes 10000,100000,1000000,4000000 \
  --json "$OUT/bench_loader_startup.json" 2>&1 | tee "$OUT/bench_loader_startup.txt"
if [[ -x "$BUILD/grist" ]]; then
  "$BUILD/grist" bench loader --device cuda --workers 8 --baseline-workers 0,4,8 \
    --output "$OUT" 2>&1 | tee "$OUT/grist_bench_loader_cuda.txt"
fi
echo "loader.sh: done; results in $OUT/"
