// ShingleCache (dedup/internal/shingle_cache.h): what is added comes back by split and ordinal,
// the bound holds for any number of threads, a failed Add closes the cache, an abandoned cache
// finds nothing; KeepTrial's verdict from the candidates of the first splits.
#include "dedup/internal/shingle_cache.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <functional>
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


TEST(ShingleCache, AnAbandonedCacheFindsNothingAndKeepsNothing) {
  ShingleCache cache(3, 1 << 20);
  std::vector<ShingleCache::DocSpan> docs(1);
  const std::vector<uint64_t> h = DocHashes(0, 5);
  ASSERT_TRUE(cache.Add(h, &docs[0]));
  cache.Keep(0, std::vector<ShingleCache::DocSpan>(docs));
  ShingleCache::SplitView view;
  ASSERT_TRUE(cache.Find(0, &view));
  EXPECT_FALSE(cache.abandoned());
  cache.Abandon();
  EXPECT_TRUE(cache.abandoned());
  EXPECT_FALSE(cache.open());
  EXPECT_EQ(cache.splits_kept(), 0u);
  EXPECT_FALSE(cache.Find(0, &view));
  ShingleCache::DocSpan span;
  EXPECT_FALSE(cache.Add(h, &span));
  cache.Keep(1, std::vector<ShingleCache::DocSpan>(docs));  // after Abandon: ignored
  EXPECT_FALSE(cache.Find(1, &view));
  EXPECT_EQ(cache.splits_kept(), 0u);
}

// Band hashes of a document: `bands` values from `seed` (distinct documents, distinct values).
std::vector<uint64_t> Bands(uint64_t seed, int bands = 4) {
  std::vector<uint64_t> b(static_cast<size_t>(bands));
  for (int i = 0; i < bands; ++i) {
    b[i] = (seed + 1) * 0x9e3779b97f4a7c15ull + static_cast<uint64_t>(i) * 7919;
  }
  return b;
}

// Feeds `splits` splits of `docs` distinct documents each (100 bytes a split, one file each);
// `near(split)` says which splits get one more document sharing band 2 with the first document
// of split 0 (a candidate pair across splits). Returns the verdict after the last split.
KeepTrial::Verdict Feed(KeepTrial* t, int splits, int docs, const std::function<bool(int)>& near) {
  KeepTrial::Verdict v = KeepTrial::Verdict::kUndecided;
  uint64_t seed = 1000;
  for (int s = 0; s < splits; ++s) {
    for (int d = 0; d < docs; ++d) {
      const std::vector<uint64_t> b = Bands(seed);
      t->AddDoc(seed, ~seed, b.data(), 4);
      ++seed;
    }
    if (near(s) && s > 0) {
      std::vector<uint64_t> b = Bands(seed++);
      b[2] = Bands(1000)[2];
      t->AddDoc(seed, 7, b.data(), 4);
    }
    v = t->EndSplit(100, static_cast<size_t>(s), false);
  }
  return v;
}

TEST(KeepTrial, KeepsWhenAtLeastHalfTheTrialsBytesHoldCandidates) {
  {
    // Splits 1..4 of 8 hold a near copy of split 0's first document: 5 of 8 splits hit.
    KeepTrial t(800);
    EXPECT_EQ(Feed(&t, 8, 10, [](int s) { return s <= 4; }), KeepTrial::Verdict::kKeep);
    EXPECT_EQ(t.splits(), 8u);
    EXPECT_EQ(t.candidate_splits(), 5u);
    EXPECT_EQ(t.bytes(), 800u);
    EXPECT_EQ(t.reread_bytes(), 500u);
  }
  {
    // Splits 1..2: 3 of 8 hit, 300 of 800 bytes.
    KeepTrial t(800);
    EXPECT_EQ(Feed(&t, 8, 10, [](int s) { return s <= 2; }), KeepTrial::Verdict::kAbandon);
    EXPECT_EQ(t.candidate_splits(), 3u);
    EXPECT_EQ(t.reread_bytes(), 300u);
  }
  {
    // Exactly half: kept.
    KeepTrial t(800);
    EXPECT_EQ(Feed(&t, 8, 10, [](int s) { return s <= 3; }), KeepTrial::Verdict::kKeep);
  }
  {
    // No candidates at all.
    KeepTrial t(800);
    EXPECT_EQ(Feed(&t, 8, 10, [](int) { return false; }), KeepTrial::Verdict::kAbandon);
    EXPECT_EQ(t.candidate_splits(), 0u);
  }
}

