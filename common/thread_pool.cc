#include "common/thread_pool.h"

#include <unistd.h>

#include <atomic>
#include <memory>
#include <thread>

#include "absl/base/internal/cycleclock.h"  // absl::Mutex's clock (see the header)

namespace grist {

int NumCpus() {
  long n = ::sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<int>(n) : 1;
}

void StartCycleClockCalibration() {
  static std::atomic<bool> started{false};
  if (started.exchange(true)) return;
  // Detached: the measurement only sleeps and writes absl's own once-initialized value, so a
  // process may exit while it runs.
  std::thread([] { (void)absl::base_internal::CycleClock::Frequency(); }).detach();
}

ThreadPool::ThreadPool(int num_threads) {
  if (num_threads <= 0) num_threads = NumCpus();
  workers_.reserve(num_threads);
  for (int i = 0; i < num_threads; ++i) workers_.emplace_back([this] { WorkerLoop(); });
}

ThreadPool::~ThreadPool() {
  Wait();
  {
    absl::MutexLock l(&mu_);
    stop_ = true;
  }
  for (auto& t : workers_) t.join();
}

void ThreadPool::Schedule(std::function<void()> fn) {
  absl::MutexLock l(&mu_);
  queue_.push_back(std::move(fn));
}

void ThreadPool::Wait() {
  absl::MutexLock l(&mu_);
  mu_.Await(absl::Condition(
      +[](ThreadPool* p) ABSL_EXCLUSIVE_LOCKS_REQUIRED(p->mu_) {
        return p->queue_.empty() && p->active_ == 0;
      },
      this));
}

void ThreadPool::WorkerLoop() {
  while (true) {
    std::function<void()> fn;
    {
      absl::MutexLock l(&mu_);
      mu_.Await(absl::Condition(
          +[](ThreadPool* p) ABSL_EXCLUSIVE_LOCKS_REQUIRED(p->mu_) {
            return p->stop_ || !p->queue_.empty();
          },
          this));
      if (queue_.empty()) return;  // stop_ and nothing left
      fn = std::move(queue_.front());
      queue_.pop_front();
      ++active_;
    }
    fn();
    absl::MutexLock l(&mu_);
    --active_;
  }
}

absl::Status ParallelForThreads(int threads, size_t n,
                                const std::function<absl::Status(size_t)>& fn) {
  const int count = std::min<size_t>(threads <= 0 ? NumCpus() : threads, n);
  if (count <= 1) return ParallelFor(nullptr, n, fn);
  ThreadPool pool(count);
  return ParallelFor(&pool, n, fn);
}

absl::Status ParallelFor(ThreadPool* pool, size_t n, const std::function<absl::Status(size_t)>& fn) {
  if (pool == nullptr || pool->size() <= 1 || n <= 1) {
    for (size_t i = 0; i < n; ++i) {
      absl::Status s = fn(i);
      if (!s.ok()) return s;
    }
    return absl::OkStatus();
  }
  std::vector<absl::Status> results(n);
  auto next = std::make_shared<std::atomic<size_t>>(0);
  auto failed = std::make_shared<std::atomic<bool>>(false);
  int workers = std::min<size_t>(pool->size(), n);
  absl::Mutex mu;
  int remaining = workers;
  for (int w = 0; w < workers; ++w) {
    pool->Schedule([&, next, failed] {
      while (!failed->load()) {
        size_t i = next->fetch_add(1);
        if (i >= n) break;
        results[i] = fn(i);
        if (!results[i].ok()) failed->store(true);
      }
      absl::MutexLock l(&mu);
      --remaining;
    });
  }
  absl::MutexLock l(&mu);
  mu.Await(absl::Condition(+[](int* r) { return *r == 0; }, &remaining));
  for (auto& s : results) {
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace grist
