# Shared by the sbatch templates in this folder (sourced, not run). Each offline stage runs as a job
# array of GRIST_TASKS tasks over a shared work directory, then one merge job. A task that finishes
# writes a marker; the merge refuses to run unless every task's marker is there, and names the
# missing tasks with the command that reruns them.
#
# Environment (set by submit_build.sh through sbatch --export):
#   GRIST_BIN     the grist binary (an absolute path on the shared file system)
#   GRIST_CONFIG  the release config
#   GRIST_WORK    the shared work directory (per-stage subfolders, markers, logs)
#   GRIST_OUTPUT  the release folder the last step publishes
#   GRIST_TASKS   tasks per job array
#   GRIST_THREADS threads per task (default: the CPUs Slurm gave the task)

set -euo pipefail

grist_slurm_die() {
  echo "grist-slurm: error: $*" >&2
  exit 1
}

grist_slurm_need() {
  local v
  for v in "$@"; do
    [[ -n "${!v:-}" ]] || grist_slurm_die "$v is not set (submit with scripts/slurm/submit_build.sh)"
  done
}

grist_slurm_need GRIST_BIN GRIST_WORK GRIST_TASKS
[[ -x "$GRIST_BIN" ]] || grist_slurm_die "GRIST_BIN=$GRIST_BIN is not an executable on this node"
GRIST_THREADS=${GRIST_THREADS:-${SLURM_CPUS_PER_TASK:-0}}

# This task's index in [0, GRIST_TASKS), from Slurm's array variables (arrays may start at an
# offset, e.g. --array=1-8).
grist_slurm_task_index() {
  [[ -n "${SLURM_ARRAY_TASK_ID:-}" ]] || grist_slurm_die "not running as a job array task"
  echo $((SLURM_ARRAY_TASK_ID - ${SLURM_ARRAY_TASK_MIN:-0}))
}

grist_slurm_marker() {  # STAGE TASK
  echo "$GRIST_WORK/$1/.done/task-$2-of-$GRIST_TASKS"
}

# Runs "$@" as task I of stage STAGE and, when it succeeds, records that atomically.
grist_slurm_run_task() {  # STAGE CMD...
  local stage=$1
  shift
  local task
  task=$(grist_slurm_task_index)
  mkdir -p "$GRIST_WORK/$stage/.done"
  local marker
  marker=$(grist_slurm_marker "$stage" "$task")
  rm -f "$marker"
  echo "grist-slurm: $stage task $task of $GRIST_TASKS on $(hostname -s): $*"
  local start=$SECONDS
  "$@"
  printf 'job=%s array_job=%s task=%s host=%s seconds=%s\n' "${SLURM_JOB_ID:-}" \
    "${SLURM_ARRAY_JOB_ID:-}" "$task" "$(hostname -s)" $((SECONDS - start)) >"$marker.tmp"
  mv "$marker.tmp" "$marker"
}

# Exits with an error naming every task of the array STAGE that did not finish. WHO names the step
# that refuses (default "merge STAGE"); TEMPLATE is the sbatch line that reruns a task (default
# "scripts/slurm/STAGE.sbatch task").
grist_slurm_require_all() {  # STAGE [WHO] [TEMPLATE]
  local stage=$1 who=${2:-merge $1} template=${3:-scripts/slurm/$1.sbatch task} missing=() t
  for ((t = 0; t < GRIST_TASKS; t++)); do
    [[ -f "$(grist_slurm_marker "$stage" "$t")" ]] || missing+=("$t")
  done
  if ((${#missing[@]} > 0)); then
    local list
    list=$(IFS=,; echo "${missing[*]}")
    echo "grist-slurm: error: $who refused: incomplete set, task(s) $list of $GRIST_TASKS" \
      "did not finish (no marker in $GRIST_WORK/$stage/.done); see $GRIST_WORK/logs/grist-$stage-*;" \
      "rerun them with: sbatch --array=$list ... $template" >&2
    exit 1
  fi
  echo "grist-slurm: $stage: all $GRIST_TASKS tasks finished"
}

# Runs "$@" once as the merge step of the array STAGE after checking every task finished.
grist_slurm_run_merge() {  # STAGE CMD...
  local stage=$1
  shift
  grist_slurm_require_all "$stage" "merge $stage" "${GRIST_SLURM_RERUN:-scripts/slurm/$stage.sbatch task}"
  echo "grist-slurm: $stage merge on $(hostname -s): $*"
  "$@"
  mkdir -p "$GRIST_WORK/$stage/.done"
  date -u +%FT%TZ >"$GRIST_WORK/$stage/.done/merged"
}
