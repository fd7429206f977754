// Fuzzes the config loader: TOML text through Config::FromString, then every stage's FromConfig
// (clean, dedup, tokenizer training, encode) and the resolved JSON. Any crash, sanitizer report or
// uncaught exception is a finding; errors must be Status values.
#include <cstddef>
#include <cstdint>
#include <string>

#include "clean/cleaner.h"
#include "common/config.h"
#include "dedup/dedup.h"
#include "fuzz/fuzz_seeds.h"
#include "tokenize/encode.h"
#include "tokenize/tokenizer.h"

namespace {

void Seeds(const char* dir) {
  grist::fuzz::WriteSeed(dir, "release", R"(seed = 42
[release]
version = "1.0"
[inputs]
paths = ["a.jsonl", "b/"]
[clean]
min_words = 50
max_words = 100000
filter_no_terminal_punct = false
text_field = "text"
[dedup]
threshold = 0.8
num_perm = 112
bands = 14
rows = 8
shingle = "word"
memory_limit_mb = 64
[tokenizer]
vocab_size = 600
model_type = "bpe"
input_sentence_size = 20000
user_defined_symbols = ["<x>"]
[tokenize]
add_bos = false
add_eos = true
piece_bytes = 4096
[pack]
seq_len = 256
strategy = "bestfit"
[split]
validation_fraction = 0.05
[shard]
max_bytes = 120000
)");
  grist::fuzz::WriteSeed(dir, "types", "a = 1\nb = 2.5\nc = true\nd = \"x\"\ne = [1, \"y\"]\n"
                                       "[t]\nf = { g = 1 }\n[[arr]]\nh = 3\n");
}

}  // namespace

GRIST_FUZZ_SEEDS(Seeds)

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto config = grist::Config::FromString(text, "fuzz.toml");
  if (!config.ok()) return 0;
  (void)grist::clean::CleanOptions::FromConfig(*config);
  (void)grist::dedup::DedupOptions::FromConfig(*config);
  (void)grist::tokenize::TrainOptions::FromConfig(*config);
  (void)grist::tokenize::EncodeStageOptions::FromConfig(*config);
  (void)config->GetStringList("inputs.paths", {});
  (void)config->GetInt("seed", 0);
  (void)config->ResolvedJson(2);
  (void)config->UnusedKeys();
  return 0;
}