TEST(KeepTrial, UndecidedUntilItsBytesThenFixed) {
  KeepTrial t(350);  // the 4th split of 100 bytes ends it
  EXPECT_EQ(Feed(&t, 3, 5, [](int) { return false; }), KeepTrial::Verdict::kUndecided);
  EXPECT_EQ(t.verdict(), KeepTrial::Verdict::kUndecided);
  EXPECT_EQ(t.EndSplit(100, 3, false), KeepTrial::Verdict::kAbandon);
  EXPECT_EQ(t.splits(), 4u);
  // Later documents, even all candidates, change nothing.
  for (int i = 0; i < 20; ++i) {
    const std::vector<uint64_t> b = Bands(1000);
    t.AddDoc(static_cast<uint64_t>(i), 1, b.data(), 4);
    EXPECT_EQ(t.EndSplit(100, 4 + static_cast<size_t>(i), false), KeepTrial::Verdict::kAbandon);
  }
  EXPECT_EQ(t.splits(), 4u);
  EXPECT_EQ(t.candidate_splits(), 0u);
}

TEST(KeepTrial, ExactCopiesAreNotCandidates) {
  KeepTrial t(400);
  for (int s = 0; s < 4; ++s) {
    // The same document in every split: same exact hash, same bands.
    const std::vector<uint64_t> b = Bands(5);
    t.AddDoc(42, 43, b.data(), 4);
    const std::vector<uint64_t> other = Bands(100 + static_cast<uint64_t>(s));
    t.AddDoc(100 + static_cast<uint64_t>(s), 0, other.data(), 4);
    t.EndSplit(100, static_cast<size_t>(s), false);
  }
  EXPECT_EQ(t.verdict(), KeepTrial::Verdict::kAbandon);
  EXPECT_EQ(t.candidate_splits(), 0u);
}

TEST(KeepTrial, AStreamSplitCountsItsFileUpToIt) {
  // One compressed file without a frame index in 8 stream splits, then 8 more files of one split
  // each: the only candidates are in the file's last split (and a pair within it), which to read
  // again means decoding the whole file: 800 of 1600 bytes.
  KeepTrial t(1600);
  uint64_t seed = 1;
  for (int s = 0; s < 16; ++s) {
    const std::vector<uint64_t> b = Bands(seed++);
    t.AddDoc(seed, 0, b.data(), 4);
    if (s == 7) t.AddDoc(seed + 1000, 0, b.data(), 4);  // a near copy, same split
    const bool stream = s < 8;
    t.EndSplit(100, stream ? 0 : static_cast<size_t>(s - 7), stream);
  }
  EXPECT_EQ(t.verdict(), KeepTrial::Verdict::kKeep);
  EXPECT_EQ(t.candidate_splits(), 1u);
  EXPECT_EQ(t.reread_bytes(), 800u);
  // The same with byte-range splits: 100 of 1600 bytes.
  KeepTrial u(1600);
  seed = 1;
  for (int s = 0; s < 16; ++s) {
    const std::vector<uint64_t> b = Bands(seed++);
    u.AddDoc(seed, 0, b.data(), 4);
    if (s == 7) u.AddDoc(seed + 1000, 0, b.data(), 4);
    u.EndSplit(100, s < 8 ? 0 : static_cast<size_t>(s - 7), false);
  }
  EXPECT_EQ(u.verdict(), KeepTrial::Verdict::kAbandon);
  EXPECT_EQ(u.reread_bytes(), 100u);
}

}  // namespace
}  // namespace grist::dedup::internal
