// grist's BPE encoder against SentencePiece: identical ids, document for document.
//
// Without ../shared: models trained here on generated text (every normalizer option that changes
// encoding, byte fallback on and off, split digits, user-defined symbols) compared with the
// SentencePiece library grist links, and with the Python module when the venv has it.
// With ../shared: the Mistral model and models trained on Wikinews, on every document of the
// corpus files the issue names.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <fstream>
#include <limits>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/env.h"
#include "common/json_writer.h"
#include "common/records.h"
#include "common/rng.h"
#include "common/utf8.h"
#include "tests/test_util.h"
#include "tests/tokenize/gen_text.h"
#include "tokenize/internal/normalizer.h"
#include "tokenize/internal/spm.h"
#include "tokenize/encode.h"
#include "tokenize/tokenizer.h"

namespace grist::tokenize {
namespace {

using grist::testing::TempDir;

std::string Python() {
  const char* env = std::getenv("GRIST_PYTHON");
  return env != nullptr && *env != '\0' ? env : "python3";
}

bool HavePythonSentencePiece() {
  return std::system((Python() + " -c 'import sentencepiece' >/dev/null 2>&1").c_str()) == 0;
}

// The serialized model SentencePiece trains on `sentences` with `kwargs` (BPE and character
// coverage 0.99 unless given), memoized by `name`: tests share the models.
std::string TrainBytes(const std::string& name, std::vector<std::pair<std::string, std::string>> kwargs,
                       const std::vector<std::string>& sentences) {
  static auto* memo = new std::map<std::string, std::string>();
  if (auto it = memo->find(name); it != memo->end()) return it->second;
  kwargs.emplace_back("num_threads", "1");
  for (const auto& def : {std::pair{"character_coverage", "0.99"}, std::pair{"model_type", "bpe"}}) {
    if (std::none_of(kwargs.begin(), kwargs.end(), [&](auto& kv) { return kv.first == def.first; })) {
      kwargs.emplace_back(def.first, def.second);
    }
  }
  std::string model;
  internal::SpmStatus s = internal::SpmTrain(kwargs, sentences, 7, "/dev/null", &model);
  EXPECT_TRUE(s.ok()) << s.message;
  if (!s.ok()) return "";
  (*memo)[name] = model;
  return model;
}

std::unique_ptr<Tokenizer> Train(const std::string& name,
                                 std::vector<std::pair<std::string, std::string>> kwargs,
                                 const std::vector<std::string>& sentences) {
  std::string model = TrainBytes(name, std::move(kwargs), sentences);
  if (model.empty()) return nullptr;
  auto tok = Tokenizer::FromBytes(model, name);
  EXPECT_TRUE(tok.ok()) << tok.status();
  return tok.ok() ? std::move(*tok) : nullptr;
}

// Documents whose grist ids differ from the library's, over `threads` threads; the first few
// described in *first.
size_t Mismatches(const Tokenizer& tok, const std::vector<std::string>& docs, std::string* first,
                  int threads = 2) {
  std::vector<size_t> bad(threads, 0);
  std::vector<std::string> notes(threads);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      std::vector<int> a, b;
      for (size_t i = t; i < docs.size(); i += threads) {
        a.clear();
        b.clear();
        absl::Status sa = tok.EncodeRaw(docs[i], &a, Engine::kGrist);
        absl::Status sb = tok.EncodeRaw(docs[i], &b, Engine::kSentencePiece);
        if (!sa.ok() || !sb.ok() || a != b) {
          if (++bad[t] <= 2) {
            size_t k = 0;
            while (k < a.size() && k < b.size() && a[k] == b[k]) ++k;
            absl::StrAppend(&notes[t], "doc ", i, " (", docs[i].size(), " bytes) differs at id ",
                            k, ": grist ", k < a.size() ? a[k] : -1, " sentencepiece ",
                            k < b.size() ? b[k] : -1, "; ");
          }
        }
      }
    });
  }
  for (auto& th : pool) th.join();
  size_t n = 0;
  for (int t = 0; t < threads; ++t) {
    n += bad[t];
    *first += notes[t];
  }
  return n;
}

