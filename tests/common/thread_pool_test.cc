#include "common/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <set>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

namespace grist {
namespace {

TEST(ThreadPoolTest, RunsEverything) {
  ThreadPool pool(4);
  std::atomic<int> sum{0};
  for (int i = 1; i <= 1000; ++i) pool.Schedule([&sum, i] { sum += i; });
  pool.Wait();
  EXPECT_EQ(sum.load(), 500500);
}

TEST(ThreadPoolTest, ParallelForFirstErrorByIndex) {
  ThreadPool pool(4);
  std::vector<int> out(100);
  EXPECT_TRUE(ParallelFor(&pool, out.size(), [&](size_t i) {
    out[i] = static_cast<int>(i * i);
    return absl::OkStatus();
  }).ok());
  EXPECT_EQ(out[99], 9801);
  absl::Status s = ParallelFor(&pool, 50, [](size_t i) {
    if (i == 7) return absl::InternalError("seven");
    return absl::OkStatus();
  });
  EXPECT_EQ(s.message(), "seven");
  EXPECT_TRUE(ParallelFor(nullptr, 3, [](size_t) { return absl::OkStatus(); }).ok());
}

// A pass on a pool of its own: every index once, on min(threads, n) threads (inline for one
// thread or one item, 0 meaning every CPU), the first error by index whatever the count.
TEST(ThreadPoolTest, ParallelForThreadsMakesItsOwnPool) {
  for (int threads : {1, 3, 0}) {
    std::vector<int> seen(200, 0);
    absl::Mutex mu;
    std::set<std::thread::id> ids;
    ASSERT_TRUE(ParallelForThreads(threads, seen.size(), [&](size_t i) {
      ++seen[i];
      absl::MutexLock l(&mu);
      ids.insert(std::this_thread::get_id());
      return absl::OkStatus();
    }).ok());
    EXPECT_EQ(seen, std::vector<int>(200, 1)) << threads;
    if (threads == 1 || (threads == 0 && NumCpus() == 1)) {
      EXPECT_EQ(ids, std::set<std::thread::id>{std::this_thread::get_id()});
    } else {
      EXPECT_EQ(ids.count(std::this_thread::get_id()), 0u) << threads;
      EXPECT_LE(ids.size(), static_cast<size_t>(threads == 0 ? NumCpus() : threads));
    }
    absl::Status s = ParallelForThreads(threads, 60, [](size_t i) {
      if (i == 11 || i == 40) return absl::InternalError(absl::StrCat("at ", i));
      return absl::OkStatus();
    });
    EXPECT_EQ(s.message(), "at 11") << threads;
  }
  bool inline_one = false;
  ASSERT_TRUE(ParallelForThreads(8, 1, [&](size_t) {
    inline_one = true;
    return absl::OkStatus();
  }).ok());
  EXPECT_TRUE(inline_one);
}

}  // namespace
}  // namespace grist
