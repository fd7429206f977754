#!/usr/bin/env bash
# The README's test command: installs what is missing, builds grist (Release, -Werror under CI),
# and runs every test: the GoogleTest suites through ctest, then the Python tests (pytest, in the
# virtual environment setup.sh makes: torch 2.x and the peers of requirements.txt).
# Environment: GRIST_BUILD_DIR (default build), GRIST_JOBS (default: all CPUs), GRIST_VENV (.venv),
# GRIST_SKIP_SANITIZERS=1 to skip the sanitizer and fuzz stages, GRIST_SKIP_SLURM=1 the Slurm test,
# GRIST_SKIP_GLUSTER=1 the GlusterFS test.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
BUILD=${GRIST_BUILD_DIR:-build}
JOBS=${GRIST_JOBS:-$(nproc)}
# Each stage's header shows the time since the start (test_extra.sh continues the same clock), so a
# CI log says where its minutes went.
export GRIST_TEST_T0=${GRIST_TEST_T0:-$(date +%s)}
stage() { local t=$(($(date +%s) - GRIST_TEST_T0)); printf '== [%dm%02ds] %s\n' $((t / 60)) $((t % 60)) "$*"; }

scripts/setup.sh
# Everything below (ctest's helpers, the benches' peers, the Python tests) finds the environment's
# python3 first on PATH; GRIST_PYTHON names it for code that wants one interpreter.
VENV=${GRIST_VENV:-$ROOT/.venv}
export PATH="$VENV/bin:$PATH" GRIST_PYTHON="$VENV/bin/python"
# The test hooks (crash points, bench fault injection) are compiled in for the tests only, and a
# test that needs them fails here rather than skips (GRIST_REQUIRE_TEST_HOOKS).
export GRIST_REQUIRE_TEST_HOOKS=1
# Through ccache, with paths under the checkout hashed relative to the build folder: the Python
# tests' `pip install .` (tests/python/test_pip.py) builds the same sources with the same flags in
# the sibling folder "$BUILD-pip", and takes this build's objects instead of compiling them all
# again (about 6 of CI's minutes).
LAUNCHER=()
if command -v ccache >/dev/null; then
  export CCACHE_BASEDIR="$ROOT"
  LAUNCHER=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
fi
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGRIST_TEST_HOOKS=ON "${LAUNCHER[@]}" \
  ${GRIST_CMAKE_ARGS:-}
cmake --build "$BUILD" -j "$JOBS"
stage "ctest"
(cd "$BUILD" && ctest --output-on-failure -j "$JOBS" --timeout 600)

if [[ -d tests/python ]]; then
  stage "Python tests ($("$GRIST_PYTHON" -c 'import sys, torch; print("Python", sys.version.split()[0], "torch", torch.__version__)'))"
  PYTHONPATH="$ROOT/$BUILD/python" GRIST_BUILD_DIR="$ROOT/$BUILD" "$GRIST_PYTHON" -m pytest -q -rs --durations=10 tests/python
fi

if [[ -x scripts/test_slurm.sh && "${GRIST_SKIP_SLURM:-0}" != 1 ]]; then
  stage "Slurm: the pipeline as job arrays on a single-node cluster (GRIST_SKIP_SLURM=1 skips)"
  GRIST_BUILD_DIR="$BUILD" scripts/test_slurm.sh
fi

if [[ -x scripts/test_gluster.sh && "${GRIST_SKIP_GLUSTER:-0}" != 1 ]]; then
  stage "GlusterFS: checkpoints, write amplification and a release on a FUSE volume (GRIST_SKIP_GLUSTER=1 skips)"
  GRIST_BUILD_DIR="$BUILD" scripts/test_gluster.sh
fi

if [[ -x scripts/test_extra.sh && "${GRIST_SKIP_SANITIZERS:-0}" != 1 ]]; then
  scripts/test_extra.sh
fi
stage "test.sh: all tests passed"
