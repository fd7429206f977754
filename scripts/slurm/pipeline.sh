# The job chain of a release build on Slurm (sourced by submit_build.sh, which defines `submit`,
# and sets $output). Each line is one job; each starts after the one before succeeded:
#
#   tokenizer       1 job     grist build --stage tokenizer      clean and dedup (when the config
#                                                                enables them), then the tokenizer
#   tokenize        N tasks   grist build --stage tokenize --task I --tasks N   each task encodes
#                                                                its slice of the kept documents
#   tokenize-merge  1 job     refuses an incomplete set naming the missing tasks, then
#                             grist build --stage tokenize-merge
#   pack            1 job     grist build --stage pack, then grist verify
#
# The release equals `grist build --config C --output O` byte for byte (all but reports/, which
# holds timings), whatever N: the stages are those of grist build, run as separate processes over
# the build's own work folder O.work/ (tests/labs/staged_build_test.cc, scripts/test_slurm.sh).
#
# Resuming: a stage whose record O.work/stages/<stage>.json exists (written under the same config)
# is not submitted again, so rerunning submit_build.sh with the same --output continues where the
# chain stopped. (grist build itself refuses a work folder made with another config.)
grist_slurm_submit_pipeline() {
  local stages="$output.work/stages"
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
