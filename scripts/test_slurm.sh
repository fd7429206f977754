#!/usr/bin/env bash
# The Slurm test: a real single-node Slurm (Debian's slurmctld, slurmd and munge, configured for
# localhost by scripts/slurm/local_cluster.sh, no systemd, no cgroups) runs
#   1. the cluster self-test: a job array writing parts to a shared directory and its merge, chained
#      with --dependency=afterok; the merged result must be exact;
#   2. the same with one task failing: the chain must stop, and the merge step run by hand must
#      refuse the incomplete set and name the missing task;
#   3. the release pipeline (scripts/slurm/pipeline.sh: clean, dedup-signatures, dedup-buckets,
#      dedup-clusters, dedup-filter and tokenize as job arrays of 3 tasks, their merges, the
#      tokenizer and pack) on a config with [clean] and [dedup] on (three input files, so every
#      task has work), compared byte for byte (all but reports/) with a local `grist build`;
#   4. the same with one tokenize task failing: the chain must stop before the merge, the merge
#      step run by hand must refuse naming the task, and so must `grist build --stage
#      tokenize-merge` itself; rerunning submit_build.sh then resumes (skipping the tokenizer job)
#      and publishes the same release;
#   5. the same with one dedup-buckets task failing: the chain stops there, the next array's task
#      refuses naming it; the resubmitted chain skips clean, reruns dedup and publishes the same
#      release;
#   6. `grist dedup` alone through scripts/slurm/submit_dedup.sh (3-task arrays, input and output
#      paths with spaces): every task's marker, the same kept documents as one `grist dedup`.
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

echo "== 3. the release pipeline (clean and dedup on) as job arrays against a local grist build"
source scripts/slurm/pipeline_test_config.sh
grist_slurm_test_config "$tmp/config.toml"
"$BUILD/grist" build --config "$tmp/config.toml" --output "$tmp/local" --quiet
scripts/slurm/submit_build.sh --config "$tmp/config.toml" --work "$tmp/w3" --output "$tmp/slurm" \
  --tasks 3 --threads 1 --grist "$BUILD/grist" --wait --timeout "$TIMEOUT"
# The chain really ran clean, dedup and tokenize as 3-task arrays: every stage's record, every
# task's marker and part.
for s in clean dedup tokenizer tokenize; do
  [[ -f "$tmp/slurm.work/stages/$s.json" ]] || fail "no record of stage $s in $tmp/slurm.work/stages"
done
for t in 0 1 2; do
  [[ -f "$tmp/slurm.work/clean/clean-report-0000$t-of-00003.json" ]] || fail "no report of clean task $t"
  [[ -f "$tmp/slurm.work/dedup/dedup-0000$t-of-00003-00000.jsonl.zst" ]] || fail "no part of dedup task $t"
  [[ -f "$tmp/slurm.work/tokens/tokens-0000$t-of-00003.json" ]] || fail "no part of tokenize task $t"
  for s in clean dedup-signatures dedup-buckets dedup-clusters dedup-filter tokenize; do
    [[ -f "$tmp/w3/$s/.done/task-$t-of-3" ]] || fail "no marker of $s task $t"
  done
done
chain="clean clean-merge dedup-signatures dedup-buckets dedup-clusters dedup-merge dedup-filter"
chain+=" dedup-report tokenizer tokenize tokenize-merge pack "
[[ "$(cut -d' ' -f1 "$tmp/w3/jobs.txt" | tr '\n' ' ')" == "$chain" ]] ||
  fail "unexpected job chain: $(cat "$tmp/w3/jobs.txt")"
# The manifest's counts: clean rejected its 12 short documents, dedup removed exact and near copies.
/usr/bin/env python3 - "$tmp/slurm/manifest.json" <<'PY' || fail "the manifest's clean/dedup counts are not those expected"
import json, sys
c = json.load(open(sys.argv[1]))["counts"]
assert c["clean"]["docs_rejected"] == 12, c["clean"]
assert c["dedup"]["removed_exact"] > 0 and c["dedup"]["removed_near"] > 0, c["dedup"]
PY
if ! diff -r --exclude=reports "$tmp/local" "$tmp/slurm"; then
  fail "the Slurm release differs from the local build"
