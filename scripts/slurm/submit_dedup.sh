#!/bin/bash
# Submits `grist dedup` as a chain of Slurm jobs: signatures, buckets, clusters and filter as job
# arrays of N tasks, merge and report as single tasks, each stage after the previous one succeeds.
#
#   scripts/slurm_dedup.sh N INPUT OUTPUT [extra grist dedup flags...]
#
# INPUT, OUTPUT and the work directory (OUTPUT/.dedup-work) must be on a file system every node
# sees. Extra sbatch options can be passed with SBATCH_ARGS="--partition=cpu --time=1:00:00".
# Every task must get the same flags; --task/--tasks come from SLURM_ARRAY_TASK_ID/COUNT.
set -euo pipefail
if [ $# -lt 3 ]; then
  echo "usage: $0 TASKS INPUT OUTPUT [grist dedup flags...]" >&2
  exit 2
fi
N=$1 INPUT=$2 OUTPUT=$3
shift 3
GRIST=${GRIST:-grist}
ARGS="-i $INPUT -o $OUTPUT --quiet $*"
SB="sbatch --parsable ${SBATCH_ARGS:-}"

dep=""
for stage in signatures buckets clusters merge filter report; do
  case $stage in
    merge|report) array="" ;;
    *) array="--array=0-$((N - 1))" ;;
  esac
  job=$($SB $array $dep --job-name="dedup-$stage" --wrap="$GRIST dedup $ARGS --stage $stage")
  echo "$stage: job $job"
  dep="--dependency=afterok:$job"
done
