#include "dedup/minhash.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "common/hash.h"
#include "common/rng.h"
#include "dedup/internal/minhash_kernel.h"
#include "hwy/targets.h"

namespace grist::dedup {
namespace {

std::vector<uint64_t> Sorted(std::vector<uint64_t> v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

TEST(Normalize, LowercasesFoldsPunctuationAndKeepsNonAsciiBytes) {
  std::string out;
  NormalizeForShingles("  Hello, World!\tfoo-bar\n\nX2  ", &out);
  EXPECT_EQ(out, "hello world foo bar x2");
  NormalizeForShingles("caf\xc3\xa9 \xff\xfe!", &out);  // UTF-8 and invalid bytes are word bytes
  EXPECT_EQ(out, "caf\xc3\xa9 \xff\xfe");
  NormalizeForShingles("...,;  ", &out);
  EXPECT_EQ(out, "");
}

TEST(Shingles, WordNgramsAreHashesOfSpaceJoinedWords) {
  std::vector<uint64_t> h;
  ShingleHashes("The cat, the HAT.", {ShingleKind::kWord, 2}, &h);
  EXPECT_EQ(h, Sorted({Hash64("the cat"), Hash64("cat the"), Hash64("the hat")}));
  // Repeated shingles count once.
  ShingleHashes("a b a b a b", {ShingleKind::kWord, 2}, &h);
  EXPECT_EQ(h, Sorted({Hash64("a b"), Hash64("b a")}));
}

TEST(Shingles, UnorderedKeepsTextOrderAndGivesTheSameSignature) {
  const std::string text = "one two three one two three one two three four";
  std::vector<uint64_t> sorted, unordered;
  ShingleHashes(text, {ShingleKind::kWord, 3}, &sorted);
  ShingleHashesUnordered(text, {ShingleKind::kWord, 3}, &unordered);
  EXPECT_EQ(unordered.size(), 8u);
  EXPECT_EQ(unordered.front(), Hash64("one two three"));
  EXPECT_EQ(Sorted(unordered), sorted);
  MinHasher mh(112, 9);
  std::vector<uint64_t> a(112), b(112);
  mh.Compute(sorted, a.data());
  mh.Compute(unordered, b.data());
  EXPECT_EQ(a, b);
}

TEST(Shingles, ShortAndEmptyDocuments) {
  std::vector<uint64_t> h;
  ShingleHashes("just three words", {ShingleKind::kWord, 5}, &h);
  EXPECT_EQ(h, std::vector<uint64_t>{Hash64("just three words")});
  ShingleHashes("", {ShingleKind::kWord, 5}, &h);
  EXPECT_TRUE(h.empty());
  ShingleHashes("!!! ??? ...", {ShingleKind::kWord, 5}, &h);
  EXPECT_TRUE(h.empty());
}

TEST(Shingles, CharNgrams) {
  std::vector<uint64_t> h;
  ShingleHashes("AbC d", {ShingleKind::kChar, 3}, &h);  // normalized "abc d"
  EXPECT_EQ(h, Sorted({Hash64("abc"), Hash64("bc "), Hash64("c d")}));
  ShingleHashes("ab", {ShingleKind::kChar, 3}, &h);
  EXPECT_EQ(h, std::vector<uint64_t>{Hash64("ab")});
}

TEST(Jaccard, ExactValues) {
  EXPECT_DOUBLE_EQ(JaccardSorted({1, 2, 3, 4}, {3, 4, 5, 6}), 2.0 / 6.0);
  EXPECT_DOUBLE_EQ(JaccardSorted({1, 2}, {1, 2}), 1.0);
  EXPECT_DOUBLE_EQ(JaccardSorted({}, {}), 0.0);
  EXPECT_DOUBLE_EQ(JaccardSorted({1}, {}), 0.0);
}

std::vector<uint64_t> RandomSet(Rng& rng, size_t n) {
  std::vector<uint64_t> v(n);
  for (auto& x : v) x = rng.Next();
  return Sorted(v);
}

TEST(MinHasher, SimdMatchesScalarOnEveryTarget) {
  Rng rng(7);
  // Sets of one to three hashes too: their minima are often >= 2^63, where the kernels without an
  // unsigned 64-bit minimum must still order as unsigned (minhash_kernel.cc).
  const std::vector<std::vector<uint64_t>> sets = {RandomSet(rng, 1000), RandomSet(rng, 1),
                                                   RandomSet(rng, 2), RandomSet(rng, 3)};
  int targets_tested = 0;
  for (const std::vector<uint64_t>& set : sets) {
    for (int num_perm : {1, 7, 8, 64, 100, 112, 128, 256}) {
      MinHasher mh(num_perm, 42);
      std::vector<uint64_t> want(num_perm);
      mh.ComputeScalar(set.data(), set.size(), want.data());
      for (uint32_t bit = 1; bit != 0; bit <<= 1) {
        if ((hwy::SupportedTargets() & bit) == 0) continue;
        hwy::SetSupportedTargetsForTest(bit);
        std::vector<uint64_t> got(num_perm, 0);
        mh.Compute(set, got.data());
        EXPECT_EQ(got, want) << "set of " << set.size() << ", num_perm " << num_perm << ", target "
                             << hwy::TargetName(bit);
        ++targets_tested;
      }
      hwy::SetSupportedTargetsForTest(0);
    }
  }
  EXPECT_GE(targets_tested, 32);
  std::printf("MinHash SIMD target chosen here: %s\n", MinHasher::SimdTarget().c_str());
}

TEST(MinHasher, EmptySetIsAllMax) {
  MinHasher mh(112, 1);
  std::vector<uint64_t> sig(112, 0);
  mh.Compute(nullptr, 0, sig.data());
  for (uint64_t v : sig) EXPECT_EQ(v, ~uint64_t{0});
}

TEST(MinHasher, EstimateTracksJaccard) {
  Rng rng(11);
  MinHasher mh(256, 3);
  for (double target : {0.2, 0.5, 0.8, 0.95}) {
    // |A n B| = k, |A u B| = 2000: A = common + a_only, B = common + b_only.
    const size_t uni = 2000, inter = static_cast<size_t>(target * uni);
    std::vector<uint64_t> common = RandomSet(rng, inter);
    std::vector<uint64_t> a = common, b = common;
    const size_t rest = uni - common.size();
    for (size_t i = 0; i < rest; ++i) (i % 2 ? a : b).push_back(rng.Next());
    a = Sorted(a);
    b = Sorted(b);
    const double truth = JaccardSorted(a, b);
    std::vector<uint64_t> sa(256), sb(256);
    mh.Compute(a, sa.data());
    mh.Compute(b, sb.data());
    const double est = EstimateJaccard(sa.data(), sb.data(), 256);
    // Standard error sqrt(J(1-J)/256) <= 0.031; allow 4 sigma.
    EXPECT_NEAR(est, truth, 0.125) << "J=" << truth;
  }
}

TEST(Lsh, ProbabilityAndOptimalParameters) {
  EXPECT_NEAR(LshProbability(0.8, 14, 8), 0.9235475586, 1e-9);
  EXPECT_NEAR(LshProbability(0.5, 14, 8), 0.0533204157, 1e-9);
  // The same choices as datasketch's criterion (equal weights), checked against numpy.
  LshParams p = OptimalLshParams(0.8, 112);
  EXPECT_EQ(p.bands, 9);
  EXPECT_EQ(p.rows, 12);
  p = OptimalLshParams(0.5, 112);
  EXPECT_EQ(p.bands, 22);
  EXPECT_EQ(p.rows, 5);
  p = OptimalLshParams(0.7, 112);
  EXPECT_EQ(p.bands, 12);
  EXPECT_EQ(p.rows, 9);
  LshParams a = LshAreas(0.8, 14, 8);
  EXPECT_NEAR(a.false_positive_area, 0.12828, 1e-4);
  EXPECT_NEAR(a.false_negative_area, 0.00206, 1e-4);
}

}  // namespace
}  // namespace grist::dedup

namespace grist::dedup {
namespace {

// Random text: words of ASCII letters (mixed case), digits and UTF-8 bytes, separated by runs of
// spaces, tabs, newlines and punctuation, some at the ends.
std::string RandomText(Rng& rng, size_t words) {
  static const char* kSeps[] = {" ", "  ", "\t", "\n\n", ", ", " - ", "!\r\n", "\f\v "};
  std::string t = rng.Uniform(2) ? " \n" : "";
  for (size_t i = 0; i < words; ++i) {
    const int len = 1 + static_cast<int>(rng.Uniform(9));
    for (int k = 0; k < len; ++k) {
      const uint64_t r = rng.Uniform(40);
      if (r < 26) t.push_back(static_cast<char>((rng.Uniform(2) ? 'a' : 'A') + r));
      else if (r < 36) t.push_back(static_cast<char>('0' + r - 26));
      else t += "\xc3\xa9";
    }
    t += kSeps[rng.Uniform(8)];
  }
  return t;
}

// The specification of the shingles, written plainly: normalize, split at the spaces, join n
// words (or take n bytes) and hash each with Hash64.
std::vector<uint64_t> ReferenceShingles(std::string_view text, const ShingleOptions& o) {
  std::string norm;
  NormalizeForShingles(text, &norm);
  std::vector<uint64_t> out;
  if (norm.empty()) return out;
  const size_t n = static_cast<size_t>(o.n);
  if (o.kind == ShingleKind::kChar) {
    if (norm.size() <= n) return {Hash64(norm)};
    for (size_t i = 0; i + n <= norm.size(); ++i) out.push_back(Hash64(norm.substr(i, n)));
    return out;
  }
  std::vector<std::string> words;
  size_t pos = 0;
  while (true) {
    const size_t sp = norm.find(' ', pos);
    words.push_back(norm.substr(pos, sp == std::string::npos ? std::string::npos : sp - pos));
    if (sp == std::string::npos) break;
    pos = sp + 1;
  }
  if (words.size() <= n) return {Hash64(norm)};
  for (size_t i = 0; i + n <= words.size(); ++i) {
    std::string s = words[i];
    for (size_t k = 1; k < n; ++k) s += " " + words[i + k];
    out.push_back(Hash64(s));
  }
  return out;
}

TEST(Shingles, MatchTheSpecificationWithScratchReusedAcrossSizes) {
  Rng rng(7);
  std::string scratch;
  std::vector<uint64_t> got;
  // Large, small, empty and one-word texts in turn, through one scratch buffer; sets of more and
  // fewer than the radix sort's threshold (256).
  for (size_t words : {3000u, 2u, 0u, 400u, 1u, 5u, 6u, 60u, 255u, 257u, 1200u, 4u}) {
    const std::string text = RandomText(rng, words);
    for (const ShingleOptions& o : {ShingleOptions{ShingleKind::kWord, 5}, ShingleOptions{ShingleKind::kWord, 1},
                                    ShingleOptions{ShingleKind::kChar, 7}}) {
      const std::vector<uint64_t> want = ReferenceShingles(text, o);
      ShingleHashesUnordered(text, o, &got, &scratch);
      EXPECT_EQ(got, want) << words << " words";
      ShingleHashes(text, o, &got, &scratch);
      EXPECT_EQ(got, Sorted(want)) << words << " words";
      ShingleHashes(text, o, &got);  // no scratch
      EXPECT_EQ(got, Sorted(want)) << words << " words";
    }
  }
}

}  // namespace
}  // namespace grist::dedup

namespace grist::dedup {
namespace {

TEST(SortHashes, SameOrderAsStdSortForUniformCraftedAndRepeatedHashes) {
  Rng rng(11);
  for (size_t n : {0u, 1u, 63u, 64u, 65u, 300u, 4096u, 5000u, 70000u, 1100000u}) {
    for (int kind = 0; kind < 4; ++kind) {
      std::vector<uint64_t> v(n);
      for (auto& x : v) {
        x = rng.Next();
        if (kind == 1) x &= 0xffffu;                    // all in the first bucket (crafted)
        if (kind == 2) x = (x & 0xff) << 50;            // few distinct values, many repeats
        if (kind == 3) x |= 0xfff0000000000000ull;      // all in the last buckets
      }
      std::vector<uint64_t> want = v;
      std::sort(want.begin(), want.end());
      internal::SortHashes(&v);
      EXPECT_EQ(v, want) << "n " << n << " kind " << kind;
    }
  }
}

}  // namespace
}  // namespace grist::dedup
