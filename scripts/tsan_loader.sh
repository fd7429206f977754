#!/usr/bin/env bash
# ThreadSanitizer build of the loader core and its tests (prefetch workers, the pool, batch release
# from other threads, LoadState while workers run). Bounded: builds only loader_test.
# Environment: GRIST_TSAN_BUILD_DIR (default build-tsan), GRIST_JOBS (default 2).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${GRIST_TSAN_BUILD_DIR:-build-tsan}
JOBS=${GRIST_JOBS:-2}
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGRIST_SANITIZE=thread \
  -DGRIST_BUILD_PYTHON=OFF -DGRIST_BUILD_BENCHMARKS=OFF >/dev/null
cmake --build "$BUILD" -j "$JOBS" --target loader_test
# halt_on_error: any race fails the run; second_deadlock_stack for readable lock-order reports.
TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 ${TSAN_OPTIONS:-}" \
  timeout 600 "$BUILD/tests/loader/loader_test" --gtest_brief=1
echo "tsan_loader.sh: loader tests passed under ThreadSanitizer"
