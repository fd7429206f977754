# The job chain of a release build on Slurm (sourced by submit_build.sh, which defines `submit`).
# Each line is one job; each starts after the one before succeeded:
#
#   tokenizer   1 job     grist tokenize train --config C        train the tokenizer (single-threaded
#                                                                SentencePiece: deterministic)
#   tokenize    N tasks   grist tokenize encode --task I --tasks N   each task encodes its slice
#   pack        1 job     (the merge) refuses an incomplete set, then grist pack over all N tasks'
#                         parts in task order, and grist verify
#
# For a config with [clean] and [dedup] off the release equals `grist build --config C --output O`
# byte for byte (all but reports/, which holds timings), whatever N. Intermediate files: WORK/.
# (clean and dedup as arrays join this chain once `grist pack` can record their outputs in the
# manifest; `grist clean` and `grist dedup --stage ...` already take --task/--tasks: docs/slurm.md.)
grist_slurm_submit_pipeline() {
  grist_slurm_check_config
  submit tokenizer tokenizer.sbatch run single
  submit tokenize tokenize.sbatch task array
  submit pack pack.sbatch run single
}

# The chain does not run clean or dedup: refuse a config that enables them rather than publish a
# release that differs from `grist build`.
grist_slurm_check_config() {
  local on
  on=$(python3 - "$config" <<'PY'
import sys, tomllib
c = tomllib.load(open(sys.argv[1], "rb"))
on = []
if c.get("clean", {}).get("enabled", False): on.append("clean")
d = c.get("dedup", {})
if d.get("enabled", False) or d.get("mode", "none") not in ("none", ""): on.append("dedup")
print(" ".join(on))
PY
)
  if [[ -n "$on" ]]; then
    echo "submit_build: error: $config enables $on; the Slurm chain runs tokenizer -> tokenize -> pack" \
      "only (see docs/slurm.md); build this config with grist build, or turn $on off" >&2
    exit 1
  fi
}
