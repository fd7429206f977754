#!/usr/bin/env bash
# ThreadSanitizer over the checkpoint writer's tests (the writer's I/O thread, pending-file handles,
# background publishing). Bounded: builds only ckptio_test in its own build folder and runs it under
# a time limit. The SIGKILL tests (crash loop, kills at named points) are left out (fork under
# TSan is slow, and they test processes, not threads). Environment: GRIST_TSAN_BUILD_DIR (default build-tsan), GRIST_JOBS (default 2).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${GRIST_TSAN_BUILD_DIR:-build-tsan}
JOBS=${GRIST_JOBS:-2}
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGRIST_SANITIZE=thread \
  -DGRIST_BUILD_PYTHON=OFF -DGRIST_BUILD_BENCHMARKS=OFF -DGRIST_ENABLE_CUDA=OFF >/dev/null
cmake --build "$BUILD" -j "$JOBS" --target ckptio_test
TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 ${TSAN_OPTIONS:-}" \
  timeout 600 "$BUILD/tests/ckptio/ckptio_test" --gtest_filter='-CrashConsistency.*:CkptCrashPoints.Sigkill*'
echo "tsan_ckptio.sh: no data races reported"