std::vector<std::string> Generated(uint64_t seed, size_t docs, size_t max_bytes, bool invalid) {
  Rng rng(seed);
  std::vector<std::string> out;
  for (size_t i = 0; i < docs; ++i) {
    out.push_back(grist::testing::GenText(&rng, 1 + rng.Uniform(max_bytes), invalid));
  }
  // Edge cases: empty, only spaces, only a dummy-prefix look-alike, space runs at both ends.
  for (const char* s : {"", " ", "   ", "\xe2\x96\x81", " a ", "  a  b  ", "\t\n", "\xff", "0123456789",
                        "<sep><sep>", "@@@", "\xe3\x80\x80x\xe3\x80\x80"}) {
    out.emplace_back(s);
  }
  return out;
}

// Training sentences: lines of valid generated text.
std::vector<std::string> TrainingLines(uint64_t seed) {
  Rng rng(seed);
  std::vector<std::string> lines;
  for (int i = 0; i < 2000; ++i) {
    std::string t = grist::testing::GenText(&rng, 20 + rng.Uniform(200), /*invalid=*/false);
    t.erase(std::remove(t.begin(), t.end(), '\n'), t.end());
    t.erase(std::remove(t.begin(), t.end(), '\0'), t.end());
    if (!t.empty()) lines.push_back(t);
  }
  return lines;
}

struct Variant {
  const char* name;
  std::vector<std::pair<std::string, std::string>> kwargs;
};

std::vector<Variant> Variants() {
  return {
      {"bytefallback_splitdigits",
       {{"vocab_size", "2600"}, {"byte_fallback", "true"}, {"split_digits", "true"},
        {"normalization_rule_name", "identity"}, {"character_coverage", "0.995"}}},
      {"unk_no_bytefallback",
       {{"vocab_size", "2500"}, {"byte_fallback", "false"}, {"character_coverage", "0.98"},
        {"normalization_rule_name", "identity"}}},
      {"user_defined",
       {{"vocab_size", "2600"}, {"byte_fallback", "true"}, {"user_defined_symbols", "<sep>,@@,qz,\xe2\x96\x81x"},
        {"control_symbols", "<ctl>"}, {"normalization_rule_name", "identity"}}},
      {"nmt_nfkc",
       {{"vocab_size", "2600"}, {"byte_fallback", "true"}, {"normalization_rule_name", "nmt_nfkc"}}},
      {"nfkc_keep_spaces_no_prefix",
       {{"vocab_size", "2500"}, {"normalization_rule_name", "nfkc"},
        {"remove_extra_whitespaces", "false"}, {"add_dummy_prefix", "false"}}},
      {"whitespace_suffix",
       {{"vocab_size", "2500"}, {"byte_fallback", "true"}, {"treat_whitespace_as_suffix", "true"},
        {"normalization_rule_name", "identity"}}},
      {"mistral_like",
       {{"vocab_size", "2700"}, {"byte_fallback", "true"}, {"split_digits", "true"},
        {"normalization_rule_name", "identity"}, {"remove_extra_whitespaces", "false"},
        {"allow_whitespace_only_pieces", "true"}}},
      {"nfkc_cf_user_defined",
       {{"vocab_size", "2500"}, {"normalization_rule_name", "nfkc_cf"},
        {"user_defined_symbols", "<sep>,QZ"}}},
  };
}

// The serialized model of the variant named `name`, trained on TrainingLines(1) (memoized).
std::string VariantModel(std::string_view name) {
  for (const Variant& v : Variants()) {
    if (name == v.name) return TrainBytes(v.name, v.kwargs, TrainingLines(1));
  }
  ADD_FAILURE() << "no variant " << name;
  return "";
}

