// Helpers shared by the dedup tests: corpora of near-duplicate families, options, and reading
// back the output folder.
#ifndef GRIST_TESTS_DEDUP_DEDUP_TEST_UTIL_H_
#define GRIST_TESTS_DEDUP_DEDUP_TEST_UTIL_H_

#include <zstd.h>

#include <string>
#include <vector>

#include "common/env.h"
#include "common/json_writer.h"
#include "common/records.h"
#include "common/rng.h"
#include "common/stage.h"
#include "dedup/dedup.h"
#include "gtest/gtest.h"

namespace grist::dedup::testing {

inline std::string Words(Rng& rng, int n) {
  static const char* kVocab[] = {"alpha", "beta",  "gamma", "delta", "epsilon", "zeta",  "eta",
                                 "theta", "iota",  "kappa", "lambda", "mu",     "nu",    "xi",
                                 "omicron", "pi",  "rho",   "sigma", "tau",     "upsilon", "phi",
                                 "chi",   "psi",   "omega", "river", "stone",   "cloud", "field"};
  std::string s;
  for (int i = 0; i < n; ++i) {
    if (i) s += (i % 17 == 0) ? ".\n" : " ";
    s += kVocab[rng.Uniform(28)];
    s += std::to_string(rng.Uniform(50));
  }
  return s;
}

// Replaces `k` words (at deterministic positions) of a space/newline separated text.
inline std::string Mutate(const std::string& text, int k, uint64_t seed) {
  Rng rng(seed);
  std::vector<std::string> words;
  std::string cur;
  for (char ch : text) {
    if (ch == ' ') {
      words.push_back(cur);
      cur.clear();
    } else {
      cur.push_back(ch);
    }
  }
  words.push_back(cur);
  for (int i = 0; i < k; ++i) words[rng.Uniform(words.size())] = "changed" + std::to_string(i);
  std::string out;
  for (size_t i = 0; i < words.size(); ++i) out += (i ? " " : "") + words[i];
  return out;
}

inline std::string JsonLine(const std::string& text) {
  std::string s = "{\"text\":";
  AppendJsonString(&s, text);
  return s + ",\"n\":1}\n";
}

// Options with a 64 MB budget: what the tests need, and the sort buffers stay small (reserving the
// default 1 GB costs seconds of shadow-memory page faults under AddressSanitizer).
inline DedupOptions Budget64() {
  DedupOptions o;
  o.memory_limit = 64 << 20;
  return o;
}

inline RunOptions Quiet(int threads = 1) {
  RunOptions r;
  r.threads = threads;
  r.progress = false;
  return r;
}

// A corpus with many near-duplicate families spread over many splits.
inline std::string FamilyCorpus(int families, int per_family) {
  Rng rng(99);
  std::vector<std::string> bases;
  for (int f = 0; f < families; ++f) bases.push_back(Words(rng, 120 + static_cast<int>(rng.Uniform(200))));
  std::string in;
  for (int i = 0; i < families * per_family; ++i) {
    const int f = static_cast<int>(rng.Uniform(families));
    const int edits = static_cast<int>(rng.Uniform(4));
    in += JsonLine(edits == 3 ? Words(rng, 150) : Mutate(bases[f], edits, rng.Next()));
  }
  return in;
}

struct OutDoc {
  Document doc;
  std::string raw;  // the record line as written
  // A string or number member of the record's "dedup" object ("" when absent).
  std::string Field(const std::string& name) const {
    size_t d = raw.find("\"dedup\":{");
    if (d == std::string::npos) return "";
    std::string key = "\"" + name + "\":";
    size_t p = raw.find(key, d);
    if (p == std::string::npos) return "";
    p += key.size();
    if (raw[p] == '"') {
      std::string out;
      for (size_t i = p + 1; i < raw.size() && raw[i] != '"'; ++i) {
        if (raw[i] == '\\' && i + 1 < raw.size()) ++i;
        out.push_back(raw[i]);
      }
      return out;
    }
    size_t e = raw.find_first_of(",}", p);
    return raw.substr(p, e - p);
  }
};

inline std::string Unzstd(const std::string& data) {
  std::string out;
  ZSTD_DStream* ds = ZSTD_createDStream();
  ZSTD_initDStream(ds);
  ZSTD_inBuffer in{data.data(), data.size(), 0};
  std::string buf(1 << 16, '\0');
  while (in.pos < in.size) {
    ZSTD_outBuffer o{buf.data(), buf.size(), 0};
    size_t r = ZSTD_decompressStream(ds, &o, &in);
    if (ZSTD_isError(r)) break;
    out.append(buf.data(), o.pos);
  }
  ZSTD_freeDStream(ds);
  return out;
}

// Every record of the *.jsonl.zst parts directly in `dir`, in part order.
inline std::vector<OutDoc> ReadOutput(const std::string& dir) {
  std::vector<OutDoc> out;
  Env* env = Env::Default();
  auto names = env->ListDir(dir);
  if (!names.ok()) return out;
  for (const std::string& n : *names) {
    if (n.size() < 10 || n.substr(n.size() - 10) != ".jsonl.zst") continue;
    const std::string path = JoinPath(dir, n);
    auto files = ListInputs(env, {path});
    EXPECT_TRUE(files.ok());
    auto reader = OpenRecordReader(env, (*files)[0], InputSplit{}, InputOptions{});
    EXPECT_TRUE(reader.ok()) << reader.status();
    auto data = ReadFileToString(env, path);
    std::string text = Unzstd(*data);
    size_t pos = 0;
    while (true) {
      Document d;
      auto more = (*reader)->Next(&d);
      EXPECT_TRUE(more.ok()) << more.status();
      if (!more.ok() || !*more) break;
      size_t nl = text.find('\n', pos);
      OutDoc o;
      o.doc = std::move(d);
      o.raw = text.substr(pos, nl - pos);
      pos = nl + 1;
      out.push_back(std::move(o));
    }
  }
  return out;
}

// All bytes of the *.jsonl.zst parts in `dir`, decompressed and concatenated in name order.
inline std::string OutputBytes(const std::string& dir) {
  std::string all;
  auto names = Env::Default()->ListDir(dir);
  if (!names.ok()) return all;
  for (const std::string& n : *names) {
    if (n.size() < 10 || n.substr(n.size() - 10) != ".jsonl.zst") continue;
    all += Unzstd(*ReadFileToString(Env::Default(), JoinPath(dir, n)));
  }
  return all;
}

}  // namespace grist::dedup::testing

#endif  // GRIST_TESTS_DEDUP_DEDUP_TEST_UTIL_H_
