# Helpers the GPU scripts source (`source scripts/gpu/lib.sh`); not run on its own.

# write_corpus_config FILE CORPUS MODEL: the release config of the issue 14 figures: Wikinews +
# Wikipedia-2015 from CORPUS (../shared/corpus), clean and dedup on, the tokenizer MODEL given (no
# training), bestfit packing of 2048-token samples, 1% validation.
write_corpus_config() {
  cat > "$1" <<TOML
seed = 1234
[release]
version = "bench"
[inputs]
paths = ["$2/wikinews-en", "$2/wikipedia-en-2015"]
[clean]
enabled = true
[dedup]
enabled = true
[tokenizer]
model = "$3"
[tokenize]
add_eos = true
[pack]
seq_len = 2048
strategy = "bestfit"
[split]
validation_fraction = 0.01
TOML
}

# compare_releases A B LABEL: prints whether releases A and B have the same bytes (every file but
# reports/, which holds times and the host); returns 1 when they differ.
compare_releases() {
  if diff -r -x reports "$1" "$2" >/dev/null; then
    echo "releases at $3: identical (all but reports/)"
  else
    echo "releases at $3: DIFFER"
    return 1
  fi
}