TEST(BpeTest, ExactOnGeneratedTextForEveryModelVariant) {
  const std::vector<std::string> lines = TrainingLines(1);
  const std::vector<std::string> docs = Generated(2, 400, 3000, /*invalid=*/true);
  for (const Variant& v : Variants()) {
    auto tok = Train(v.name, v.kwargs, lines);
    ASSERT_NE(tok, nullptr) << v.name;
    ASSERT_TRUE(tok->native()) << v.name << ": " << tok->native_why_not();
    std::string first;
    EXPECT_EQ(Mismatches(*tok, docs, &first), 0u) << v.name << ": " << first;
    const bool cache = tok->native_chunk_cache();
    tok->DisableChunkCacheForTesting();
    first.clear();
    EXPECT_EQ(Mismatches(*tok, docs, &first), 0u) << v.name << " without cache: " << first;
    if (std::string(v.name) == "bytefallback_splitdigits") {
      EXPECT_TRUE(cache);
    }
    if (std::string(v.name) == "whitespace_suffix") {
      EXPECT_FALSE(cache);
    }
  }
}

// The chunk cache is shared by the threads that encode with one model (tokenize/internal/bpe.h):
// eight threads encoding the same documents at once, each from another starting point, over more
// distinct chunks than the cache has room for (so slots are overwritten while others read them),
// give every document exactly the ids of an encoder without the cache.
TEST(BpeTest, SharedChunkCacheGivesExactIdsUnderConcurrentWritesAndEvictions) {
  const std::string model = VariantModel("bytefallback_splitdigits");
  ASSERT_FALSE(model.empty());
  auto cached = Tokenizer::FromBytes(model, "cached");
  auto plain = Tokenizer::FromBytes(model, "plain");
  ASSERT_TRUE(cached.ok() && plain.ok());
  ASSERT_TRUE((*cached)->native_chunk_cache()) << (*cached)->native_why_not();
  (*plain)->DisableChunkCacheForTesting();
  // 80,000 distinct words of 2-12 letters (and some digits and non-ASCII), each used three times,
  // in 1,200 documents: about 1.4 MB, a third of the cache's slots taken by more than one chunk.
  Rng rng(17);
  std::vector<std::string> words;
  const std::string letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  for (int i = 0; i < 80000; ++i) {
    std::string w;
    const size_t len = 2 + rng.Uniform(11);
    for (size_t k = 0; k < len; ++k) w.push_back(letters[rng.Uniform(letters.size())]);
    if (i % 97 == 0) w += "\xc3\xa9";
    words.push_back(std::move(w));
  }
  std::vector<std::string> docs(1200);
  for (int rep = 0; rep < 3; ++rep) {
    for (size_t i = 0; i < words.size(); ++i) {
      std::string& d = docs[rng.Uniform(docs.size())];
      if (!d.empty()) d.push_back(rng.Uniform(8) == 0 ? '\n' : ' ');
      d += words[i];
    }
  }
  std::vector<std::vector<int>> want(docs.size());
  for (size_t i = 0; i < docs.size(); ++i) {
    ASSERT_TRUE((*plain)->EncodeRaw(docs[i], &want[i], Engine::kGrist).ok());
  }
  constexpr int kThreads = 8;
  std::vector<size_t> bad(kThreads, 0);
  std::vector<std::thread> pool;
  for (int t = 0; t < kThreads; ++t) {
    pool.emplace_back([&, t] {
      std::vector<int> ids;
      for (size_t k = 0; k < docs.size(); ++k) {
        const size_t i = (k + t * docs.size() / kThreads) % docs.size();
        ids.clear();
        if (!(*cached)->EncodeRaw(docs[i], &ids, Engine::kGrist).ok() || ids != want[i]) ++bad[t];
      }
    });
  }
  for (auto& th : pool) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(bad[t], 0u) << "thread " << t;
}

