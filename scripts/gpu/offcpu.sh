#!/usr/bin/env bash
# Where a grist command's threads wait: records its scheduler switches with their stacks and
# prints the sleeping thread-seconds by site (scripts/gpu/offcpu.py), beside `perf stat`'s CPU
# time, context switches, page faults and memory-map calls. The GPU machine has no perf: carry
# Debian's (/usr/bin/perf and the libraries ldd lists for it that the machine lacks) in PERF_DIR
# (perf, lib/), and an unstripped grist so that the stacks get names.
# Usage: PERF_DIR=DIR scripts/gpu/offcpu.sh OUT_DIR grist ARGS...   (e.g. clean --input ... --threads 16)
set -euo pipefail
OUT=$1
shift
P=${PERF_DIR:?set PERF_DIR to a folder holding perf and its lib/}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$P/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
"$@" >/dev/null 2>&1  # warm the page cache
"$P/perf" stat -e task-clock,context-switches,cpu-migrations,page-faults,syscalls:sys_enter_futex,syscalls:sys_enter_mprotect,syscalls:sys_enter_mmap,syscalls:sys_enter_munmap,syscalls:sys_enter_madvise \
  "$@" > "$OUT/stat.txt" 2>&1
"$P/perf" record -m 4096 -e sched:sched_switch --call-graph dwarf,4096 -o "$OUT/switch.data" "$@" > /dev/null 2>&1
"$P/perf" report -i "$OUT/switch.data" --stats 2>/dev/null | grep -iE "lost|LOST" > "$OUT/lost.txt" || true
"$P/perf" script -i "$OUT/switch.data" -F tid,time,trace,ip,sym 2>/dev/null | gzip > "$OUT/switch_script.txt.gz"
rm -f "$OUT/switch.data"
python3 "$(dirname "$0")/offcpu.py" "$OUT/switch_script.txt.gz" | tee "$OUT/offcpu.txt"
