# The job chain of `grist build` on Slurm (sourced by submit_build.sh, which defines `submit`).
# Each line is one job; each starts after the one before succeeded:
#
#   tokenizer        1 job     grist build --stage tokenizer        train (or copy) the tokenizer
#   tokenize         N tasks   grist build --stage tokenize --task I --tasks N
#   tokenize-merge   1 job     grist build --stage tokenize-merge   refuses an incomplete set
#   pack             1 job     grist build --stage pack, then grist verify
#
# The release equals `grist build --config C --output O` on one machine, byte for byte (all but
# reports/, which holds timings). The build's own work folder is O.work next to the release; the
# task markers and logs are under --work.
# clean and dedup join this chain as arrays (`grist clean --task`, `grist dedup --stage X --task`)
# once `grist build` runs them; the v1.0 config has them off for now (see docs/slurm.md).
grist_slurm_submit_pipeline() {
  submit tokenizer tokenizer.sbatch run single
  submit tokenize tokenize.sbatch task array
  submit tokenize-merge tokenize.sbatch merge single
  submit pack pack.sbatch run single
}