// Each thread's front cache belongs to one encoder at a time: one thread encoding every document
// with two models in turn (the same chunks, other ids) gives each model's own ids.
TEST(BpeTest, FrontCacheFollowsTheEncoderInUse) {
  auto a = Tokenizer::FromBytes(VariantModel("bytefallback_splitdigits"), "a");
  auto b = Tokenizer::FromBytes(VariantModel("mistral_like"), "b");
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE((*a)->native_chunk_cache() && (*b)->native_chunk_cache());
  const std::vector<std::string> docs = Generated(5, 200, 2000, /*invalid=*/false);
  size_t differ = 0;
  for (int round = 0; round < 2; ++round) {
    for (const std::string& d : docs) {
      std::vector<int> ga, gb, sa, sb;
      ASSERT_TRUE((*a)->EncodeRaw(d, &ga, Engine::kGrist).ok());
      ASSERT_TRUE((*b)->EncodeRaw(d, &gb, Engine::kGrist).ok());
      ASSERT_TRUE((*a)->EncodeRaw(d, &sa, Engine::kSentencePiece).ok());
      ASSERT_TRUE((*b)->EncodeRaw(d, &sb, Engine::kSentencePiece).ok());
      EXPECT_EQ(ga, sa) << "model a, round " << round;
      EXPECT_EQ(gb, sb) << "model b, round " << round;
      differ += ga != gb;
    }
  }
  EXPECT_GT(differ, docs.size());  // the two models do encode the documents differently
}

TEST(BpeTest, LongRunsAndControlCharacters) {
  auto tok = Train("long_runs", {{"vocab_size", "2400"}, {"byte_fallback", "true"},
                    {"remove_extra_whitespaces", "false"}, {"allow_whitespace_only_pieces", "true"},
                    {"normalization_rule_name", "identity"}},
                   TrainingLines(3));
  ASSERT_NE(tok, nullptr);
  ASSERT_TRUE(tok->native()) << tok->native_why_not();
  std::vector<std::string> docs;
  for (size_t n : {1, 2, 3, 15, 16, 17, 100, 1000, 70000}) {
    docs.push_back(std::string(n, ' '));
    std::string ab(n + 2, ' ');
    ab.front() = 'a';
    ab.back() = 'b';
    docs.push_back(ab);
    docs.push_back(std::string(n, 'a'));
    docs.push_back(std::string(n, '\x01'));
    std::string mixed;
    for (size_t i = 0; i < n; ++i) mixed += (i % 3 == 0) ? "\xe2\x96\x81" : (i % 3 == 1 ? " " : "\t");
    docs.push_back(mixed);
  }
  std::string first;
  EXPECT_EQ(Mismatches(*tok, docs, &first), 0u) << first;
}

TEST(BpeTest, AgreesWithThePythonModule) {
  if (!HavePythonSentencePiece()) GTEST_SKIP() << Python() << " has no sentencepiece module";
  TempDir tmp;
  // Python strings hold valid UTF-8 only: malformed input is compared with the library above.
  std::vector<std::string> docs = Generated(4, 200, 2000, /*invalid=*/false);
  docs.erase(std::remove_if(docs.begin(), docs.end(),
                            [](const std::string& d) { return !IsValidUtf8(d); }),
             docs.end());
  for (const Variant& v : Variants()) {
    std::string model = TrainBytes(v.name, v.kwargs, TrainingLines(1));
    ASSERT_FALSE(model.empty());
    const std::string path = tmp.Join(std::string(v.name) + ".model");
    ASSERT_TRUE(WriteFileAtomic(Env::Default(), path, model).ok());
    auto tok = Tokenizer::FromBytes(model, path);
    ASSERT_TRUE(tok.ok());
    std::string in = tmp.Join("docs.jsonl"), out = tmp.Join("ids.txt"), py = tmp.Join("enc.py");
    {
      std::ofstream f(in);
      for (const auto& d : docs) {
        std::string line;
        AppendJsonString(&line, d);
        f << line << "\n";
      }
      std::ofstream p(py);
      p << "import json, sys, sentencepiece as spm\n"
           "sp = spm.SentencePieceProcessor(model_file=sys.argv[1])\n"
           "with open(sys.argv[2], encoding='utf-8') as f, open(sys.argv[3], 'w') as o:\n"
           "    for line in f:\n"
           "        o.write(' '.join(map(str, sp.encode(json.loads(line)))) + '\\n')\n";
    }
    std::string cmd = absl::StrCat(Python(), " ", py, " ", path, " ", in, " ", out);
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    std::ifstream f(out);
    std::string line;
    size_t i = 0, bad = 0;
    while (std::getline(f, line)) {
      std::istringstream ss(line);
      std::vector<int> want, got;
      int x;
      while (ss >> x) want.push_back(x);
      ASSERT_LT(i, docs.size());
      ASSERT_TRUE((*tok)->EncodeRaw(docs[i], &got, Engine::kGrist).ok());
      if (got != want && ++bad <= 2) {
        std::vector<int> lib;
        ASSERT_TRUE((*tok)->EncodeRaw(docs[i], &lib, Engine::kSentencePiece).ok());
        size_t k = 0;
        while (k < got.size() && k < want.size() && got[k] == want[k]) ++k;
        std::string at;
        AppendJsonString(&at, docs[i].substr(0, 400));
        ADD_FAILURE() << v.name << ": doc " << i << " differs from Python at id " << k
                      << " (library " << (lib == want ? "agrees with Python" : "agrees with grist")
                      << "): " << at;
      }
      ++i;
    }
    EXPECT_EQ(i, docs.size()) << v.name;
    EXPECT_EQ(bad, 0u) << v.name;
  }
}

