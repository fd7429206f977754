// The external sort of the dedup stages (dedup/internal/files.h): spills and merges within its
// budget, and sorts on a pool's threads to std::sort's order at any thread count.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/env.h"
#include "common/rng.h"
#include "common/thread_pool.h"
#include "dedup/dedup_format.h"
#include "dedup/internal/files.h"
#include "tests/test_util.h"

namespace grist::dedup {
namespace {

using ::grist::testing::TempDir;

// SortRecords' radix path for bucket records gives std::sort's order, whatever the records:
// band records (hash in lo), exact and line records (hash in hi), equal hashes of several
// documents, identical records, hashes sharing their top bits, a band tag with some hi set,
// tags past the radix's table, and every size around its small-range cut.
TEST(SortRecords, BucketRecordsComeOutAsStdSortPutsThem) {
  using format::BucketRecord;
  Rng rng(17);
  auto check = [](std::vector<BucketRecord> v, const char* what) {
    std::vector<BucketRecord> want = v;
    std::sort(want.begin(), want.end());
    internal::SortRecords(v.data(), v.size());
    ASSERT_EQ(v.size(), want.size()) << what;
    for (size_t i = 0; i < v.size(); ++i) {
      ASSERT_EQ(std::memcmp(&v[i], &want[i], sizeof(BucketRecord)), 0) << what << " at " << i;
    }
  };
  for (size_t n : {0, 1, 2, 63, 64, 65, 200, 5000, 60000}) {
    SCOPED_TRACE(n);
    std::vector<BucketRecord> build;
    for (size_t i = 0; i < n; ++i) {
      const uint64_t doc = rng.Uniform(n / 3 + 1);
      switch (rng.Uniform(8)) {
        case 0:
          build.push_back({0, rng.Next(), rng.Next(), doc});
          break;
        case 1:
          build.push_back({1, rng.Next(), rng.Next(), doc});
          break;
        case 2:  // a hash shared by several documents
          build.push_back({2 + rng.Uniform(3), 0, 0x1234567890abcdefull, doc});
          break;
        case 3:  // an identical record
          if (!build.empty()) {
            build.push_back(build[rng.Uniform(build.size())]);
            break;
          }
          [[fallthrough]];
        default:
          build.push_back({2 + rng.Uniform(14), 0, rng.Next(), doc});
      }
    }
    check(build, "dedup-like");
    std::vector<BucketRecord> top = build;  // hashes that differ in their low bits alone
    for (BucketRecord& r : top) r.lo = (0xffffull << 48) | (r.lo & 0xff);
    check(top, "shared top bits");
    std::vector<BucketRecord> mixed = build;  // a band tag where some hi are set
    for (BucketRecord& r : mixed) {
      if (r.tag == 5 && rng.Uniform(3) == 0) r.hi = rng.Uniform(4);
    }
    check(mixed, "hi set in a band");
    std::vector<BucketRecord> wide = build;  // tags past the radix's table: std::sort
    for (BucketRecord& r : wide) r.tag = rng.Uniform(3) == 0 ? rng.Next() : r.tag;
    check(wide, "wide tags");
  }
}

TEST(ExternalSorter, SpillsAndMergesInOrder) {
  TempDir tmp;
  Rng rng(5);
  std::vector<format::PairRecord> all;
  {
    internal::ExternalSorter<format::PairRecord> sorter(Env::Default(), tmp.path(), "t",
                                                        24 * 1024);
    for (int i = 0; i < 20000; ++i) {
      format::PairRecord p{rng.Uniform(1000), rng.Uniform(1000), 0, 0};
      all.push_back(p);
      ASSERT_TRUE(sorter.Add(p).ok());
    }
    EXPECT_GE(sorter.runs(), 10u);
    std::vector<format::PairRecord> got;
    ASSERT_TRUE(sorter.Finish([&](const format::PairRecord& p) {
      got.push_back(p);
      return absl::OkStatus();
    }).ok());
    std::sort(all.begin(), all.end());
    ASSERT_EQ(got.size(), all.size());
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_TRUE(got[i].a == all[i].a && got[i].b == all[i].b) << i;
    }
  }
  // Runs are removed when the sorter is destroyed.
  EXPECT_TRUE(Env::Default()->ListDir(tmp.path())->empty());
}

// The parallel sort gives std::sort's order (the records' order is total) for every thread count,
// on sizes around the one-thread cut-off, with runs of equal records and skewed keys (most records
// in one bucket, as exact copies give).
TEST(ExternalSorter, ParallelSortMatchesStdSortForEveryThreadCount) {
  Rng rng(11);
  for (size_t n : {size_t{0}, size_t{1}, size_t{1000}, (size_t{1} << 14) * 2 - 1,
                   (size_t{1} << 14) * 2, (size_t{1} << 16) * 5 + 17}) {
    std::vector<format::BucketRecord> data(n);
    for (size_t i = 0; i < n; ++i) {
      const bool skew = rng.Uniform(4) == 0;  // a quarter share one key
      data[i] = format::BucketRecord{rng.Uniform(3), skew ? 7 : rng.Uniform(50),
                                     skew ? 7 : rng.Next(), rng.Uniform(1000)};
    }
    std::vector<format::BucketRecord> want = data;
    std::sort(want.begin(), want.end());
    for (int threads : {1, 2, 3, 8}) {
      ThreadPool pool(threads);
      std::vector<format::BucketRecord> in = data, out(n);
      auto sorted = internal::ParallelSortInto(in.data(), n, out.data(), &pool);
      ASSERT_TRUE(sorted.ok());
      // In place when one thread sorts (no copy), else merged into `out`.
      const bool one = internal::ParallelSortParts(n, &pool) == 1;
      EXPECT_EQ(one, threads == 1 || n < 2 * (size_t{1} << 14)) << n << ", " << threads;
      EXPECT_EQ(*sorted, one ? in.data() : out.data()) << "n " << n << ", " << threads << " threads";
      ASSERT_TRUE(n == 0 || std::memcmp(*sorted, want.data(), n * sizeof(format::BucketRecord)) == 0)
          << "n " << n << ", " << threads << " threads";
    }
  }
}

// With a pool, the sorter sorts on its threads into a second buffer within the same budget (twice
// the runs of one thread) and gives the same records in the same order.
TEST(ExternalSorter, WithAPoolGivesTheSameOrderWithinTheBudget) {
  TempDir tmp;
  Rng rng(6);
  std::vector<format::PairRecord> all;
  for (int i = 0; i < 300000; ++i) {
    all.push_back(format::PairRecord{rng.Uniform(5000), rng.Uniform(5000),
                                     static_cast<uint32_t>(rng.Uniform(2)), 0});
  }
  std::vector<format::PairRecord> want = all;
  std::sort(want.begin(), want.end());
  for (uint64_t budget : {uint64_t{4} << 20, uint64_t{64} << 20}) {
    size_t runs[2] = {0, 0};
    for (int threads : {1, 4}) {
      ThreadPool pool(threads);
      internal::ExternalSorter<format::PairRecord> sorter(Env::Default(), tmp.path(), "p", budget,
                                                          &pool);
      for (const auto& p : all) ASSERT_TRUE(sorter.Add(p).ok());
      runs[threads == 1 ? 0 : 1] = sorter.runs();
      std::vector<format::PairRecord> got;
      ASSERT_TRUE(sorter.Finish([&](const format::PairRecord& p) {
        got.push_back(p);
        return absl::OkStatus();
      }).ok());
      ASSERT_EQ(got.size(), want.size());
      ASSERT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(format::PairRecord)), 0)
          << threads << " threads, budget " << budget;
    }
    if (budget == (uint64_t{4} << 20)) {
      EXPECT_EQ(runs[0], 1u);  // 300000 x 24 bytes in 4 MiB: one spill, then the rest in memory
      EXPECT_EQ(runs[1], 3u);  // half the records per buffer
    } else {
      EXPECT_EQ(runs[0] + runs[1], 0u);
    }
  }
}

