#include "common/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>

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

}  // namespace
}  // namespace grist
