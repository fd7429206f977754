#!/usr/bin/env bash
# The week-13 pipeline benches on a machine with many cores (the 16-core GPU host), for the lab's
# reference figures: `grist bench build` of configs/v1.0.toml at 1 and 16 threads (per-stage
# time and MB/s against the clean stage alone), `grist bench pack` (concat and bestfit against
# memcpy and numpy), and `grist bench all --quick` (the overview a student runs first).
#
#   scripts/gpu/labs.sh [BUILD_DIR]      # default .devcarry/build (scripts/gpu/pack_build.sh)
#
# Needs the demo corpus in .demo/corpus (run scripts/make_demo_corpus.sh .demo/corpus on the Debian
# machine and carry .demo: the GPU host has no bible-kjv/dict-gcide packages). Without
# ../shared/corpus the benches use the demo corpus and a tokenizer trained on it. Results go to
# $GRIST_GPU_OUT/labs (default gpu-out/labs).
set -uo pipefail
cd "$(dirname "$0")/../.."
B=${1:-.devcarry/build}
G="$B/grist"
OUT=${GRIST_GPU_OUT:-gpu-out}/labs
[[ -x "$G" ]] || { echo "labs.sh: $G missing (scripts/gpu/pack_build.sh)" >&2; exit 1; }
[[ -d .demo/corpus ]] || { echo "labs.sh: .demo/corpus missing (make it here and carry .demo)" >&2; exit 1; }
mkdir -p "$OUT"
nproc
for t in 1 16; do
  echo "== grist bench build, configs/v1.0.toml, $t threads"
  "$G" bench build --config configs/v1.0.toml --threads "$t" --warmup 0 --repetitions 2 \
    --output "$OUT/build-t$t" --quiet 2>&1 | grep -E '^\||release|^- '
done
echo "== grist bench pack"
"$G" bench pack --output "$OUT/pack" --quiet 2>&1 | grep -E '^\||^- |samples of'
echo "== grist bench all --quick"
"$G" bench all --quick --skip loader,ckpt --output "$OUT/all" 2>&1 | tail -12