// The serialized model with edit(&text, &score) applied to each piece (protobuf wire format:
// ModelProto's field 1 holds each piece as a message whose field 1 is its text and field 2 its
// score, a float).
template <typename Edit>
std::string EditPieces(const std::string& model, Edit edit) {
  auto read_varint = [](std::string_view s, size_t* at) {
    uint64_t v = 0;
    for (int shift = 0; *at < s.size(); shift += 7) {
      const uint8_t b = static_cast<uint8_t>(s[(*at)++]);
      v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if ((b & 0x80) == 0) break;
    }
    return v;
  };
  auto put_varint = [](std::string* out, uint64_t v) {
    while (v >= 0x80) {
      out->push_back(static_cast<char>((v & 0x7f) | 0x80));
      v >>= 7;
    }
    out->push_back(static_cast<char>(v));
  };
  // The fields of `msg` in order: (tag, value bytes) with lengths stripped.
  auto fields = [&](std::string_view msg) {
    std::vector<std::pair<uint64_t, std::string>> out;
    size_t at = 0;
    while (at < msg.size()) {
      const uint64_t tag = read_varint(msg, &at);
      std::string v;
      switch (tag & 7) {
        case 0: put_varint(&v, read_varint(msg, &at)); break;
        case 1: v = msg.substr(at, 8); at += 8; break;
        case 5: v = msg.substr(at, 4); at += 4; break;
        case 2: {
          const uint64_t len = read_varint(msg, &at);
          v = msg.substr(at, len);
          at += len;
          break;
        }
        default: ADD_FAILURE() << "wire type " << (tag & 7); return out;
      }
      out.emplace_back(tag, std::move(v));
    }
    return out;
  };
  auto serialize = [&](const std::vector<std::pair<uint64_t, std::string>>& fs) {
    std::string out;
    for (const auto& [tag, v] : fs) {
      put_varint(&out, tag);
      if ((tag & 7) == 2) put_varint(&out, v.size());
      out += v;
    }
    return out;
  };
  auto top = fields(model);
  for (auto& [tag, body] : top) {
    if (tag != ((1 << 3) | 2)) continue;
    auto piece = fields(body);
    std::string* text = nullptr;
    std::string* score_bytes = nullptr;
    for (auto& [t, v] : piece) {
      if (t == ((1 << 3) | 2)) text = &v;
      if (t == ((2 << 3) | 5)) score_bytes = &v;
    }
    if (text == nullptr) continue;
    float score = 0;  // proto2's default where the piece gives none
    if (score_bytes != nullptr) std::memcpy(&score, score_bytes->data(), 4);
    const float was = score;
    edit(text, &score);
    if (score_bytes != nullptr) {
      std::memcpy(score_bytes->data(), &score, 4);
    } else if (score != was) {
      std::string v(4, '\0');
      std::memcpy(v.data(), &score, 4);
      piece.emplace_back((2 << 3) | 5, std::move(v));
    }
    body = serialize(piece);
  }
  return serialize(top);
}

// The serialized model with the piece `from` renamed `to`.
std::string RenamePiece(const std::string& model, std::string_view from, std::string_view to) {
  return EditPieces(model, [&](std::string* text, float*) {
    if (*text == from) *text = std::string(to);
  });
}

