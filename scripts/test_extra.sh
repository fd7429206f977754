#!/usr/bin/env bash
# The bounded extra checks that scripts/test.sh runs after the main suite:
#   1. one clang build with AddressSanitizer + UndefinedBehaviorSanitizer (+ libFuzzer coverage
#      instrumentation) of the libraries, the GoogleTest suites and the fuzz targets;
#   2. ctest of every GoogleTest suite that needs no GPU under the sanitizers: every test
#      executable with one of the SUITES labels, from CMake's list (build-asan/tests/test_targets.txt)
#      (capi_test calls the Python package's C ABI in the sanitized libgrist_capi.so as Python
#      does; the `grist` binary the CLI tests run is the sanitized one; shared-corpus tests skipped;
#      the tests of GRIST_SANITIZER_EXCLUDE run in the main suite only; docs/reliability.md
#      records how long it takes);
#   3. each libFuzzer target for a bounded time (GRIST_FUZZ_SECONDS, default 60, for the record
#      readers; GRIST_FUZZ_TRUSTED_SECONDS, default 20, for the readers of grist's own files), from
#      a seed corpus of valid inputs made here;
#   4. ThreadSanitizer builds and runs of the loader and checkpoint-writer suites and the record
#      writer's tests (scripts/tsan.sh; GRIST_SKIP_TSAN=1 skips).
# Environment: GRIST_ASAN_BUILD_DIR (default build-asan), GRIST_JOBS, GRIST_FUZZ_SECONDS,
# GRIST_SANITIZER_LABELS (ctest -L regex, default: every suite), GRIST_SANITIZER_EXCLUDE (ctest -E
# regex of tests too slow under the sanitizers, or whose memory bound ASan's shadow memory breaks;
# they run in the main suite).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${GRIST_ASAN_BUILD_DIR:-build-asan}
JOBS=${GRIST_JOBS:-$(nproc)}
SECONDS_EACH=${GRIST_FUZZ_SECONDS:-60}
# Stage headers show the time since test.sh started (GRIST_TEST_T0), or since this script did.
export GRIST_TEST_T0=${GRIST_TEST_T0:-$(date +%s)}
stage() { local t=$(($(date +%s) - GRIST_TEST_T0)); printf '== [%dm%02ds] %s\n' $((t / 60)) $((t % 60)) "$*"; }
SUITES=(common clean dedup tokenize pack shard release loader ckptio bench labs capi cli)
LABELS=${GRIST_SANITIZER_LABELS:-$(IFS='|'; echo "${SUITES[*]}")}
EXCLUDE=${GRIST_SANITIZER_EXCLUDE:-HundredMegabyte|ByteRangeSplitsMatchWholeFileRead|HugeDocumentAndInvalidUtf8|CrashConsistency|DedupMemoryLimit}

if ! command -v clang++ >/dev/null; then
  echo "test_extra: clang++ not found (scripts/setup.sh installs it)" >&2
  exit 1
fi

stage "ASan+UBSan build (clang) in $BUILD"
# With the test hooks, which the crash-point tests need (and fail without: GRIST_REQUIRE_TEST_HOOKS).
export GRIST_REQUIRE_TEST_HOOKS=1
CC=clang CXX=clang++ CXXFLAGS="-fno-sanitize-recover=all" cmake -S . -B "$BUILD" -G Ninja \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGRIST_SANITIZE=address,undefined,fuzzer-no-link \
  -DGRIST_BUILD_FUZZERS=ON -DGRIST_BUILD_PYTHON=ON -DGRIST_TEST_HOOKS=ON >/dev/null
# Every test executable with a label that -L selects (CMake lists each with its labels in
# tests/test_targets.txt): an executable left unbuilt shows in ctest as one <target>_NOT_BUILT
# test without labels, which `ctest -L` would skip without a word.
mapfile -t tests < <(awk -v re="$LABELS" '{ n = split($2, ls, ",");
  for (i = 1; i <= n; i++) if (ls[i] ~ re) { print $1; break } }' "$BUILD/tests/test_targets.txt")
