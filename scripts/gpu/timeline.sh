#!/usr/bin/env bash
# Where a grist command's CPUs go over time: samples every CPU at HZ with stacks and prints the
# on-CPU timeline (scripts/gpu/timeline.py: per bin the CPUs busy, threads, component mix, top
# leaves), beside `perf stat`'s CPU time and faults. The run is repeated once first to warm the
# page cache. The GPU machine has no perf: carry Debian's (/usr/bin/perf and the libraries ldd
# lists for it that the machine lacks) in PERF_DIR (perf, lib/); with perf on the PATH (the dev VM)
# PERF_DIR may be left unset. An unstripped grist gives the stacks names. PREP, if set, is a shell
# command run before each of the three runs (e.g. removing a stage record so that the stage runs
# again: PREP='rm -f r.work/stages/pack.json').
# Usage: [PERF_DIR=DIR] [HZ=4999] [BIN_MS=10] [PREP=CMD] scripts/gpu/timeline.sh OUT_DIR grist ARGS...
#   e.g. scripts/gpu/timeline.sh out/t16 build/grist build --config c.toml --output r --threads 16
set -euo pipefail
OUT=$1
shift
HZ=${HZ:-4999}
PERF=perf
if [[ -n ${PERF_DIR:-} ]]; then
  export LD_LIBRARY_PATH=$PERF_DIR/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  PERF=$PERF_DIR/perf
fi
mkdir -p "$OUT"
prep() { if [[ -n ${PREP:-} ]]; then bash -c "$PREP"; fi; }
prep
"$@" >/dev/null 2>&1 || true  # warm the page cache
prep
"$PERF" stat -e task-clock,context-switches,cpu-migrations,page-faults "$@" > "$OUT/stat.txt" 2>&1
prep
"$PERF" record -F "$HZ" -g -o "$OUT/cpu.data" "$@" > "$OUT/run.txt" 2>&1
"$PERF" script -i "$OUT/cpu.data" -F tid,time,ip,sym 2>/dev/null | gzip > "$OUT/cpu_script.txt.gz"
rm -f "$OUT/cpu.data"
python3 "$(dirname "$0")/timeline.py" "$OUT/cpu_script.txt.gz" "$HZ" "${BIN_MS:-10}" \
  > "$OUT/timeline.txt"
grep -E "task-clock|elapsed|page-faults" "$OUT/stat.txt" || true
head -2 "$OUT/timeline.txt"
echo "timeline: $OUT/timeline.txt"