// SentencePiece's agenda merges the highest score first and, of equal scores, the leftmost pair;
// trained models have no equal scores, so the order among ties is tested on models whose merge
// scores are rounded to a few values, and a merge scored -inf (which the encoder's scan of short
// spans cannot rank: it keeps the heap there) on a model with one. Both with the chunk cache (short
// spans, by scan) and without (whole documents, by heap), against SentencePiece.
TEST(BpeTest, TiedAndMinusInfinityScoresMergeAsSentencePieceDoes) {
  const std::string model = VariantModel("bytefallback_splitdigits");
  ASSERT_FALSE(model.empty());
  const std::vector<std::string> docs = Generated(8, 300, 2000, /*invalid=*/false);
  int rounded = 0, worst = 0;
  const std::string ties = EditPieces(model, [&](std::string*, float* score) {
    if (*score < -10) {  // the merged pieces (the characters score 0 and above)
      *score = std::floor(*score / 40) * 40;
      ++rounded;
    }
  });
  float top = -std::numeric_limits<float>::infinity();
  EditPieces(model, [&](std::string*, float* score) {
    if (*score < -10) top = std::max(top, *score);
  });
  const std::string minus_inf = EditPieces(model, [&](std::string*, float* score) {
    if (*score == top) {
      *score = -std::numeric_limits<float>::infinity();
      ++worst;
    }
  });
  ASSERT_GT(rounded, 100);
  ASSERT_EQ(worst, 1);
  for (const auto& [name, bytes] : {std::pair<std::string, std::string>{"ties", ties},
                                    {"minus_inf", minus_inf}}) {
    auto tok = Tokenizer::FromBytes(bytes, name);
    ASSERT_TRUE(tok.ok()) << name << ": " << tok.status();
    ASSERT_TRUE((*tok)->native()) << name << ": " << (*tok)->native_why_not();
    EXPECT_TRUE((*tok)->native_chunk_cache()) << name;
    std::string first;
    EXPECT_EQ(Mismatches(**tok, docs, &first), 0u) << name << ": " << first;
    (*tok)->DisableChunkCacheForTesting();
    first.clear();
    EXPECT_EQ(Mismatches(**tok, docs, &first), 0u) << name << " without cache: " << first;
  }
}

// A model whose piece merges from a character the vocabulary lacks (SentencePiece then gives that
// character <unk>, or its bytes, inside the merge) is refused at load with the reason, and every
// document goes to SentencePiece under either engine.
TEST(BpeTest, RefusesAMergeFromACharacterOutsideTheVocabulary) {
  const std::string model = VariantModel("bytefallback_splitdigits");
  ASSERT_FALSE(model.empty());
  // "e" is a character of many merged pieces; renamed, it leaves the vocabulary.
  auto tok = Tokenizer::FromBytes(RenamePiece(model, "e", "\xe2\x98\x83\xe2\x98\x83"), "renamed");
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_FALSE((*tok)->native());
  EXPECT_THAT((*tok)->native_why_not(), ::testing::HasSubstr("merges from a character outside the vocabulary"));
  std::vector<int> a, b;
  ASSERT_TRUE((*tok)->EncodeRaw("the element never ends here", &a, Engine::kGrist).ok());
  ASSERT_TRUE((*tok)->EncodeRaw("the element never ends here", &b, Engine::kSentencePiece).ok());
  EXPECT_EQ(a, b);
  // The untouched model is encoded natively.
  auto plain = Tokenizer::FromBytes(model, "plain");
  ASSERT_TRUE(plain.ok());
  EXPECT_TRUE((*plain)->native()) << (*plain)->native_why_not();
}

TEST(BpeTest, FallsBackWhereNotExact) {
  auto uni = Train("unigram", {{"vocab_size", "2300"}, {"model_type", "unigram"}}, TrainingLines(5));
  ASSERT_NE(uni, nullptr);
  EXPECT_FALSE(uni->native());
  EXPECT_EQ(uni->native_why_not(), "not a BPE model");
  // Unigram still encodes, through SentencePiece, under either engine.
  std::vector<int> a, b;
  ASSERT_TRUE(uni->EncodeRaw("hello world", &a, Engine::kGrist).ok());
  ASSERT_TRUE(uni->EncodeRaw("hello world", &b, Engine::kSentencePiece).ok());
  EXPECT_EQ(a, b);
  EXPECT_FALSE(a.empty());
}

