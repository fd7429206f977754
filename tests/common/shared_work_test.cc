#include "common/shared_work.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/ordered.h"
#include "common/thread_pool.h"

namespace grist {
namespace {

TEST(SharedWorkTest, WithoutHelpersTheOwnerRunsEveryItemInOrder) {
  SharedWork w;
  EXPECT_FALSE(w.Help());
  std::vector<size_t> ran;
  EXPECT_EQ(w.Run(7, [&](size_t k, bool by_owner) {
    EXPECT_TRUE(by_owner);
    ran.push_back(k);
  }), 7u);
  EXPECT_EQ(ran, (std::vector<size_t>{0, 1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(w.Run(0, [&](size_t, bool) { ADD_FAILURE(); }), 0u);
  EXPECT_FALSE(w.Help());
}

// A helper takes the last item while the owner is inside its first; the owner then runs the front
// in order up to where they meet, which Run returns, and every item runs once.
TEST(SharedWorkTest, AHelperTakesItemsFromTheBackAndRunSaysWhereTheyMet) {
  SharedWork w;
  constexpr size_t kN = 10;
  std::vector<std::atomic<int>> runs(kN);
  std::vector<int> by(kN, -1);  // 1 owner, 0 helper
  std::vector<size_t> owner_order;
  absl::Notification helper_took_last, owner_started;
  std::atomic<bool> done{false};
  std::thread helper([&] {
    owner_started.WaitForNotification();
    while (!helper_took_last.HasBeenNotified()) w.Help();
    // Keep helping until the owner's Run has returned: Help is then false for good.
    while (!done.load()) w.Help();
    EXPECT_FALSE(w.Help());
  });
  const size_t meet = w.Run(kN, [&](size_t k, bool by_owner) {
    ++runs[k];
    by[k] = by_owner ? 1 : 0;
    if (by_owner) {
      owner_order.push_back(k);
      if (k == 0) {
        owner_started.Notify();
        helper_took_last.WaitForNotification();
      }
    } else if (k == kN - 1) {
      helper_took_last.Notify();
    }
  });
  done = true;
  helper.join();
  ASSERT_LE(meet, kN - 1);
  ASSERT_GE(meet, 1u);
  for (size_t k = 0; k < kN; ++k) {
    EXPECT_EQ(runs[k].load(), 1) << k;
    EXPECT_EQ(by[k], k < meet ? 1 : 0) << k;
  }
  std::vector<size_t> front;
  for (size_t k = 0; k < meet; ++k) front.push_back(k);
  EXPECT_EQ(owner_order, front);
}

// Several owners and helpers at once: every item of every Run runs exactly once, each owner's
// items are a prefix in order, and helpers choose among all Runs.
TEST(SharedWorkTest, ManyOwnersAndHelpersRunEveryItemOnce) {
  SharedWork w;
  constexpr int kOwners = 3, kHelpers = 3, kRounds = 20;
  std::atomic<int> owners_left{kOwners};
  std::vector<std::thread> threads;
  for (int o = 0; o < kOwners; ++o) {
    threads.emplace_back([&, o] {
      for (int round = 0; round < kRounds; ++round) {
        const size_t n = 50 + 37 * static_cast<size_t>(o) + static_cast<size_t>(round);
        std::vector<std::atomic<int>> runs(n);
        std::vector<size_t> order;
        const size_t meet = w.Run(n, [&](size_t k, bool by_owner) {
          ++runs[k];
          if (by_owner) order.push_back(k);
          volatile uint64_t spin = 0;  // an item takes a little time
          for (int i = 0; i < 2000; ++i) spin = spin + static_cast<uint64_t>(i);
        });
        ASSERT_LE(meet, n);
        ASSERT_EQ(order.size(), meet);
        for (size_t k = 0; k < meet; ++k) ASSERT_EQ(order[k], k);
        for (size_t k = 0; k < n; ++k) ASSERT_EQ(runs[k].load(), 1) << k;
      }
      --owners_left;
    });
  }
  for (int h = 0; h < kHelpers; ++h) {
    threads.emplace_back([&] {
      while (owners_left.load() > 0) w.Help();
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_FALSE(w.Help());
}

// OrderedParallel hands a worker that finds no item left to `help`, and keeps calling it while
// another item is still being processed, even when it returns false (no work yet: the owner of a
// split reading its next batch): item 1 waits for five calls returning false. The emitted results
// are those without it.
TEST(SharedWorkTest, OrderedParallelCallsHelpWhileAnItemIsProcessed) {
  ThreadPool pool(4);
  std::atomic<int> calls{0};
  std::atomic<bool> saw_calls{false};
  std::vector<size_t> emitted;
  ASSERT_TRUE(OrderedParallel<size_t>(
                  &pool, 2, 4,
                  [&](size_t i) -> absl::StatusOr<size_t> {
                    if (i == 1) {
                      const absl::Time give_up = absl::Now() + absl::Seconds(30);
                      while (calls.load() < 5 && absl::Now() < give_up) std::this_thread::yield();
                      saw_calls = calls.load() >= 5;
                    }
                    return i * 10;
                  },
                  [&](size_t i, size_t&& r) {
                    EXPECT_EQ(r, i * 10);
                    emitted.push_back(i);
                    return absl::OkStatus();
                  },
                  [&] {
                    ++calls;
                    return false;
                  })
                  .ok());
  EXPECT_TRUE(saw_calls.load());
  EXPECT_EQ(emitted, (std::vector<size_t>{0, 1}));
}

// Help with a wait takes an item of a Run that starts while it waits.
TEST(SharedWorkTest, HelpWaitsForARunToStart) {
  SharedWork w;
  std::atomic<bool> helped{false};
  std::thread helper([&] { helped = w.Help(absl::Seconds(30)); });
  absl::SleepFor(absl::Milliseconds(20));
  absl::Notification taken;
  std::atomic<int> by_helper{0};
  w.Run(4, [&](size_t k, bool by_owner) {
    if (!by_owner) {
      ++by_helper;
      taken.Notify();
    } else if (k == 0) {
      taken.WaitForNotification();
    }
  });
  helper.join();
  EXPECT_TRUE(helped.load());
  EXPECT_EQ(by_helper.load(), 1);
  EXPECT_FALSE(w.Help(absl::Milliseconds(5)));
}

// RunInOrder accounts every item in order whoever computed it, into the owner's slot or the
// helpers' slots by index, and stops at the first error account returns.
TEST(SharedWorkTest, RunInOrderAccountsInOrderAndStopsAtTheFirstError) {
  SharedWork w;
  constexpr size_t kN = 40;
  std::atomic<bool> done{false};
  std::thread helper([&] {
    while (!done.load()) w.Help(absl::Milliseconds(1));
  });
  for (size_t fail_at : {kN, size_t{7}, kN - 2}) {
    int own = -1;
    std::vector<int> slots;
    std::vector<size_t> accounted;
    absl::Status s = RunInOrder(
        &w, kN, &own, &slots,
        [&](size_t k, int* slot, bool by_owner) {
          // The owner is slow, so the helper takes items from the back.
          if (by_owner) absl::SleepFor(absl::Microseconds(200));
          *slot = static_cast<int>(k) * 3;
        },
        [&](size_t k, const int& slot) {
          EXPECT_EQ(slot, static_cast<int>(k) * 3) << k;
          accounted.push_back(k);
          return k == fail_at ? absl::DataLossError(std::to_string(k)) : absl::OkStatus();
        });
    std::vector<size_t> want;
    for (size_t k = 0; k < std::min(kN, fail_at + 1); ++k) want.push_back(k);
    EXPECT_EQ(accounted, want) << fail_at;
    if (fail_at < kN) {
      EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
      EXPECT_EQ(s.message(), std::to_string(fail_at));
    } else {
      EXPECT_TRUE(s.ok()) << s;
    }
  }
  done = true;
  helper.join();
}

}  // namespace
}  // namespace grist
