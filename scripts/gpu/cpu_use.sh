#!/usr/bin/env bash
# Where a stage's time goes at 16 threads on the GPU host (issue 14: clean and dedup below 0.8 of
# the host's own ceiling): `grist clean` and `grist dedup` of Wikinews + Wikipedia-2015 at 1 and N
# threads, each run's wall time beside its CPU time (user + system, every thread). At N threads,
# CPU / wall near N means the threads are busy and each is slower than alone (the host: shared
# caches, memory, clock); well under N means they wait (a serial part, an uneven split, a queue).
# CPU at N over CPU at 1 says how much more work the same input costs on N threads.
# Usage: scripts/gpu/cpu_use.sh [GRIST] [CORPUS] (defaults: build/grist, ../shared/corpus).
# Environment: GRIST_CPU_THREADS (default: nproc), GRIST_CPU_REPETITIONS (default 3).
set -euo pipefail
cd "$(dirname "$0")/../.."
G=$(realpath "${1:-build/grist}")
C=$(realpath "${2:-../shared/corpus}")
N=${GRIST_CPU_THREADS:-$(nproc)}
REPS=${GRIST_CPU_REPETITIONS:-3}
OUT=${GRIST_GPU_OUT:-gpu-out}/cpu_use
rm -rf "$OUT" && mkdir -p "$OUT"
inputs=("$C/wikinews-en" "$C/wikipedia-en-2015")
echo "== wall and CPU seconds, 1 and $N threads, $REPS repetitions ($(nproc) CPUs:$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2))"
# run LABEL THREADS CMD...: one timed run (GNU time's format is not available everywhere: bash's
# `times` would count only waited children, so the CPU time comes from /proc/self/stat of a
# wrapper shell: the children's utime + stime after the command).
run() {
  local label=$1 t=$2
  shift 2
  local t0 t1
  t0=$(date +%s.%N)
  "$@" >/dev/null 2>"$OUT/err.txt" || { cat "$OUT/err.txt"; return 1; }
  t1=$(date +%s.%N)
  # Fields 16 and 17 of /proc/self/stat: cutime and cstime of this shell (waited-for children).
  local stat ticks me=$BASHPID  # this subshell (inside $(...) BASHPID would be another)
  stat=$(cat "/proc/$me/stat")
  ticks=$(getconf CLK_TCK)
  awk -v s="$stat" -v a="$t0" -v b="$t1" -v hz="$ticks" -v l="$label" -v t="$t" 'BEGIN {
    split(s, f, " "); cpu = (f[16] + f[17]) / hz; wall = b - a;
    printf "%-8s threads %2d  wall %6.3f s  cpu %7.3f s  cpu/wall %5.2f\n", l, t, wall, cpu, cpu / wall }'
}
for rep in $(seq "$REPS"); do
  for t in 1 "$N"; do
    # Each measurement in its own subshell, so its children's CPU time starts from zero.
    ( run clean "$t" "$G" clean --input "${inputs[@]}" --output "$OUT/clean" --threads "$t" --quiet )
    parts=("$OUT"/clean/part-*.jsonl.zst)  # the kept documents, as `grist build` passes them on
    ( run dedup "$t" "$G" dedup -i "${parts[@]}" -o "$OUT/dedup" --threads "$t" --quiet --keep-work )
    for st in signatures buckets filter; do
      ( run "d:$st" "$t" "$G" dedup --stage "$st" -i "${parts[@]}" -o "$OUT/dedup" --threads "$t" --quiet )
    done
  done
done 2>&1 | tee "$OUT/cpu_use.txt"
rm -rf "$OUT/clean" "$OUT/dedup"
