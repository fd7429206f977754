#include "loader/permutation.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

namespace grist::loader {
namespace {

TEST(FeistelPermutation, IsABijectionForManySizes) {
  for (uint64_t n : {1ull, 2ull, 3ull, 5ull, 16ull, 17ull, 100ull, 1000ull, 4097ull, 65536ull}) {
    FeistelPermutation p(n, 42);
    std::vector<char> seen(n, 0);
    for (uint64_t i = 0; i < n; ++i) {
      uint64_t y = p.Map(i);
      ASSERT_LT(y, n);
      ASSERT_FALSE(seen[y]) << "n=" << n << " duplicate image " << y;
      seen[y] = 1;
      ASSERT_EQ(p.Inverse(y), i);
    }
  }
}

TEST(FeistelPermutation, DependsOnKeyOnlyAndShuffles) {
  FeistelPermutation a(1000, 1), b(1000, 1), c(1000, 2);
  int same_as_identity = 0, same_ab = 0, same_ac = 0;
  for (uint64_t i = 0; i < 1000; ++i) {
    same_ab += a.Map(i) == b.Map(i);
    same_ac += a.Map(i) == c.Map(i);
    same_as_identity += a.Map(i) == i;
  }
  EXPECT_EQ(same_ab, 1000);
  EXPECT_LT(same_ac, 20);
  EXPECT_LT(same_as_identity, 20);
}

TEST(FeistelPermutation, PinnedValuesAreStableAcrossBuilds) {
  // The order is part of the release's contract: these values must never change.
  FeistelPermutation p(10, EpochKey(1234, 0));
  std::vector<uint64_t> got;
  for (uint64_t i = 0; i < 10; ++i) got.push_back(p.Map(i));
  std::vector<uint64_t> sorted = got;
  std::sort(sorted.begin(), sorted.end());
  for (uint64_t i = 0; i < 10; ++i) EXPECT_EQ(sorted[i], i);
  EXPECT_EQ(got, (std::vector<uint64_t>{9, 8, 2, 7, 0, 4, 1, 3, 6, 5}));
}

TEST(FeistelPermutation, HugeDomainsNeedNoMemory) {
  const uint64_t n = (uint64_t{1} << 40) + 12345;
  FeistelPermutation p(n, 9);
  for (uint64_t i : {uint64_t{0}, uint64_t{1}, n / 2, n - 1}) {
    uint64_t y = p.Map(i);
    EXPECT_LT(y, n);
    EXPECT_EQ(p.Inverse(y), i);
  }
}

}  // namespace
}  // namespace grist::loader
