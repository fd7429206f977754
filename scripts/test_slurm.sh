#!/usr/bin/env bash
# The Slurm test: a real single-node Slurm (Debian's slurmctld, slurmd and munge, configured for
# localhost by scripts/slurm/local_cluster.sh, no systemd, no cgroups) runs
#   1. the cluster self-test: a job array writing parts to a shared directory and its merge, chained
#      with --dependency=afterok; the merged result must be exact;
#   2. the same with one task failing: the chain must stop, and the merge step run by hand must
#      refuse the incomplete set and name the missing task;
#   3. the release pipeline (scripts/slurm/pipeline.sh) as job arrays, compared byte for byte with a
#      local `grist build` of the same config.
# Needs root (to install packages and run slurmd). Bounded: each chain waits at most
# GRIST_SLURM_TIMEOUT seconds (default 300). Environment: GRIST_BUILD_DIR (default build).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
BUILD=${GRIST_BUILD_DIR:-build}
TIMEOUT=${GRIST_SLURM_TIMEOUT:-300}

if [[ $(id -u) -ne 0 ]]; then
  echo "test_slurm: SKIPPED: needs root to install and run slurmd/slurmctld/munged"
  exit 0
fi
GRIST_EXTRA_PACKAGES="slurmctld slurmd slurm-client munge" scripts/setup.sh

tmp=$(mktemp -d /tmp/grist-slurm-test.XXXXXX)
cluster="$tmp/cluster"
cleanup() {
  scripts/slurm/local_cluster.sh stop "$cluster" || true
  if [[ "${GRIST_KEEP_TEMP:-0}" != 1 ]]; then rm -rf "$tmp"; else echo "test_slurm: kept $tmp"; fi
}
trap cleanup EXIT
scripts/slurm/local_cluster.sh start "$cluster"
# shellcheck disable=SC1091
source "$cluster/env.sh"
fail() { echo "test_slurm: FAILED: $*" >&2; exit 1; }

echo "== 1. self-test chain (4 tasks, then merge after all)"
scripts/slurm/submit_build.sh --selftest --work "$tmp/w1" --tasks 4 --wait --timeout "$TIMEOUT"
expected=$(printf 'part %d of 4\n' 0 1 2 3)
[[ "$(cat "$tmp/w1/selftest/merged")" == "$expected" ]] || fail "merged self-test output differs"

echo "== 2. a failing task stops the chain; the merge refuses the incomplete set"
if GRIST_SLURM_SELFTEST_FAIL=1 scripts/slurm/submit_build.sh --selftest --work "$tmp/w2" --tasks 4 \
    --wait --timeout "$TIMEOUT"; then
  fail "the chain succeeded although task 1 failed"
fi
[[ ! -e "$tmp/w2/selftest/merged" ]] || fail "the merge ran although task 1 failed"
set +e
msg=$(GRIST_SLURM_DIR="$ROOT/scripts/slurm" GRIST_BIN=/bin/true GRIST_WORK="$tmp/w2" GRIST_TASKS=4 \
      bash scripts/slurm/selftest.sbatch merge 2>&1)
rc=$?
set -e
[[ $rc -ne 0 ]] || fail "the merge of an incomplete set exited 0"
[[ "$msg" == *"merge selftest refused: incomplete set, task(s) 1 of 4 did not finish"* ]] ||
  fail "the merge's refusal does not name task 1: $msg"
echo "ok: $msg"

echo "== 3. the release pipeline as job arrays against a local grist build"
if [[ ! -f scripts/slurm/pipeline.sh ]] || ! "$BUILD/grist" build --help >/dev/null 2>&1; then
  echo "test_slurm: part 3 SKIPPED: this build has no 'grist build' or scripts/slurm/pipeline.sh"
  exit 0
fi
source scripts/slurm/pipeline_test_config.sh
grist_slurm_test_config "$tmp/config.toml"
"$BUILD/grist" build --config "$tmp/config.toml" --output "$tmp/local" --quiet
scripts/slurm/submit_build.sh --config "$tmp/config.toml" --work "$tmp/w3" --output "$tmp/slurm" \
  --tasks 3 --threads 1 --grist "$BUILD/grist" --wait --timeout "$TIMEOUT"
if ! diff -r --exclude=reports "$tmp/local" "$tmp/slurm"; then
  fail "the Slurm release differs from the local build"
fi
echo "ok: the Slurm release ($(find "$tmp/slurm" -type f -not -path "*/reports/*" | wc -l) files besides reports/) is byte-identical to the local build"
echo "test_slurm: all passed"
