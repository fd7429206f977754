#!/usr/bin/env bash
# ThreadSanitizer over the multi-threaded runtimes' test suites, in one TSan build folder shared by
# both, each suite under a time limit. Any reported race fails the run (halt_on_error).
#   loader  loader_test: prefetch workers, the pool, batch release from other threads, LoadState
#           while workers run.
#   ckptio  ckptio_test: the writer's I/O thread, pending-file handles, background publishing. The
#           SIGKILL tests (crash loop, kills at named points) are left out: fork under TSan is slow,
#           and they test processes, not threads.
#   records record_writer_test: the frame-compressing pool (1-8 threads, parts byte-identical to
#           one thread's), frames appended whole between compressed ones, and FinishAll (writers
#           finished on threads of their own). Not common_test (the readers and the rest of
#           common/): grist::ThreadPool waits on Debian's absl::Mutex, a library built without
#           TSan, whose hand-offs TSan cannot see (it reports races on reused thread stacks).
# Usage: scripts/tsan.sh [loader] [ckptio] [records]   (no argument: all three, in that order)
# Environment: GRIST_TSAN_BUILD_DIR (default build-tsan), GRIST_JOBS (default 2),
# GRIST_TSAN_TIMEOUT (seconds per suite, default 600), TSAN_OPTIONS (appended).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${GRIST_TSAN_BUILD_DIR:-build-tsan}
JOBS=${GRIST_JOBS:-2}
LIMIT=${GRIST_TSAN_TIMEOUT:-600}
suites=("$@")
if [[ ${#suites[@]} -eq 0 ]]; then suites=(loader ckptio records); fi

# The test binary of each suite (tests/<dir>/<name>).
binary_of() {
  case "$1" in
    records) echo "record_writer_test" ;;
    *) echo "${1}_test" ;;
  esac
}
dir_of() {
  case "$1" in
    records) echo "common" ;;
    *) echo "$1" ;;
  esac
}

# The gtest filter of each suite ("" runs every test).
filter_of() {
  case "$1" in
    loader) echo "" ;;
    ckptio) echo "-CrashConsistency.*:CkptCrashPoints.Sigkill*" ;;
    records) echo "" ;;
    *) echo "tsan.sh: unknown suite '$1' (loader, ckptio, records)" >&2; return 2 ;;
  esac
}
targets=()
for s in "${suites[@]}"; do
  filter_of "$s" >/dev/null || exit 2
  targets+=("$(binary_of "$s")")
done

# One configuration for every suite (CUDA off: no GPU under TSan), so running them one after the
# other never reconfigures the folder; with the test hooks (the crash-point failure tests run
# here, and fail rather than skip without them: GRIST_REQUIRE_TEST_HOOKS).
export GRIST_REQUIRE_TEST_HOOKS=1
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGRIST_SANITIZE=thread \
  -DGRIST_BUILD_PYTHON=OFF -DGRIST_ENABLE_CUDA=OFF -DGRIST_TEST_HOOKS=ON >/dev/null
cmake --build "$BUILD" -j "$JOBS" --target "${targets[@]}"
for s in "${suites[@]}"; do
  filter=$(filter_of "$s")
  echo "== ThreadSanitizer: $(binary_of "$s")${filter:+ (--gtest_filter=$filter)}"
  # second_deadlock_stack: readable lock-order reports.
  TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 ${TSAN_OPTIONS:-}" \
    timeout "$LIMIT" "$BUILD/tests/$(dir_of "$s")/$(binary_of "$s")" --gtest_brief=1 ${filter:+--gtest_filter="$filter"}
done
echo "tsan.sh: no data races reported (${suites[*]})"
