// The stage context's helpers (dedup/internal/stage_context.h): the exact hash of normalized text
// and the window of input splits the reading stages keep in flight.
#include "dedup/internal/stage_context.h"

#include <gtest/gtest.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "common/env.h"
#include "common/hash.h"
#include "common/rng.h"
#include "dedup/dedup.h"
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

}  // namespace
}  // namespace grist::dedup