fi
echo "ok: the Slurm release ($(find "$tmp/slurm" -type f -not -path "*/reports/*" | wc -l) files besides reports/) is byte-identical to the local build"

echo "== 4. a failing tokenize task stops the chain; both merges name it; a resubmit resumes"
if GRIST_SLURM_TOKENIZE_FAIL=1 scripts/slurm/submit_build.sh --config "$tmp/config.toml" \
    --work "$tmp/w4" --output "$tmp/slurm4" --tasks 3 --threads 1 --grist "$BUILD/grist" --wait \
    --timeout "$TIMEOUT"; then
  fail "the chain succeeded although tokenize task 1 failed"
fi
[[ ! -e "$tmp/slurm4/manifest.json" ]] || fail "a release was published although task 1 failed"
[[ ! -e "$tmp/slurm4.work/stages/tokenize.json" ]] || fail "tokenize-merge ran although task 1 failed"
grep -q "tokenize task 1 fails on purpose" "$tmp"/w4/logs/grist-tokenize-*_1.out ||
  fail "task 1's log does not say why it failed"
set +e
msg=$(GRIST_SLURM_DIR="$ROOT/scripts/slurm" GRIST_BIN="$ROOT/$BUILD/grist" GRIST_WORK="$tmp/w4" \
      GRIST_TASKS=3 GRIST_CONFIG="$tmp/config.toml" GRIST_OUTPUT="$tmp/slurm4" \
      bash scripts/slurm/tokenize.sbatch merge 2>&1)
rc=$?
set -e
[[ $rc -ne 0 ]] || fail "the tokenize merge of an incomplete set exited 0"
[[ "$msg" == *"merge tokenize refused: incomplete set, task(s) 1 of 3 did not finish"* ]] ||
  fail "the merge's refusal does not name task 1: $msg"
echo "ok: $msg"
set +e
msg=$("$BUILD/grist" build --config "$tmp/config.toml" --output "$tmp/slurm4" --stage tokenize-merge 2>&1)
rc=$?
set -e
[[ $rc -ne 0 ]] || fail "grist build --stage tokenize-merge of an incomplete set exited 0"
[[ "$msg" == *"task 1 of 3 has not finished"* ]] || fail "grist's merge does not name task 1: $msg"
echo "ok: $msg"
out=$(scripts/slurm/submit_build.sh --config "$tmp/config.toml" --work "$tmp/w4" --output "$tmp/slurm4" \
      --tasks 3 --threads 1 --grist "$BUILD/grist" --wait --timeout "$TIMEOUT")
echo "$out"
[[ "$out" == *"skipping tokenizer: done"* ]] || fail "the resubmitted chain did not skip the tokenizer"
[[ "$out" == *"skipping clean and clean-merge: done"* ]] || fail "the resubmitted chain did not skip clean"
if ! diff -r --exclude=reports "$tmp/local" "$tmp/slurm4"; then
  fail "the resumed Slurm release differs from the local build"
fi
echo "ok: the resumed chain published the same release"

echo "== 5. a failing dedup-buckets task stops the chain; the next array names it; a resubmit resumes"
if GRIST_SLURM_FAIL=dedup-buckets:2 scripts/slurm/submit_build.sh --config "$tmp/config.toml" \
    --work "$tmp/w5" --output "$tmp/slurm5" --tasks 3 --threads 1 --grist "$BUILD/grist" --wait \
    --timeout "$TIMEOUT"; then
  fail "the chain succeeded although dedup-buckets task 2 failed"
fi
[[ -f "$tmp/slurm5.work/stages/clean.json" ]] || fail "clean did not complete before the failure"
[[ ! -e "$tmp/slurm5.work/stages/dedup.json" ]] || fail "dedup completed although a task failed"
[[ ! -e "$tmp/slurm5/manifest.json" ]] || fail "a release was published although a task failed"
set +e
msg=$(SLURM_ARRAY_TASK_ID=0 GRIST_SLURM_DIR="$ROOT/scripts/slurm" GRIST_BIN="$ROOT/$BUILD/grist" \
      GRIST_WORK="$tmp/w5" GRIST_TASKS=3 GRIST_CONFIG="$tmp/config.toml" GRIST_OUTPUT="$tmp/slurm5" \
      bash scripts/slurm/step.sbatch task dedup-clusters dedup-buckets 2>&1)
rc=$?
set -e
[[ $rc -ne 0 ]] || fail "a dedup-clusters task after an incomplete dedup-buckets array exited 0"
[[ "$msg" == *"dedup-clusters task 0 refused: incomplete set, task(s) 2 of 3 did not finish"* ]] ||
  fail "the refusal does not name dedup-buckets task 2: $msg"
echo "ok: $msg"
out=$(scripts/slurm/submit_build.sh --config "$tmp/config.toml" --work "$tmp/w5" --output "$tmp/slurm5" \
      --tasks 3 --threads 1 --grist "$BUILD/grist" --wait --timeout "$TIMEOUT")
echo "$out"
[[ "$out" == *"skipping clean and clean-merge: done"* ]] || fail "the resubmitted chain did not skip clean"
if ! diff -r --exclude=reports "$tmp/local" "$tmp/slurm5"; then
  fail "the resumed Slurm release differs from the local build"
fi
echo "ok: the resumed chain published the same release"
echo "== 6. grist dedup alone as arrays (submit_dedup.sh): paths with spaces reach every task intact"
mkdir -p "$tmp/in put"
cp "$tmp"/corpus-*.jsonl "$tmp/in put/"
"$BUILD/grist" dedup -i "$tmp/in put" -o "$tmp/dd local" --threshold 0.8 --quiet >/dev/null
GRIST="$BUILD/grist" scripts/slurm/submit_dedup.sh 3 "$tmp/in put" "$tmp/dd out" --threshold 0.8
start=$SECONDS
while squeue -h 2>/dev/null | grep -q .; do
  ((SECONDS - start < TIMEOUT)) || fail "the dedup chain did not finish within $TIMEOUT s"
  sleep 2
done
[[ -f "$tmp/dd out/dedup_report.json" ]] || fail "the dedup chain wrote no report: $(tail -n 3 "$tmp/dd out.slurm"/logs/* 2>&1)"
for t in 0 1 2; do
  for s in signatures buckets clusters filter; do
    [[ -f "$tmp/dd out.slurm/dedup-$s/.done/task-$t-of-3" ]] || fail "no marker of dedup $s task $t"
  done
done
kept() { find "$1" -maxdepth 1 -name '*.jsonl.zst' -print0 | sort -z | xargs -0 zstdcat; }
n_local=$(kept "$tmp/dd local" | wc -l)
((n_local > 400)) || fail "a local grist dedup kept only $n_local documents"
[[ "$(kept "$tmp/dd out" | md5sum)" == "$(kept "$tmp/dd local" | md5sum)" ]] ||
  fail "the dedup chain kept other documents than a local grist dedup"
echo "ok: the 3-task dedup chain kept the same $n_local documents as one process"
echo "test_slurm: all passed"
