# The job chain of a release build on Slurm (sourced by submit_build.sh, which defines `submit`,
# and sets $output). Each line is one job or job array of N tasks (--tasks); each starts after the
# one before succeeded (afterok: for an array, after every task succeeded):
#
#   clean             N tasks   grist build --stage clean --task I --tasks N     each task cleans its
#                                                                slice of the inputs (input splits)
#   clean-merge       1 job     refuses an incomplete set naming the missing tasks, then
#                               grist build --stage clean-merge: sums the task reports, records clean
#   dedup-signatures  N tasks   grist build --stage dedup-signatures --task I --tasks N
#   dedup-buckets     N tasks   (each array after an array first checks every task of the one
#   dedup-clusters    N tasks    before finished, naming the missing ones)
#   dedup-merge       1 job     connected components of the verified pairs
#   dedup-filter      N tasks   each task writes the kept documents of its slice
#   dedup-report      1 job     refuses an incomplete filter set, then sums the counters, records dedup
#   tokenizer         1 job     grist build --stage tokenizer     trains on what dedup kept
#   tokenize          N tasks   grist build --stage tokenize --task I --tasks N
#   tokenize-merge    1 job     refuses an incomplete set, then grist build --stage tokenize-merge
#   pack              1 job     grist build --stage pack, then grist verify
#
# The clean and dedup steps of a config that disables them do nothing and succeed at once. The
# release equals `grist build --config C --output O` byte for byte (all but reports/, which holds
# timings), whatever N: the steps are those of grist build, run as separate processes over the
# build's own work folder O.work/ (tests/release/staged_arrays_test.cc, scripts/test_slurm.sh).
#
# Resuming: a stage whose record O.work/stages/<stage>.json exists (written under the same config)
# is not submitted again, so rerunning submit_build.sh with the same --output continues from the
# first stage the chain did not complete (a stage's steps run again from its first one).
# (grist build itself refuses a work folder made with another config.)
grist_slurm_submit_pipeline() {
  local stages="$output.work/stages"
  if [[ -f "$stages/clean.json" ]]; then
    echo "skipping clean and clean-merge: done ($stages/clean.json)"
  else
    submit clean step.sbatch "task clean" array
    submit clean-merge step.sbatch "merge clean-merge clean" single
  fi
  if [[ -f "$stages/dedup.json" ]]; then
    echo "skipping dedup-signatures ... dedup-report: done ($stages/dedup.json)"
  else
    submit dedup-signatures step.sbatch "task dedup-signatures" array
    submit dedup-buckets step.sbatch "task dedup-buckets dedup-signatures" array
    submit dedup-clusters step.sbatch "task dedup-clusters dedup-buckets" array
    submit dedup-merge step.sbatch "merge dedup-merge dedup-clusters" single
    submit dedup-filter step.sbatch "task dedup-filter" array
    submit dedup-report step.sbatch "merge dedup-report dedup-filter" single
  fi
  if [[ -f "$stages/tokenizer.json" ]]; then
    echo "skipping tokenizer: done ($stages/tokenizer.json)"
  else
    submit tokenizer tokenizer.sbatch run single
  fi
  if [[ -f "$stages/tokenize.json" ]]; then
    echo "skipping tokenize and tokenize-merge: done ($stages/tokenize.json)"
  else
    submit tokenize tokenize.sbatch task array
    submit tokenize-merge tokenize.sbatch merge single
  fi
  submit pack pack.sbatch run single
}