// The encode stage: both engines and 1 or 3 threads write the same token files.
TEST(BpeTest, EncodeStageSameBytesForEnginesAndThreads) {
  TempDir tmp;
  const std::string model = TrainBytes("bytefallback_splitdigits", Variants()[0].kwargs, TrainingLines(1));
  ASSERT_FALSE(model.empty());
  ASSERT_TRUE(WriteFileAtomic(Env::Default(), tmp.Join("m.model"), model).ok());
  std::string jsonl;
  for (const std::string& d : Generated(6, 300, 4000, /*invalid=*/false)) {
    jsonl += "{\"text\":";
    AppendJsonString(&jsonl, d);
    jsonl += "}\n";
  }
  ASSERT_TRUE(WriteFileAtomic(Env::Default(), tmp.Join("docs.jsonl"), jsonl).ok());
  std::string first_bin, first_idx;
  for (const char* engine : {"grist", "sentencepiece"}) {
    for (int threads : {1, 3}) {
      EncodeStageOptions o;
      o.model_path = tmp.Join("m.model");
      o.encode.engine = *ParseEngine(engine);
      o.split_bytes = 16 << 10;
      RunOptions run;
      run.threads = threads;
      run.progress = false;
      const std::string out = tmp.Join(absl::StrCat("out-", engine, threads));
      auto rep = RunEncode(Env::Default(), {tmp.Join("docs.jsonl")}, out, o, run);
      ASSERT_TRUE(rep.ok()) << rep.status();
      EXPECT_EQ(rep->engine.substr(0, 5), std::string(engine).substr(0, 5));
      auto bin = ReadFileToString(Env::Default(), out + "/tokens-00000-of-00001.bin");
      auto idx = ReadFileToString(Env::Default(), out + "/tokens-00000-of-00001.idx");
      ASSERT_TRUE(bin.ok() && idx.ok());
      if (first_bin.empty()) {
        first_bin = *bin;
        first_idx = *idx;
        EXPECT_GT(first_bin.size(), 10000u);
      } else {
        EXPECT_TRUE(*bin == first_bin && *idx == first_idx) << engine << " threads " << threads;
      }
    }
  }
}