// Chunks added at once (AddChunks: made on the pool's threads straight into the buffer) give the
// records that Adding them one by one gives, in the same order, whether they fit beside the
// buffer's records, spill it first, or hold more than a buffer (then added one by one).
TEST(ExternalSorter, AddChunksGivesWhatAddGives) {
  TempDir tmp;
  Rng rng(9);
  std::vector<std::vector<format::PairRecord>> chunks(40);
  for (auto& ch : chunks) {
    const size_t n = rng.Uniform(3) == 0 ? 0 : rng.Uniform(3000);  // some chunks empty
    for (size_t i = 0; i < n; ++i) {
      ch.push_back(format::PairRecord{rng.Uniform(700), rng.Uniform(700), 0, 0});
    }
  }
  auto sorted_of = [&](auto& sorter) {
    std::vector<format::PairRecord> got;
    EXPECT_TRUE(sorter.Finish([&](const format::PairRecord& p) {
      got.push_back(p);
      return absl::OkStatus();
    }).ok());
    return got;
  };
  // Budgets: everything in memory; a few buffers (spills between batches of chunks); a buffer
  // smaller than one batch of chunks (the batch goes through Add).
  for (uint64_t budget : {uint64_t{64} << 20, uint64_t{600} << 10, uint64_t{48} << 10}) {
    for (int threads : {1, 4}) {
      SCOPED_TRACE(absl::StrCat(budget, " bytes, ", threads, " threads"));
      ThreadPool pool(threads);
      internal::ExternalSorter<format::PairRecord> one(Env::Default(), tmp.path(), "one", budget,
                                                       &pool);
      internal::ExternalSorter<format::PairRecord> many(Env::Default(), tmp.path(), "many",
                                                        budget, &pool);
      for (size_t from = 0; from < chunks.size(); from += 8) {  // batches of 8 chunks
        std::vector<size_t> counts;
        for (size_t k = from; k < from + 8; ++k) {
          counts.push_back(chunks[k].size());
          for (const auto& p : chunks[k]) ASSERT_TRUE(one.Add(p).ok());
        }
        ASSERT_TRUE(many.AddChunks(counts, [&](size_t k, format::PairRecord* out) {
          std::copy(chunks[from + k].begin(), chunks[from + k].end(), out);
        }).ok());
      }
      EXPECT_EQ(one.total(), many.total());
      EXPECT_EQ(many.runs() == 0, budget == (uint64_t{64} << 20)) << many.runs();
      const auto want = sorted_of(one), got = sorted_of(many);
      ASSERT_EQ(got.size(), want.size());
      ASSERT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(format::PairRecord)), 0);
    }
  }
  EXPECT_TRUE(Env::Default()->ListDir(tmp.path())->empty());
}

}  // namespace
}  // namespace grist::dedup
