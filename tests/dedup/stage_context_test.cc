// The stage context's helpers (dedup/internal/stage_context.h): the exact hash of normalized text
// and the window of input splits the reading stages keep in flight.
#include "dedup/internal/stage_context.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/env.h"
#include "common/hash.h"
#include "common/rng.h"
#include "dedup/dedup.h"
#include "dedup/dedup_format.h"
#include "dedup/internal/files.h"
#include "dedup/minhash.h"
#include "tests/test_util.h"

namespace grist::dedup {
namespace {

using ::grist::testing::TempDir;

TEST(ExactHash, EqualsTheHashOfNormalizeForExactWithScratchReused) {
  Rng rng(3);
  std::string scratch;
  const char kBytes[] = " \t\n\r\f\vaZ9.\xc3\xa9Qx";
  for (int round = 0; round < 300; ++round) {
    // Sizes up and down so the scratch buffer is reused larger than the text.
    const size_t len = round % 3 == 0 ? rng.Uniform(5000) : rng.Uniform(40);
    std::string text;
    for (size_t i = 0; i < len; ++i) text.push_back(kBytes[rng.Uniform(sizeof(kBytes) - 1)]);
    for (ExactNormalize m : {ExactNormalize::kNone, ExactNormalize::kWhitespace, ExactNormalize::kLower}) {
      EXPECT_EQ(internal::ExactHash(text, m, &scratch), Hash128Of(NormalizeForExact(text, m)))
          << "round " << round;
    }
  }
  for (const char* t : {"", " ", "  a  ", "a\tb", "\n\nA B\n"}) {
    EXPECT_EQ(internal::ExactHash(t, ExactNormalize::kWhitespace, &scratch),
              Hash128Of(NormalizeForExact(t, ExactNormalize::kWhitespace)));
  }
}

// Running text (words between single spaces, some upper case, now and then a newline, a tab, a
// double space or a NUL) at every alignment: the 16-byte blocks taken whole and the byte loop
// around them give NormalizeForExact's text.
TEST(ExactHash, RunningTextMatchesNormalizeForExactAtEveryAlignment) {
  Rng rng(4);
  std::string scratch;
  const char* kSeps[] = {" ", " ", " ", " ", " ", " ", " ", " ", "\n", "  ", "\t", " \n ", "\r\n"};
  for (int round = 0; round < 400; ++round) {
    std::string text(rng.Uniform(3), ' ');  // leading whitespace, sometimes
    const uint64_t words = rng.Uniform(120);
    for (uint64_t w = 0; w < words; ++w) {
      if (w) text += kSeps[rng.Uniform(std::size(kSeps))];
      const uint64_t len = 1 + rng.Uniform(12);
      for (uint64_t k = 0; k < len; ++k) {
        const uint64_t r = rng.Uniform(40);
        text.push_back(r == 0 ? '\0' : r < 6 ? static_cast<char>('A' + rng.Uniform(26))
                                             : static_cast<char>('a' + rng.Uniform(26)));
      }
    }
    if (rng.Uniform(2)) text += kSeps[rng.Uniform(std::size(kSeps))];  // trailing, sometimes
    for (size_t shift = 0; shift < 16; shift += 5) {
      const std::string t = text.substr(std::min(shift, text.size()));
      for (ExactNormalize m : {ExactNormalize::kWhitespace, ExactNormalize::kLower}) {
        EXPECT_EQ(internal::ExactHash(t, m, &scratch), Hash128Of(NormalizeForExact(t, m)))
            << "round " << round << ", shift " << shift;
      }
    }
    if (HasFailure()) break;
  }
}

// The stages that read documents keep two splits per thread in flight, counting the budget in
// the splits actually planned: 2 MB of input is cut into 64 KiB splits, far below the split_bytes
// cap (1 GiB / 32 capped at 16 MiB; 64 MiB / 32 = 2 MiB), whose count held 16 threads to one
// split each at the default budget and to 8 in all at 64 MB.
TEST(SplitWindow, TwoSplitsPerThreadWhenThePlannedSplitsFitTheBudget) {
  TempDir t;
  std::string jsonl;
  Rng rng(5);
  while (jsonl.size() < (2u << 20)) {
    jsonl += "{\"text\": \"";
    for (int w = 0; w < 200; ++w) absl::StrAppend(&jsonl, w ? " " : "", "w", rng.Uniform(5000));
    jsonl += "\"}\n";
  }
  ASSERT_TRUE(WriteFileAtomic(Env::Default(), t.Join("in.jsonl"), jsonl).ok());
  for (uint64_t budget : {uint64_t{1} << 30, uint64_t{64} << 20}) {
    DedupOptions o;
    o.memory_limit = budget;
    RunOptions run;
    run.threads = 16;
    auto c = internal::MakeCtx(Env::Default(), {t.Join("in.jsonl")}, t.Join("out"), o, run);
    ASSERT_TRUE(c.ok()) << c.status();
    ASSERT_GT(c->splits.size(), 16u);
    for (const InputSplit& s : c->splits) ASSERT_LE(s.bytes, uint64_t{64} << 10);
    EXPECT_EQ(internal::SplitWindow(*c, 2), 32u) << budget;
    EXPECT_EQ(internal::SplitWindow(*c, 1), 16u) << budget;
  }
}

// The signatures file holds, per document, the hash of each LSH band of its MinHash (what the
// buckets stage groups by), computed from the document's shingles here by definition.
TEST(Signatures, RecordsHoldTheBandHashesOfTheMinHash) {
  TempDir t;
  std::string jsonl;
  std::vector<std::string> texts;
  Rng rng(9);
  for (int d = 0; d < 40; ++d) {
    std::string text;
    for (int w = 0; w < 30 + d; ++w) absl::StrAppend(&text, w ? " " : "", "w", rng.Uniform(300));
    texts.push_back(text);
    absl::StrAppend(&jsonl, "{\"text\": \"", text, "\"}\n");
  }
  jsonl += "{\"text\": \"\"}\n";  // no shingles
  ASSERT_TRUE(WriteFileAtomic(Env::Default(), t.Join("in.jsonl"), jsonl).ok());
  DedupOptions o;
  RunOptions run;
  run.threads = 3;
  run.progress = false;
  ASSERT_TRUE(RunDedupStage(Env::Default(), DedupStage::kSignatures, {t.Join("in.jsonl")},
                            t.Join("out"), o, run).ok());
  auto c = internal::MakeCtx(Env::Default(), {t.Join("in.jsonl")}, t.Join("out"), o, run);
  ASSERT_TRUE(c.ok()) << c.status();
  const int bands = internal::SigBands(*c);
  const int rows = c->opt.rows;
  ASSERT_EQ(bands, 14);
  ASSERT_EQ(internal::SigRecordSize(*c), sizeof(format::SigRecord) + 8u * 14);
  auto reader = internal::FileReader::Open(Env::Default(),
                                           t.Join("out/.dedup-work/sig/sig-00000-of-00001.bin"),
                                           format::Kind::kSignatures, internal::SigRecordSize(*c));
  ASSERT_TRUE(reader.ok()) << reader.status();
  const MinHasher hasher(o.num_perm, o.seed);
  std::vector<char> rec(internal::SigRecordSize(*c));
  std::vector<uint64_t> shingles, sig(o.num_perm);
  for (size_t d = 0; d <= texts.size(); ++d) {
    auto more = (*reader)->Next(rec.data());
    ASSERT_TRUE(more.ok() && *more) << d;
    format::SigRecord r;
    std::memcpy(&r, rec.data(), sizeof(r));
    if (d == texts.size()) {
      EXPECT_TRUE(r.flags & format::kFlagNoShingles);
      continue;
    }
    ShingleHashesUnordered(texts[d], ShingleOptions{}, &shingles);
    hasher.Compute(shingles, sig.data());
    for (int b = 0; b < bands; ++b) {
      uint64_t stored;
      std::memcpy(&stored, rec.data() + sizeof(r) + 8 * static_cast<size_t>(b), 8);
      EXPECT_EQ(stored, internal::BandHash(sig.data(), b, rows)) << "doc " << d << " band " << b;
      EXPECT_EQ(stored, Hash64(reinterpret_cast<const char*>(sig.data() + b * rows), 8 * rows,
                               static_cast<uint64_t>(b)));
    }
  }
}

}  // namespace
}  // namespace grist::dedup