TEST(BpeTest, EngineNames) {
  EXPECT_EQ(*ParseEngine("grist"), Engine::kGrist);
  EXPECT_EQ(*ParseEngine("sentencepiece"), Engine::kSentencePiece);
  EXPECT_EQ(ParseEngine("spm").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(EngineName(Engine::kSentencePiece), "sentencepiece");
}

// ---- The shared corpus: every document of the files the issue names.

void AddRecords(const std::string& path, std::vector<std::string>* docs) {
  auto files = ListInputs(Env::Default(), {path});
  ASSERT_TRUE(files.ok()) << files.status();
  for (size_t fi = 0; fi < files->size(); ++fi) {
    InputSplit split;
    split.file_index = fi;
    split.bytes = (*files)[fi].size;
    auto r = OpenRecordReader(Env::Default(), (*files)[fi], split, InputOptions{});
    ASSERT_TRUE(r.ok()) << r.status();
    Document d;
    while (true) {
      auto more = (*r)->Next(&d);
      ASSERT_TRUE(more.ok()) << more.status();
      if (!*more) break;
      if (d.error.empty() && !d.text.empty()) docs->push_back(d.text);
    }
  }
}

// 20newsgroups: one raw message per file, from the tar (some not UTF-8).
void AddNewsgroups(const std::string& tar, const TempDir& tmp, std::vector<std::string>* docs) {
  std::string cmd = absl::StrCat("tar --zstd -xf ", tar, " -C ", tmp.path());
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::vector<std::string> paths;
  for (const auto& e : std::filesystem::recursive_directory_iterator(tmp.path())) {
    if (e.is_regular_file()) paths.push_back(e.path().string());
  }
  std::sort(paths.begin(), paths.end());
  for (const auto& p : paths) {
    std::ifstream f(p, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    docs->push_back(ss.str());
  }
}

// Every document with GRIST_BPE_ALL_DOCUMENTS=1 (about 17 CPU-minutes: SentencePiece itself is the
// slow side); otherwise every 8th, from every file, so that the suite fits CI's budget.
size_t CorpusStride() {
  const char* all = std::getenv("GRIST_BPE_ALL_DOCUMENTS");
  return all != nullptr && std::string(all) == "1" ? 1 : 8;
}

const std::vector<std::string>& CorpusDocs() {
  static std::vector<std::string>* docs = [] {
    auto* d = new std::vector<std::string>();
    auto* sample = new std::vector<std::string>();
    std::string root = grist::testing::CorpusDir();
    AddRecords(root + "/wikinews-en", d);
    AddRecords(root + "/wikipedia-en-2015", d);
    for (const char* w : {"dolma-cc", "dolma-ccnet-head", "olmo-c4", "grover-realnews",
                          "dclm-quality-annotations"}) {
      AddRecords(root + "/web-samples/" + w, d);
    }
    TempDir tmp;
    AddNewsgroups(root + "/20newsgroups.tar.zst", tmp, d);
    const size_t stride = CorpusStride();
    for (size_t i = 0; i < d->size(); i += stride) sample->push_back(std::move((*d)[i]));
    delete d;
    return sample;
  }();
  return *docs;
}

TEST(BpeCorpusTest, MistralOnEveryDocument) {
  GRIST_REQUIRE_CORPUS(model, "tokenizers/mistral-v1-spm-32k/tokenizer.model.v1");
  auto tok = Tokenizer::Load(Env::Default(), model);
  ASSERT_TRUE(tok.ok());
  ASSERT_TRUE((*tok)->native()) << (*tok)->native_why_not();
  EXPECT_TRUE((*tok)->native_chunk_cache());
  const auto& docs = CorpusDocs();
  ASSERT_GT(docs.size(), 40000u / CorpusStride());
  std::string first;
  EXPECT_EQ(Mismatches(**tok, docs, &first), 0u) << first;
}

TEST(BpeCorpusTest, GristTrainedModelsOnEveryDocument) {
  GRIST_REQUIRE_CORPUS(news, "wikinews-en");
  // Training lines: the first 20,000 lines of Wikinews.
  std::vector<std::string> docs;
  AddRecords(news, &docs);
  std::vector<std::string> lines;
  for (const auto& d : docs) {
    std::string_view t = d;
    while (!t.empty() && lines.size() < 20000) {
      size_t nl = t.find('\n');
      if (nl > 0 && nl != std::string_view::npos) lines.emplace_back(t.substr(0, nl));
      t.remove_prefix(nl == std::string_view::npos ? t.size() : nl + 1);
    }
  }
  const auto& all = CorpusDocs();
  for (const Variant& v : std::vector<Variant>{
           {"bytefallback_splitdigits",
            {{"vocab_size", "4000"}, {"byte_fallback", "true"}, {"split_digits", "true"},
             {"normalization_rule_name", "identity"}}},
           {"bytefallback", {{"vocab_size", "4000"}, {"byte_fallback", "true"},
                             {"normalization_rule_name", "identity"}}},
           {"user_defined", {{"vocab_size", "4000"}, {"byte_fallback", "true"},
                             {"split_digits", "true"}, {"normalization_rule_name", "identity"},
                             {"user_defined_symbols", "<sep>,<eod>,@@"}}}}) {
    auto tok = Train(std::string("wikinews_") + v.name, v.kwargs, lines);
    ASSERT_NE(tok, nullptr);
    ASSERT_TRUE(tok->native()) << v.name << ": " << tok->native_why_not();
    std::string first;
    EXPECT_EQ(Mismatches(*tok, all, &first), 0u) << v.name << ": " << first;
  }
}

}  // namespace
}  // namespace grist::tokenize
