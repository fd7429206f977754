#!/usr/bin/env bash
# Per-stage scaling of `grist build` on the GPU host's 16 cores (issue 14: no stage below 0.8x
# linear scaling from 1 to 16 threads), measured by `grist bench build --sweep threads=...`:
# Wikinews + Wikipedia-2015 with the Mistral 32k model given (scripts/gpu/lib.sh), built at 1, 2,
# 4, 8 and 16 threads, each stage timed from the build's report (clean, dedup and each dedup stage,
# tokenize, pack+shard), Amdahl's law fitted per stage.
# Look for, in $OUT/scaling.txt:
#   - "Scaling per stage, threads 1 to 16": per stage its seconds at 1 and 16 threads, serial
#     fraction, predicted speedup and efficiency at 16; "**below**" marks a stage under 0.8x linear
#     and the line after the table names them (the target: "No stage below 0.8x linear"; a stage
#     under 2% of the build, such as copying the given tokenizer, is shown but "not judged");
#   - "Release bytes identical at threads 1, 2, 4, 8, 16" (a difference makes the bench exit 1);
#   - the "build end to end" table (MB/s at each count; issue 14 targets >= 60 MB/s at 16).
# Without ../shared/corpus it sweeps the bench's default input (a 32 MiB sample of .demo/corpus,
# tokenizer trained on it) instead. About 3 minutes per repetition on the GPU host.
# Usage: scripts/gpu/scaling.sh [GRIST] [CORPUS]  (defaults: build/grist, ../shared/corpus).
# Environment: GRIST_SCALING_THREADS (default 1,2,4,8,16), GRIST_SCALING_REPETITIONS (default 1).
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/gpu/lib.sh
G=$(realpath "${1:-build/grist}")
C=${2:-../shared/corpus}
[ -x "$G" ] || { echo "$G missing: build first" >&2; exit 1; }
OUT=${GRIST_GPU_OUT:-gpu-out}/scaling
rm -rf "$OUT" && mkdir -p "$OUT"
OUT=$(realpath "$OUT")
echo "== grist bench build --sweep threads=${GRIST_SCALING_THREADS:-1,2,4,8,16} ($(nproc) CPUs:$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2))"
config=()
MODEL=$C/tokenizers/mistral-v1-spm-32k/tokenizer.model.v1
if [[ -d $C/wikinews-en && -d $C/wikipedia-en-2015 && -f $MODEL ]]; then
  C=$(realpath "$C")
  write_corpus_config "$OUT/corpus.toml" "$C" "$(realpath "$MODEL")"
  config=(--config "$OUT/corpus.toml")
else
  echo "note: $C lacks Wikinews, Wikipedia-2015 or the Mistral model; sweeping the default input" >&2
fi
"$G" bench build "${config[@]}" --sweep "threads=${GRIST_SCALING_THREADS:-1,2,4,8,16}" \
  --repetitions "${GRIST_SCALING_REPETITIONS:-1}" --warmup 0 --work "$OUT/work" \
  --output "$OUT/report" --quiet 2>&1 | tee "$OUT/scaling.txt"
rc=${PIPESTATUS[0]}
rm -rf "$OUT/work"
exit "$rc"
