// Differential fuzzer: grist's BPE encoder against the SentencePiece library, on the same model.
// At start-up it trains two BPE models on generated text (byte fallback with split digits and
// user-defined symbols, identity normalizer with spaces kept; and nmt_nfkc without byte
// fallback), or also loads $GRIST_FUZZ_BPE_MODEL (e.g. the Mistral model). Each input's first
// byte picks the model and how the bytes are used: as is (malformed UTF-8 included), or repaired
// (each invalid byte replaced by a code point derived from it, control characters and long space
// runs included). Any difference in ids, or a crash or sanitizer report, is a finding.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "common/env.h"
#include "common/rng.h"
#include "common/utf8.h"
#include "tests/tokenize/gen_text.h"
#include "tokenize/internal/normalizer.h"
#include "tokenize/internal/spm.h"
#include "tokenize/tokenizer.h"

namespace {

std::vector<std::unique_ptr<grist::tokenize::Tokenizer>>* g_models = nullptr;

std::unique_ptr<grist::tokenize::Tokenizer> TrainModel(
    std::vector<std::pair<std::string, std::string>> kw) {
  grist::Rng rng(11);
  std::vector<std::string> lines;
  for (int i = 0; i < 1500; ++i) {
    std::string t = grist::testing::GenText(&rng, 20 + rng.Uniform(200), false);
    std::string clean;
    for (char c : t) {
      if (c != '\n' && c != '\0') clean.push_back(c);
    }
    if (!clean.empty()) lines.push_back(clean);
  }
  kw.emplace_back("model_type", "bpe");
  kw.emplace_back("num_threads", "1");
  kw.emplace_back("character_coverage", "0.99");
  std::string model;
  if (!grist::tokenize::internal::SpmTrain(kw, lines, 7, "/dev/null", &model).ok()) {
    std::fprintf(stderr, "fuzz_bpe: training failed\n");
    std::abort();
  }
  auto tok = grist::tokenize::Tokenizer::FromBytes(model, "fuzz");
  if (!tok.ok() || !(*tok)->native()) {
    std::fprintf(stderr, "fuzz_bpe: trained model is not encoded natively\n");
    std::abort();
  }
  return std::move(*tok);
}

// Replaces each byte that does not start a valid character with a code point made from it.
std::string Repair(std::string_view in) {
  std::string out;
  while (!in.empty()) {
    size_t n = grist::Utf8SequenceLength(in.data(), in.size());
    if (n == 0) {
      const uint8_t b = static_cast<uint8_t>(in[0]);
      static const uint32_t kBases[] = {0x20, 0x3000, 0x4E00, 0x1F600, 0x2580, 0x300, 0xFF00, 0x0};
      grist::testing::AppendUtf8(&out, kBases[b & 7] + (b >> 3));
      n = 1;
    } else {
      out.append(in.data(), n);
    }
    in.remove_prefix(n);
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  g_models = new std::vector<std::unique_ptr<grist::tokenize::Tokenizer>>();
  g_models->push_back(TrainModel({{"vocab_size", "2600"},
                                  {"byte_fallback", "true"},
                                  {"split_digits", "true"},
                                  {"user_defined_symbols", "<sep>,@@,qz"},
                                  {"remove_extra_whitespaces", "false"},
                                  {"allow_whitespace_only_pieces", "true"},
                                  {"normalization_rule_name", "identity"}}));
  g_models->push_back(TrainModel({{"vocab_size", "2500"},
                                  {"byte_fallback", "false"},
                                  {"normalization_rule_name", "nmt_nfkc"}}));
  if (const char* m = std::getenv("GRIST_FUZZ_BPE_MODEL"); m != nullptr && *m != '\0') {
    auto tok = grist::tokenize::Tokenizer::Load(grist::Env::Default(), m);
    if (tok.ok() && (*tok)->native()) g_models->push_back(std::move(*tok));
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t sel = data[0];
  const auto& tok = *(*g_models)[(sel & 3) % g_models->size()];
  std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  if (sel & 4) text = Repair(text);
  if (sel & 8) {
    // Long runs of spaces: each '~' stands for 17 of them.
    std::string spaced;
    for (char c : text) {
      if (c == '~') {
        spaced.append(17, ' ');
      } else {
        spaced.push_back(c);
      }
    }
    text.swap(spaced);
  }
  std::vector<int> a, b;
  auto sa = tok.EncodeRaw(text, &a, grist::tokenize::Engine::kGrist);
  auto sb = tok.EncodeRaw(text, &b, grist::tokenize::Engine::kSentencePiece);
  if (sa.ok() != sb.ok() || a != b) {
    std::fprintf(stderr, "fuzz_bpe: grist and SentencePiece differ (%zu vs %zu ids)\n", a.size(),
                 b.size());
    __builtin_trap();
  }
  return 0;
}
