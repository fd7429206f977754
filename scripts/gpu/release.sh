#!/usr/bin/env bash
# Tokenize scaling on a machine with many cores (the 16-core GPU host): `grist bench tokenize` at
# 1, 4, 8 and 16 threads against spm_encode measured in the same run. Needs build/grist (carried),
# SentencePiece's shared library and spm_encode (Ubuntu: apt-get install sentencepiece), and the
# shared corpus at ../shared/corpus. Prints one Markdown table per thread count.
set -euo pipefail
cd "$(dirname "$0")/../.."
G=build/grist
[ -x "$G" ] || { echo "build/grist missing: build first" >&2; exit 1; }
command -v spm_encode >/dev/null || echo "note: spm_encode not on PATH; the peer column will be empty" >&2
OUT=${OUT:-/tmp}/grist-bench-tokenize
for t in 1 4 8 16; do
  "$G" bench tokenize --threads "$t" --max-bytes 64000000 --repetitions 3 --output "$OUT/t$t"
done
