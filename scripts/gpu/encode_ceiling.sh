#!/usr/bin/env bash
# `grist tokenize encode` on all the cores beside the host's own ceiling for the same work (issue
# 14). Per repetition and binary: one one-thread encode alone; N one-thread encodes of the same
# input as separate processes at once (N busy cores sharing nothing: what the host gives for this
# work); one N-thread encode. Prints the speed-ups over the one-thread encode, the N-thread
# encode's fraction of the processes' speed-up, and the N-thread run's phase line (start / model /
# inputs / encode / finish seconds, from binaries that print it). A second binary is measured
# interleaved with the first (A/B on one host). The token files of every run must be identical.
# Usage: scripts/gpu/encode_ceiling.sh MODEL GRIST [GRIST_B] -- INPUT...   (REPS=3, THREADS=nproc)
set -euo pipefail
MODEL=$1
shift
BINS=()
while [ "$1" != "--" ]; do BINS+=("$(realpath "$1")"); shift; done
shift
INPUTS=()
for i in "$@"; do INPUTS+=(--input "$i"); done
T=${THREADS:-$(nproc)}
REPS=${REPS:-3}
W=${TMPDIR:-/tmp}/grist-encode-ceiling
rm -rf "$W" && mkdir -p "$W"
now() { date +%s.%N; }
enc() {  # BINARY THREADS OUTPUT
  "$1" tokenize encode --quiet --model "$MODEL" "${INPUTS[@]}" --output "$3" --threads "$2"
}
echo "$(nproc) CPUs:$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2); $T threads; $REPS repetitions"
for rep in $(seq "$REPS"); do
  for g in "${BINS[@]}"; do
    name=$(basename "$g")
    t0=$(now); enc "$g" 1 "$W/one" >/dev/null; t1=$(now)
    for i in $(seq "$T"); do enc "$g" 1 "$W/p$i" >/dev/null & done
    wait
    t2=$(now)
    line=$(enc "$g" "$T" "$W/many" | sed -n 2p); t3=$(now)
    awk -v n="$name" -v r="$rep" -v T="$T" -v a="$t0" -v b="$t1" -v c="$t2" -v d="$t3" 'BEGIN {
      one = b - a; procs = c - b; many = d - c;
      printf "rep %d %s: 1 thread %.2f s; %d one-thread processes at once %.2f s -> %.2fx one; ", r, n, one, T, procs, T * one / procs;
      printf "--threads %d %.3f s -> %.2fx one, %.2f of the processes\n", T, many, one / many, (one / many) / (T * one / procs) }'
    [ -n "$line" ] && echo "  $line"
    for d in "$W"/p1 "$W"/many; do
      cmp -s "$d/tokens-00000-of-00001.bin" "$W/one/tokens-00000-of-00001.bin" &&
        cmp -s "$d/tokens-00000-of-00001.idx" "$W/one/tokens-00000-of-00001.idx" ||
        { echo "TOKENS DIFFER: $d" >&2; exit 1; }
    done
    if [ -f "$W/ref.bin" ]; then
      cmp -s "$W/ref.bin" "$W/one/tokens-00000-of-00001.bin" || { echo "TOKENS DIFFER: $name" >&2; exit 1; }
    else
      cp "$W/one/tokens-00000-of-00001.bin" "$W/ref.bin"
    fi
    rm -rf "$W"/p* "$W/one" "$W/many"
  done
done
echo "tokens identical across runs and binaries"
