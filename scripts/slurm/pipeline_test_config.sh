# The small release config scripts/test_slurm.sh builds both locally and on Slurm (sourced).
# A deterministic generated corpus (plain JSONL, so encode tasks split it by byte ranges) keeps the
# test independent of ../shared/corpus and fast.
grist_slurm_test_config() {  # CONFIG_PATH
  local config=$1 dir
  dir=$(dirname "$config")
  /usr/bin/env python3 - "$dir/corpus.jsonl" <<'PY'
import json, sys
words = ["the", "data", "pipeline", "token", "shard", "release", "loader", "train", "model",
         "batch", "seed", "merge", "task", "node", "cluster", "write", "read", "fast", "slow"]
x = 12345
with open(sys.argv[1], "w") as f:
    for d in range(600):
        out = []
        for w in range(30 + d % 170):
            x = (x * 6364136223846793005 + 1442695040888963407) % (1 << 64)
            out.append(words[(x >> 33) % len(words)])
        f.write(json.dumps({"text": " ".join(out), "n": d}) + "\n")
PY
  cat >"$config" <<TOML
seed = 7
[release]
version = "slurm-test"
[inputs]
paths = ["$dir/corpus.jsonl"]
[clean]
enabled = false
[dedup]
enabled = false
[tokenizer]
model_type = "bpe"
vocab_size = 400
character_coverage = 1.0
byte_fallback = true
normalization = "identity"
add_dummy_prefix = true
split_digits = true
user_defined_symbols = []
control_symbols = []
input_sentence_size = 100000
max_sentence_length = 16384
unk_id = 0
bos_id = 1
eos_id = 2
pad_id = 3
[tokenize]
add_bos = false
add_eos = true
piece_bytes = 65536
split_bytes = 16384
[pack]
seq_len = 64
strategy = "bestfit"
bestfit_window_tokens = 65536
[split]
validation_fraction = 0.1
[shard]
max_bytes = 16384
TOML
}
