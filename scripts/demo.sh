#!/usr/bin/env bash
# The README's main command: installs what is missing, builds grist, assembles the embedded default
# corpus under .demo/corpus (once), and runs the pipeline on it, printing the report.
# At this stage the pipeline is `grist clean`; later stages replace STEP below with `grist build`.
# Environment: GRIST_BUILD_DIR (default build), GRIST_JOBS (default: all CPUs).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${GRIST_BUILD_DIR:-build}
JOBS=${GRIST_JOBS:-$(nproc)}
DEMO=.demo

scripts/setup.sh
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release ${GRIST_CMAKE_ARGS:-}
cmake --build "$BUILD" -j "$JOBS" --target grist
if [[ ! -d $DEMO/corpus ]]; then
  scripts/make_demo_corpus.sh "$DEMO/corpus"
fi

# STEP: the pipeline run on the default corpus.
"$BUILD/grist" clean --input "$DEMO/corpus" --output "$DEMO/clean" --json "$DEMO/clean-report.json"

echo
echo "demo: kept documents in $DEMO/clean/, rejected ones (with reasons) in $DEMO/clean/rejects/,"
echo "      the full report in $DEMO/clean-report.json"
