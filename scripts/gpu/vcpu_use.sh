#!/usr/bin/env bash
# Whether a stage's threads wait or the machine is short of CPU: the whole machine's busy, idle and
# steal time (/proc/stat) around `grist clean` at N threads, N one-thread cleans at once (the
# host's own ceiling) and one thread. Half-idle vCPUs at N threads with no steal mean grist's
# threads wait; steal means the hypervisor runs others on our vCPUs.
# Usage: scripts/gpu/vcpu_use.sh [GRIST] [INPUT...]  (defaults: build/grist,
#        ../shared/corpus/wikipedia-en-2015). Environment: GRIST_VCPU_THREADS (default nproc),
#        GRIST_VCPU_REPETITIONS (default 3).
set -euo pipefail
cd "$(dirname "$0")/../.."
G=$(realpath "${1:-build/grist}")
shift || true
inputs=("$@")
[[ ${#inputs[@]} -gt 0 ]] || inputs=(../shared/corpus/wikipedia-en-2015)
N=${GRIST_VCPU_THREADS:-$(nproc)}
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
cpu() { awk '/^cpu /{print $2+$3+$4+$7+$8, $5+$6, $9}' /proc/stat; }  # busy, idle+iowait, steal
show() {  # LABEL BEFORE AFTER WALL
  read -r b0 i0 s0 <<< "$2"; read -r b1 i1 s1 <<< "$3"
  awk -v l="$1" -v b=$((b1-b0)) -v i=$((i1-i0)) -v s=$((s1-s0)) -v w="$4" -v hz="$(getconf CLK_TCK)" 'BEGIN {
    t = b + i + s; printf "%-34s wall %.3f s  busy %.2f s  idle %.2f s  steal %.2f s (%.0f%% of the vCPU time)\n", l, w, b/hz, i/hz, s/hz, 100*s/t }'
}
timed() {  # LABEL CMD...: one run between two readings of /proc/stat
  local label=$1 a b s e
  shift
  a=$(cpu); s=$(date +%s.%N)
  "$@" >/dev/null 2>&1
  e=$(date +%s.%N); b=$(cpu)
  show "$label" "$a" "$b" "$(echo "$e $s" | awk '{print $1-$2}')"
}
many() { for k in $(seq "$N"); do "$G" clean --input "${inputs[@]}" --output "$W/p$k" --threads 1 --quiet >/dev/null 2>&1 & done; wait; }
"$G" clean --input "${inputs[@]}" --output "$W/warm" --threads "$N" --quiet >/dev/null 2>&1
echo "== /proc/stat around grist clean ($(nproc) vCPUs:$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2))"
for r in $(seq "${GRIST_VCPU_REPETITIONS:-3}"); do
  timed "clean, $N threads" "$G" clean --input "${inputs[@]}" --output "$W/cN" --threads "$N" --quiet
  timed "clean, $N one-thread processes" many
  timed "clean, 1 thread" "$G" clean --input "${inputs[@]}" --output "$W/c1" --threads 1 --quiet
done
