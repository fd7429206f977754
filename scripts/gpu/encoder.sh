#!/usr/bin/env bash
# grist's BPE encoder and the whole build on the GPU machine's 16 cores (issue 14):
#   1. `grist bench tokenize` at 1, 2, 4, 8, 16 threads on Wikinews with the Mistral 32k model: each
#      run prints grist's encoder beside the SentencePiece library and the Python module's
#      encode(list, num_threads=T) at 1 and T threads (rows "encoder alone ..."), and
#      `grist tokenize encode` end to end beside spm_encode. Look for: "encoder alone, 1 thread"
#      ratio >= 3x both peers; end-to-end MB/s at T threads >= 0.9 x T x the 1-thread figure.
#   2. `grist tokenize encode` end to end at 1..16 threads with --engine grist and --engine
#      sentencepiece: wall time, MB/s, peak RSS, and the token files compared byte for byte
#      (they must be identical: the two engines give the same ids).
#   3. `grist build` of Wikinews + Wikipedia-2015 with the Mistral model at 1, 4 and 16 threads:
#      per-stage tables, MB/s end to end (target >= 60 MB/s at 16), peak RSS, and the three
#      releases compared byte for byte (all but reports/).
# Usage: scripts/gpu/encoder.sh [GRIST] [CORPUS]  (defaults: build/grist, ../shared/corpus).
# The Python peer needs a python3 with sentencepiece (PATH or /usr/bin/python3). Output under $OUT.
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/gpu/lib.sh
G=$(realpath "${1:-build/grist}")
C=$(realpath "${2:-../shared/corpus}")
[ -x "$G" ] || { echo "$G missing: build first" >&2; exit 1; }
OUT=${OUT:-/tmp}/grist-encoder-gpu
rm -rf "$OUT" && mkdir -p "$OUT"
# Runs a command, then writes "peak RSS N KiB" and its wall seconds to FILE (python3 instead of
# /usr/bin/time and bc, which the GPU machine's image may lack).
measure() {
  local file=$1; shift
  python3 - "$file" "$@" <<'PY'
import resource, subprocess, sys, time
t = time.perf_counter()
rc = subprocess.run(sys.argv[2:]).returncode
wall = time.perf_counter() - t
with open(sys.argv[1], "w") as f:
    f.write("peak RSS %d KiB\n" % resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
with open(sys.argv[1] + ".wall", "w") as f:
    f.write("%.3f\n" % wall)
sys.exit(rc)
PY
}
MODEL=$C/tokenizers/mistral-v1-spm-32k/tokenizer.model.v1
echo "== encoder scaling ($(nproc) CPUs: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2))"
for t in ${GRIST_ENCODER_THREADS:-1 2 4 8 16}; do
  echo "-- bench tokenize --threads $t"
  "$G" bench tokenize --threads "$t" --max-bytes "${GRIST_TOKENIZE_BYTES:-24000000}" --repetitions 3 \
    --input "$C/wikinews-en" --model "$MODEL" --work "$OUT/work-t$t" --output "$OUT/bench-t$t" \
    | sed -n '/^| figure/,/^$/p;/^grist engine/p'
done
echo "== grist tokenize encode end to end (Wikinews + Wikipedia-2015)"
for engine in grist sentencepiece; do
  for t in 1 2 4 8 16; do
    [ "$engine" = sentencepiece ] && [ "$t" != 1 ] && [ "$t" != 16 ] && continue
    measure "$OUT/enc-$engine-t$t.rss" \
      "$G" tokenize encode --engine "$engine" --model "$MODEL" --threads "$t" --quiet \
      --input "$C/wikinews-en" --input "$C/wikipedia-en-2015" --output "$OUT/enc-$engine-t$t" \
      | sed "s/^/$engine t=$t: /"
    cat "$OUT/enc-$engine-t$t.rss"
  done
done
for d in "$OUT"/enc-*-t*/; do
  if ! cmp -s "$d/tokens-00000-of-00001.bin" "$OUT/enc-grist-t1/tokens-00000-of-00001.bin" ||
     ! cmp -s "$d/tokens-00000-of-00001.idx" "$OUT/enc-grist-t1/tokens-00000-of-00001.idx"; then
    echo "token files DIFFER: $d vs enc-grist-t1" && exit 1
  fi
done
echo "token files: identical for every engine and thread count"
write_corpus_config "$OUT/corpus.toml" "$C" "$MODEL"
for t in 1 4 16; do
  echo "== grist build, --threads $t"
  measure "$OUT/build-t$t.rss" \
    "$G" build --config "$OUT/corpus.toml" --output "$OUT/rel-t$t" --threads "$t" --quiet
  w=$(cat "$OUT/build-t$t.rss.wall")
  echo "build --threads $t: $w s, $(python3 -c "print(f'{94 / $w:.1f}')") MB/s (94 MB in); $(cat "$OUT/build-t$t.rss")"
done
for t in 4 16; do
  compare_releases "$OUT/rel-t1" "$OUT/rel-t$t" "--threads 1 and $t" || exit 1
done
