#!/usr/bin/env bash
# The README's main command: builds grist and the v1.0 release of the embedded demo corpus
# (configs/v1.0.toml), verifies it, and prints its summary.
#   scripts/demo.sh            -> out/v1.0 (manifest.json, tokenizer.model, shards/, reports/)
# Environment: GRIST_BUILD_DIR (default build), GRIST_JOBS (default: all CPUs), GRIST_THREADS.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${GRIST_BUILD_DIR:-build}
JOBS=${GRIST_JOBS:-$(nproc)}

scripts/setup.sh
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release ${GRIST_CMAKE_ARGS:-} >/dev/null
cmake --build "$BUILD" -j "$JOBS" --target grist

if [[ ! -d .demo/corpus ]]; then
  if [[ -x scripts/make_demo_corpus.sh ]]; then
    scripts/make_demo_corpus.sh .demo/corpus
  else
    echo "demo.sh: .demo/corpus is missing and scripts/make_demo_corpus.sh is not in this tree" >&2
    exit 1
  fi
fi

"$BUILD/grist" build --config configs/v1.0.toml --output out/v1.0 --threads "${GRIST_THREADS:-0}"
"$BUILD/grist" verify out/v1.0
"$BUILD/grist" inspect out/v1.0 --top 5 | head -20
