#!/usr/bin/env bash
# dedup figures on the 16-core GPU machine (no GPU involved: what the 2-core build VM cannot show):
# MinHash signature MB/s per thread and the scaling of signatures and of the whole dedup with
# threads (1..16). Needs a build WITH benchmarks (scripts/gpu/carry.sh turns them off): e.g.
#   cmake -S . -B .devcarry/build-bench -G Ninja -DCMAKE_BUILD_TYPE=Release -DGRIST_BUILD_PYTHON=OFF
#   cmake --build .devcarry/build-bench --target grist      (then carry .devcarry)
# and on the GPU machine, from the repository root:
#   GRIST_BUILD_DIR=.devcarry/build-bench scripts/gpu/dedup.sh
# Environment: GRIST_BUILD_DIR (default build), GRIST_CORPUS_DIR (the shared corpus; without it the
# signature figures use generated text and the whole-corpus and memory figures are skipped),
# GRIST_GPU_OUT (default gpu-out).
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${GRIST_BUILD_DIR:-build}
OUT=${GRIST_GPU_OUT:-gpu-out}/dedup
mkdir -p "$OUT"
if [[ -d .devcarry/lib ]]; then export LD_LIBRARY_PATH="$(pwd)/.devcarry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"; fi
corpus=()
if [[ -n "${GRIST_CORPUS_DIR:-}" ]]; then corpus=(--corpus "$GRIST_CORPUS_DIR"); fi
date -u; nproc; uptime
echo "== grist bench dedup: 1 and $(nproc) threads"
"$BUILD/grist" bench dedup "${corpus[@]}" --threads 1 --threads "$(nproc)" --repetitions 3 --warmup 1 \
  --output "$OUT/figures" 2>&1 | tee "$OUT/bench.txt"
echo "== grist bench dedup: signatures and whole dedup vs threads"
"$BUILD/grist" bench dedup "${corpus[@]}" --sweep threads=1,2,4,8,16 --repetitions 2 --warmup 1 \
  --output "$OUT/sweep" 2>&1 | tee "$OUT/sweep.txt"
