#!/usr/bin/env bash
# Release-builder figures on a machine with many cores (the 16-core GPU host):
#   1. `grist bench tokenize` at 4, 8 and 16 threads against spm_encode measured in the same run
#      (one process alone x threads, and threads processes at once);
#   2. `grist build` of Wikinews + Wikipedia-2015 (clean -> dedup -> tokenize -> pack -> shard, with
#      the Mistral 32k model given, so no tokenizer training) at 4 and 16 threads: the per-stage
#      summary tables, and the two releases compared byte for byte.
# Usage: scripts/gpu/release.sh [GRIST] [CORPUS]  (defaults: build/grist, ../shared/corpus).
# Needs spm_encode on PATH for the peers. Output under $OUT (default /tmp).
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/gpu/lib.sh
G=$(realpath "${1:-build/grist}")
C=$(realpath "${2:-../shared/corpus}")
[ -x "$G" ] || { echo "$G missing: build first" >&2; exit 1; }
command -v spm_encode >/dev/null || echo "note: spm_encode not on PATH; the peer columns will be empty" >&2
OUT=${OUT:-/tmp}/grist-release-gpu
rm -rf "$OUT" && mkdir -p "$OUT"
MODEL=$C/tokenizers/mistral-v1-spm-32k/tokenizer.model.v1
echo "== tokenize scaling ($(nproc) CPUs: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2))"
for t in ${GRIST_TOKENIZE_THREADS:-4 8 16}; do
  "$G" bench tokenize --threads "$t" --max-bytes "${GRIST_TOKENIZE_BYTES:-24000000}" --repetitions 3 \
    --input "$C/wikinews-en" --model "$MODEL" --work "$OUT/work-t$t" --output "$OUT/tokenize-t$t" \
    | sed -n '/^| figure/,/^$/p'
done
write_corpus_config "$OUT/corpus.toml" "$C" "$MODEL"
for t in ${GRIST_BUILD_THREADS:-4 16}; do
  echo "== grist build, --threads $t"
  "$G" build --config "$OUT/corpus.toml" --output "$OUT/rel-t$t" --threads "$t" --quiet
done
set -- ${GRIST_BUILD_THREADS:-4 16}
if [ $# -ge 2 ]; then
  compare_releases "$OUT/rel-t$1" "$OUT/rel-t$2" "--threads $1 and $2" || exit 1
fi
