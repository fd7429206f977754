// Work shared at a stage's tail: the items of one unit of work (a split's documents) are run by the
// thread that owns the unit, from the front and in order, while threads that have nothing left to
// start take items from its back. Without it a stage's last splits end up to one split's time
// apart, all but one thread idle meanwhile (tokenize's last wave at 16 threads: ~40 ms of a 270 ms
// stage on the GPU host); with it they end about one item's time apart.
//
// Which thread runs an item never changes the result: the caller keeps what a helper computes by
// the item's index and puts it after the owner's, in index order (Run says where they meet).
//
// Thread safety: Run may be called by any number of threads at once (each for its own unit), and
// Help by any thread, including while it owns no unit.
#ifndef GRIST_COMMON_SHARED_WORK_H_
#define GRIST_COMMON_SHARED_WORK_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/functional/function_ref.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace grist {

// The text a stage reads from a split before running its documents through SharedWork: small
// enough that the text is still in the core's cache when the documents are computed; a helper
// waits for the owner's next batch while the owner reads it.
inline constexpr uint64_t kSharedWorkBatchBytes = 256ull << 10;

class SharedWork {
 public:
  SharedWork() = default;
  SharedWork(const SharedWork&) = delete;
  SharedWork& operator=(const SharedWork&) = delete;

  // Runs item(k, /*by_owner=*/true) for k = 0, 1, ... on the calling thread while threads in Help
  // run item(k, false) for the highest k not yet taken; every k in [0, n) runs exactly once.
  // Returns, once every item has returned, where the two met: the owner ran exactly [0, m) in
  // order, helpers the rest [m, n) (m == n when none helped). `item` must be safe to run for
  // different k at once. Items of more than 2^32 - 1 run on the owner alone.
  size_t Run(size_t n, absl::FunctionRef<void(size_t, bool)> item);

  // Runs one item no thread has taken, of the Run with the most of them, and returns true; returns
  // false when no Run has one left, at once or after waiting up to `wait` for one (a Run starting:
  // the owner of a split reading its next batch).
  bool Help(absl::Duration wait = absl::ZeroDuration());

 private:
  struct Unit {
    // (front << 32) | back: the owner takes `front` and advances it, helpers take `back - 1` and
    // lower it, each with one compare-and-swap; the items left are [front, back).
    std::atomic<uint64_t> range{0};
    absl::FunctionRef<void(size_t, bool)> item;
    int helpers = 0;  // helpers inside item(); guarded by SharedWork::mu_
    explicit Unit(absl::FunctionRef<void(size_t, bool)> f) : item(f) {}
  };
  absl::Mutex mu_;
  std::vector<Unit*> units_ ABSL_GUARDED_BY(mu_);  // the Runs that may have items left
};

// A stage's batch of documents through `shared`: compute(k, slot, by_owner) for every k in
// [0, n), on this thread (by_owner, into `*own`) or a helper's (into (*slots)[k]; `slots` grows
// to n), and account(k, slot) on this thread for every k in order: as this thread goes for its own
// items, after Run for the helpers'. compute must be safe to run for different k at once; account
// may return an error, which ends the accounting (and this thread's computing) and is returned.
// The caller's `slots` is typically its thread_local vector, passed by pointer: a helper must fill
// the owner's slots, not its own thread_local ones (and compute must name the owner's batch the
// same way: through pointers taken on the owner's thread, never a thread_local by name).
template <typename Slot, typename Compute, typename Account>
absl::Status RunInOrder(SharedWork* shared, size_t n, Slot* own, std::vector<Slot>* slots,
                        Compute&& compute, Account&& account) {
  if (slots->size() < n) slots->resize(n);
  Slot* const helped = slots->data();
  absl::Status status;
  const size_t meet = shared->Run(n, [&](size_t k, bool by_owner) {
    if (!by_owner) {
      compute(k, &helped[k], false);
      return;
    }
    if (!status.ok()) return;
    compute(k, own, true);
    status = account(k, *own);
  });
  for (size_t k = meet; k < n && status.ok(); ++k) status = account(k, helped[k]);
  return status;
}

}  // namespace grist

#endif  // GRIST_COMMON_SHARED_WORK_H_