if (( ${#tests[@]} == 0 )); then
  echo "test_extra: no test executable has a label matching '$LABELS'" >&2
  exit 1
fi
echo "test executables: ${tests[*]}"
cmake --build "$BUILD" -j "$JOBS" --target fuzz_records fuzz_cleaner grist "${tests[@]}"
not_built=$(cd "$BUILD" && ctest -N | grep -o '[A-Za-z0-9_]*_NOT_BUILT' || true)
for t in $not_built; do
  if [[ " ${tests[*]} " == *" ${t%_NOT_BUILT} "* ]]; then
    echo "test_extra: ${t%_NOT_BUILT} was built but ctest still lists it as $t" >&2
    exit 1
  fi
done

stage "ctest -L '$LABELS' under ASan+UBSan"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
(cd "$BUILD" && GRIST_CORPUS_DIR=/nonexistent ctest --output-on-failure -j "$JOBS" -L "$LABELS" -E "$EXCLUDE" --timeout 600)

# The readers of what grist writes and reads back (manifests, shards, MMIDIDX, safetensors headers,
# dedup's intermediate files, configs): each for GRIST_FUZZ_TRUSTED_SECONDS (default 20), from
# seeds each target writes with grist's own writers (GRIST_FUZZ_WRITE_SEEDS).
TRUSTED=(fuzz_config fuzz_release_manifest fuzz_ckpt_manifest fuzz_safetensors fuzz_mmidx fuzz_shard
         fuzz_dedup_files)
TRUSTED_SECONDS=${GRIST_FUZZ_TRUSTED_SECONDS:-20}
cmake --build "$BUILD" -j "$JOBS" --target "${TRUSTED[@]}"
stage "libFuzzer, ${SECONDS_EACH}s per target"
SEEDS=$(mktemp -d)
trap 'rm -rf "$SEEDS"' EXIT
mkdir -p "$SEEDS/records" "$SEEDS/cleaner"
jsonl='{"text":"Hello, world.\nSecond line.","id":1}
{"text":"caf\u00e9 \u2014 na\u00efve","meta":{"a":[1,2]}}
{"bad json
{"id":2}
{"text":5}
'
# Records as grist writes them (NextLineOrDoc gives these as lines): escapes, meta, provenance.
grist_jsonl='{"text":"A line.\nTab\there, quote \" and \\ and \u001b.","meta":{"id":"7","n":[1,{"b":null}]},"grist":{"src":"corpus/a.jsonl","line":3}}
{"text":"café","meta":{},"grist":{"src":"b \"q\".jsonl.zst","line":0}}
{"text":"x","meta":{"url":"http://e/"},"grist":{"src":"c","line":12},"reasons":["r"]}
'
txt=$'First block of text.\nStill first.\n\nSecond block.\r\n\r\nThird \xff block.'
printf '\x00%s' "$jsonl" >"$SEEDS/records/jsonl"
printf '\x08%s' "$jsonl" >"$SEEDS/records/jsonl_split"
printf '\x00%s' "$grist_jsonl" >"$SEEDS/records/grist"
{ printf '\x02'; printf '%s' "$grist_jsonl" | zstd -q -c; } >"$SEEDS/records/grist_zst"
{ printf '\x01'; printf '%s' "$jsonl" | gzip -c -n; } >"$SEEDS/records/gz"
{ printf '\x02'; printf '%s' "$jsonl" | zstd -q -c; } >"$SEEDS/records/zst"
printf '\x03%s' "$txt" >"$SEEDS/records/txt"
printf '\x04%s' "$txt" >"$SEEDS/records/blocks"
{ printf '\x05'; printf '%s' "$txt" | gzip -c -n; } >"$SEEDS/records/txtgz"
{ printf '\x06'; printf '%s' "$txt" | zstd -q -c; } >"$SEEDS/records/txtzst"
# Stream splits (selector bit 8: 64-byte splits; bit 32: blocks mode for compressed text).
{ printf '\x09'; for i in 1 2 3 4 5 6; do printf '%s' "$jsonl"; done | gzip -c -n; } >"$SEEDS/records/gz_split"
{ printf '\x0a'; for i in 1 2 3 4 5 6; do printf '%s' "$jsonl"; done | zstd -q -c; } >"$SEEDS/records/zst_split"
{ printf '\x2d'; for i in 1 2 3 4 5 6; do printf '%s\n\n' "$txt"; done | gzip -c -n; } >"$SEEDS/records/txtgz_split"
{ printf '\x2e'; for i in 1 2 3 4 5 6; do printf '%s\n\n' "$txt"; done | zstd -q -c; } >"$SEEDS/records/txtzst_split"
for i in 0 1 2 3; do
  printf "\\x0$i%s" "$txt" >"$SEEDS/cleaner/txt$i"
  printf "\\x0$i%s" $'The cat sat on the mat. It was happy.\n\n- item one\n- item two...\n{ javascript }\ncafe\xcc\x81 \xef\xac\x81 \xc2\xa0 x' >"$SEEDS/cleaner/mix$i"
done
for f in fuzz_records fuzz_cleaner; do
  corpus="$SEEDS/${f#fuzz_}"
  echo "-- $f"
  "$BUILD/fuzz/$f" -max_total_time="$SECONDS_EACH" -max_len=65536 -rss_limit_mb=2048 \
    -timeout=10 -print_final_stats=1 "$corpus" 2>&1 | tail -n 12
done
echo "-- fuzz_bpe (differential, vs SentencePiece)" && cmake --build "$BUILD" -j "$JOBS" --target fuzz_bpe >/dev/null && "$BUILD/fuzz/fuzz_bpe" -max_total_time="$SECONDS_EACH" -max_len=4096 -rss_limit_mb=2048 -timeout=20 -print_final_stats=1 2>&1 | tail -n 12
for f in "${TRUSTED[@]}"; do
  corpus="$SEEDS/${f#fuzz_}"
  mkdir -p "$corpus"
  GRIST_FUZZ_WRITE_SEEDS="$corpus" "$BUILD/fuzz/$f"
  # Inputs that once crashed a reader (fuzz/regressions/<target>/) run first, each once.
  if compgen -G "fuzz/regressions/${f#fuzz_}/*" >/dev/null; then
    "$BUILD/fuzz/$f" fuzz/regressions/"${f#fuzz_}"/* 2>&1 | tail -n 2
  fi
  echo "-- $f (${TRUSTED_SECONDS}s, $(ls "$corpus" | wc -l) seeds)"
  "$BUILD/fuzz/$f" -max_total_time="$TRUSTED_SECONDS" -max_len=65536 -rss_limit_mb=2048 \
    -timeout=10 -print_final_stats=1 "$corpus" 2>&1 | tail -n 12
done
# ThreadSanitizer over the multi-threaded runtimes (one TSan build folder, shared).
if [[ "${GRIST_SKIP_TSAN:-0}" != 1 ]]; then
  stage "ThreadSanitizer: loader, checkpoint writer, record writer"
  scripts/tsan.sh loader ckptio records
fi
echo "test_extra: sanitizers and fuzzers passed"
