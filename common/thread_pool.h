// A fixed-size thread pool, and ordered parallel helpers whose results never depend on the
// thread count.
//
// Thread safety: Schedule() may be called from any thread, including from inside a task.
// Destruction waits for every scheduled task.
#ifndef GRIST_COMMON_THREAD_POOL_H_
#define GRIST_COMMON_THREAD_POOL_H_

#include <cstddef>
#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"

namespace grist {

class ThreadPool {
 public:
  // `num_threads` <= 0 means the number of online CPUs.
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  void Schedule(std::function<void()> fn);
  // Blocks until every task scheduled so far (and the tasks they schedule) has finished.
  void Wait();
  int size() const { return static_cast<int>(workers_.size()); }

 private:
  void WorkerLoop();
  absl::Mutex mu_;
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  int active_ ABSL_GUARDED_BY(mu_) = 0;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> workers_;
};

// Runs fn(i) for i in [0, n) on `pool` (inline when pool is null or has one thread), and returns
// the first error by index order, so the reported error does not depend on scheduling.
absl::Status ParallelFor(ThreadPool* pool, size_t n, const std::function<absl::Status(size_t)>& fn);
// The same on a pool of its own for this one pass: min(threads, n) threads (threads <= 0: every
// CPU), inline where that is one. For short passes of independent items (hashing files, checking
// them) where no pool is at hand.
absl::Status ParallelForThreads(int threads, size_t n,
                                const std::function<absl::Status(size_t)>& fn);

// Number of online CPUs (at least 1).
int NumCpus();

// Starts, on a background thread, the one measurement of the CPU's cycle frequency that
// absl::Mutex makes the first time a thread queues on a contended Mutex (it reads the thread's
// priority every cycle-clock second): at least 3 ms of sleeps (1 ms, then 2 ms, doubling until two
// readings agree within 1%: longer on a noisy VM), during which every other thread that queues
// waits too. Called early by a program (grist's main, when its first argument is a command), it
// runs while the command line is parsed and the inputs listed, not while the first stage's threads
// start. Idempotent.
void StartCycleClockCalibration();

}  // namespace grist

#endif  // GRIST_COMMON_THREAD_POOL_H_
