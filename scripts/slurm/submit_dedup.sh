#!/usr/bin/env bash
# Submits `grist dedup` alone (not a release build: for that see submit_build.sh) as a chain of
# Slurm jobs: signatures, buckets, clusters and filter as job arrays of N tasks, merge and report
# as single jobs, each after the previous one succeeded (--dependency=afterok, a failure cancels the
# rest: --kill-on-invalid-dep=yes). Every task writes the completion marker of lib.sh
# (WORK/dedup-<stage>/.done/task-I-of-N) and every step after an array refuses to run unless all
# of that array's markers are there, naming the missing tasks (dedup itself also names them).
#
#   scripts/slurm/submit_dedup.sh N INPUT OUTPUT [grist dedup flags...]
#
# INPUT, OUTPUT, the dedup work directory (OUTPUT/.dedup-work unless --work-dir is given) and the
# markers and logs (WORK, default OUTPUT.slurm; set GRIST_WORK to change it) must be on a file
# system every node sees. Extra sbatch options: SBATCH_ARGS="--partition=cpu --time=1:00:00".
# GRIST is the grist binary (default: grist on PATH, else build/grist). The flags reach every task
# exactly as given here (they are passed as arguments, never re-split or re-expanded by a shell);
# --task/--tasks are set per task.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if [[ $# -lt 3 ]]; then
  echo "usage: $0 TASKS INPUT OUTPUT [grist dedup flags...]" >&2
  exit 2
fi
n=$1 input=$2 output=$3
shift 3
[[ "$n" =~ ^[1-9][0-9]*$ ]] || { echo "submit_dedup: TASKS must be a positive integer, got '$n'" >&2; exit 2; }
grist=${GRIST:-$(command -v grist || true)}
[[ -z "$grist" && -x "$here/../../build/grist" ]] && grist="$here/../../build/grist"
[[ -n "$grist" && -x "$grist" ]] || { echo "submit_dedup: no grist binary: set GRIST=PATH" >&2; exit 1; }
grist=$(cd "$(dirname "$grist")" && echo "$(pwd)/$(basename "$grist")")
work=${GRIST_WORK:-$output.slurm}
mkdir -p "$work/logs"
work=$(cd "$work" && pwd)
exports="ALL,GRIST_SLURM_DIR=$here,GRIST_BIN=$grist,GRIST_WORK=$work,GRIST_TASKS=$n"
# shellcheck disable=SC2206
extra=(${SBATCH_ARGS:-})
last=""
prev_array="-"
for stage in signatures buckets clusters merge filter report; do
  args=(--parsable --job-name "grist-dedup-$stage" --export "$exports" --kill-on-invalid-dep=yes)
  case $stage in
    merge|report) kind=single; args+=(--output "$work/logs/%x-%j.out") ;;
    *) kind=array; args+=(--array "0-$((n - 1))" --output "$work/logs/%x-%A_%a.out") ;;
  esac
  [[ -n "$last" ]] && args+=(--dependency "afterok:$last")
  id=$(sbatch "${args[@]}" "${extra[@]}" "$here/dedup.sbatch" "$kind" "$stage" "$prev_array" \
         -i "$input" -o "$output" "$@")
  id=${id%%;*}
  echo "$stage: job $id${last:+ (after $last)}"
  last=$id
  if [[ $kind == array ]]; then prev_array="dedup-$stage"; else prev_array="-"; fi
done
echo "submit_dedup: markers and logs in $work; the report is $output/dedup_report.json"
