#!/usr/bin/env bash
# Submits `grist build` to Slurm as a chain of `grist build --stage` jobs (scripts/slurm/pipeline.sh:
# clean, the dedup stages and tokenize as job arrays with their merges, the tokenizer, pack + verify),
# each starting only
# when the one before succeeded (--dependency=afterok; a failure cancels the rest:
# --kill-on-invalid-dep=yes). The release is byte-identical to `grist build` of the same config, any
# config (v1.0 included); rerun the same command to resume: completed stages are skipped.
#
#   scripts/slurm/submit_build.sh --config configs/v1.0.toml --work /shared/w --output /shared/rel \
#       --tasks 8 [--threads 4] [--grist build/grist] [--sbatch "--partition=cpu --account=cs"] [--wait]
#   scripts/slurm/submit_build.sh --selftest --work /shared/w --tasks 4 --wait   # check a cluster
#
# Every path must be on a file system that all nodes see (WORK: logs, markers; OUTPUT.work: the
# build's files). Logs: WORK/logs/grist-<stage>-<job>[_<task>].out.
# The job ids are printed and written to WORK/jobs.txt. With --wait the script waits (bounded by
# --timeout seconds, default 3600) for the last job and exits non-zero unless the chain succeeded.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
config="" work="" output="" tasks=4 threads="" grist="" sbatch_args="" wait=0 timeout=3600
selftest=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --config) config=$2; shift 2 ;;
    --work) work=$2; shift 2 ;;
    --output) output=$2; shift 2 ;;
    --tasks) tasks=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --grist) grist=$2; shift 2 ;;
    --sbatch) sbatch_args=$2; shift 2 ;;
    --wait) wait=1; shift ;;
    --timeout) timeout=$2; shift 2 ;;
    --selftest) selftest=1; shift ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "submit_build: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done

die() { echo "submit_build: error: $*" >&2; exit 1; }
[[ -n "$work" ]] || die "--work DIR is required (a directory on the shared file system)"
[[ "$tasks" =~ ^[1-9][0-9]*$ ]] || die "--tasks must be a positive integer, got '$tasks'"
command -v sbatch >/dev/null || die "sbatch not found: run this on a Slurm login node"
abs() { (cd "$(dirname "$1")" && echo "$(pwd)/$(basename "$1")"); }
mkdir -p "$work/logs"
work=$(cd "$work" && pwd)
if [[ $selftest -eq 0 ]]; then
  [[ -n "$config" && -f "$config" ]] || die "--config FILE is required and must exist"
  [[ -n "$output" ]] || die "--output DIR is required"
  [[ -e "$output/manifest.json" ]] && die "$output already holds a release; choose a new --output"
  config=$(abs "$config")
  mkdir -p "$(dirname "$output")"
  output=$(abs "$output")
  if [[ -z "$grist" ]]; then grist=$(command -v grist || true); fi
  [[ -z "$grist" && -x "$here/../../build/grist" ]] && grist="$here/../../build/grist"
  [[ -n "$grist" && -x "$grist" ]] || die "no grist binary: pass --grist PATH (on the shared file system)"
  grist=$(abs "$grist")
fi

exports="ALL,GRIST_SLURM_DIR=$here,GRIST_BIN=${grist:-/bin/true},GRIST_CONFIG=$config,GRIST_WORK=$work"
exports+=",GRIST_OUTPUT=$output,GRIST_TASKS=$tasks"
[[ -n "$threads" ]] && exports+=",GRIST_THREADS=$threads"
jobs_file="$work/jobs.txt"
: >"$jobs_file"
last=""

# submit NAME TEMPLATE "MODE [ARGS]" array|single [extra sbatch args]: prints and records the job
# id, and makes the job depend on the previous one. MODE and its ARGS (words without spaces) are
# the template's arguments, passed to it as separate arguments (sbatch does not reparse them).
submit() {
  local name=$1 template=$2 mode=$3 kind=$4
  shift 4
  local args=(--parsable --job-name "grist-$name" --export "$exports" --kill-on-invalid-dep=yes)
  if [[ "$kind" == array ]]; then
    args+=(--array "0-$((tasks - 1))" --output "$work/logs/%x-%A_%a.out")
  else
    args+=(--output "$work/logs/%x-%j.out")
  fi
  [[ -n "$last" ]] && args+=(--dependency "afterok:$last")
  [[ -n "$threads" ]] && args+=(--cpus-per-task "$threads")
  # shellcheck disable=SC2206
  [[ -n "$sbatch_args" ]] && args+=($sbatch_args)
  local id margs
  read -r -a margs <<<"$mode"
  id=$(sbatch "${args[@]}" "$@" "$here/$template" "${margs[@]}")
  id=${id%%;*}
  echo "$name $id" >>"$jobs_file"
  echo "submitted $name: job $id${last:+ (after $last)}"
  last=$id
}

if [[ $selftest -eq 1 ]]; then
  rm -rf "$work/selftest"
  submit selftest selftest.sbatch task array
  submit selftest-merge selftest.sbatch merge single
  final_marker="$work/selftest/.done/merged"
else
  source "$here/pipeline.sh"
  grist_slurm_submit_pipeline
  final_marker="$output/manifest.json"
fi

if [[ $wait -eq 0 ]]; then
  echo "submit_build: $(wc -l <"$jobs_file") jobs submitted; watch them with: squeue -u $USER"
  exit 0
fi
echo "submit_build: waiting for job $last (at most $timeout s)"
start=$SECONDS
while squeue -h -j "$last" 2>/dev/null | grep -q .; do
  if ((SECONDS - start > timeout)); then
    die "timed out after $timeout s; jobs still queued: $(squeue -h -o '%i %T %r' | tr '\n' ';')"
  fi
  # A chain whose earlier job failed leaves later ones pending forever unless Slurm cancels them.
  if squeue -h -j "$last" -o '%r' 2>/dev/null | grep -q DependencyNeverSatisfied; then
    break
  fi
  sleep 2
done
if [[ -e "$final_marker" ]]; then
  echo "submit_build: chain finished: $final_marker"
  exit 0
fi
echo "submit_build: error: the chain did not finish; last lines of the failed jobs' logs:" >&2
for f in "$work"/logs/*.out; do
  [[ -f "$f" ]] || continue
  if grep -qiE "error|fail" "$f"; then echo "--- $f" >&2; tail -n 5 "$f" >&2; fi
done
exit 1
