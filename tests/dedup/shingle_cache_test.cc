// ShingleCache (dedup/internal/shingle_cache.h): what is added comes back by split and ordinal,
// the bound holds for any number of threads, and a failed Add closes the cache.
#include "dedup/internal/shingle_cache.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

namespace grist::dedup::internal {
namespace {

std::vector<uint64_t> DocHashes(size_t split, size_t doc) {
  std::vector<uint64_t> h((split * 7 + doc * 13) % 40);  // some documents have none
  for (size_t i = 0; i < h.size(); ++i) h[i] = (split << 40) ^ (doc << 20) ^ i;
  return h;
}

TEST(ShingleCache, KeptSplitsGiveBackEachDocumentsHashes) {
  ShingleCache cache(4, 1 << 20);
  for (size_t split : {2, 0, 3}) {  // any order; split 1 never offered
    std::vector<ShingleCache::DocSpan> docs;
    for (size_t d = 0; d < 50; ++d) {
      const std::vector<uint64_t> h = DocHashes(split, d);
      ShingleCache::DocSpan span;
      ASSERT_TRUE(cache.Add(h, &span));
      docs.push_back(span);
    }
    cache.Keep(split, std::move(docs));
  }
  EXPECT_TRUE(cache.open());
  EXPECT_EQ(cache.splits_kept(), 3u);
  ShingleCache::SplitView view;
  EXPECT_FALSE(cache.Find(1, &view));
  EXPECT_FALSE(cache.Find(4, &view));
  for (size_t split : {0, 2, 3}) {
    ASSERT_TRUE(cache.Find(split, &view));
    ASSERT_EQ(view.docs(), 50u);
    for (size_t d = 0; d < 50; ++d) {
      const std::vector<uint64_t> want = DocHashes(split, d);
      const auto got = view.Doc(d);
      EXPECT_EQ(std::vector<uint64_t>(got.begin(), got.end()), want) << split << " " << d;
    }
  }
}

TEST(ShingleCache, AddPastTheBoundFailsAndClosesForEveryThread) {
  constexpr uint64_t kBound = 64 << 10;
  ShingleCache cache(8, kBound);
  std::atomic<uint64_t> added_bytes{0};
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      const std::vector<uint64_t> h(100 + t, static_cast<uint64_t>(t));
      ShingleCache::DocSpan span;
      while (true) {
        if (!cache.Add(h, &span)) {
          ++failures;
          return;
        }
        added_bytes += 8 * h.size() + sizeof(span);
        ASSERT_EQ(span.length, h.size());
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_FALSE(cache.open());
  EXPECT_EQ(failures.load(), 4);
  EXPECT_LE(added_bytes.load(), kBound);
  EXPECT_GT(added_bytes.load(), kBound - 4 * (8 * 104 + 16));  // filled up to the last documents
  ShingleCache::DocSpan span;
  EXPECT_FALSE(cache.Add(std::vector<uint64_t>{1}, &span));  // stays closed
  EXPECT_EQ(cache.splits_kept(), 0u);
}

TEST(ShingleCache, ADocumentLargerThanABlockTakesItsOwnBlock) {
  ShingleCache cache(1, 8 << 20);
  const std::vector<uint64_t> small(10, 1), big(100000, 2);  // 800 KB: beyond a 64 KiB block
  std::vector<ShingleCache::DocSpan> docs(3);
  ASSERT_TRUE(cache.Add(small, &docs[0]));
  ASSERT_TRUE(cache.Add(big, &docs[1]));
  ASSERT_TRUE(cache.Add(small, &docs[2]));
  cache.Keep(0, std::move(docs));
  ShingleCache::SplitView view;
  ASSERT_TRUE(cache.Find(0, &view));
  EXPECT_EQ(view.Doc(0).size(), 10u);
  ASSERT_EQ(view.Doc(1).size(), 100000u);
  EXPECT_EQ(view.Doc(1)[0], 2u);
  EXPECT_EQ(view.Doc(1)[99999], 2u);
  EXPECT_EQ(view.Doc(2)[9], 1u);
}

}  // namespace
}  // namespace grist::dedup::internal
