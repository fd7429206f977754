# The small release config scripts/test_slurm.sh builds both locally and on Slurm (sourced), with
# [clean] and [dedup] on like configs/v1.0.toml. A deterministic generated corpus (plain JSONL, so
# the tasks split it by byte ranges; three files, so each of 3 clean tasks has one) keeps the test
# independent of ../shared/corpus and fast:
# 600 documents of sentences that pass the default clean filters, plus some that clean rejects
# (too few words), exact copies and near copies (one word changed) for dedup to remove.
grist_slurm_test_config() {  # CONFIG_PATH
  local config=$1 dir
  dir=$(dirname "$config")
  /usr/bin/env python3 - "$dir" <<'PY'
import json, sys
words = ["the", "data", "pipeline", "token", "shard", "release", "loader", "train", "model",
         "batch", "seed", "merge", "task", "node", "cluster", "write", "read", "fast", "slow",
         "to", "of", "and", "with", "that", "have", "be"]
x = 12345
def rand(n):
    global x
    x = (x * 6364136223846793005 + 1442695040888963407) % (1 << 64)
    return (x >> 33) % n
docs = []
for d in range(600):
    if d % 50 == 7:
        docs.append("too short to keep")  # clean: gopher_short_doc
        continue
    if d % 10 == 3 and d > 20:
        docs.append(docs[d - 11])  # dedup: exact copy
        continue
    if d % 15 == 4 and d > 20:
        w = docs[d - 13].split(" ")
        w[len(w) // 2] = "cluster" if w[len(w) // 2] != "cluster" else "node"
        docs.append(" ".join(w))  # dedup: near copy
        continue
    sentences = []
    for s in range(6 + rand(12)):
        n = 8 + rand(10)
        sentences.append(" ".join(words[rand(len(words))] for _ in range(n)).capitalize() + ".")
    docs.append(" ".join(sentences))
for part in range(3):
    with open(f"{sys.argv[1]}/corpus-{part}.jsonl", "w") as f:
        for d in range(part * 200, part * 200 + 200):
            f.write(json.dumps({"text": docs[d], "n": d}) + "\n")
PY
  cat >"$config" <<TOML
seed = 7
[release]
version = "slurm-test"
[inputs]
paths = ["$dir/corpus-0.jsonl", "$dir/corpus-1.jsonl", "$dir/corpus-2.jsonl"]
[clean]
enabled = true
[dedup]
enabled = true
exact = true
near = true
threshold = 0.8
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
