// Ordered parallel processing: the results of n independent work items are produced on a thread
// pool and consumed strictly in index order, so outputs never depend on the thread count.
//
// Memory is bounded: at most `window` results are held (computed but not yet emitted); workers wait
// for the consumer when the window is full. The first error (by index order among the items started)
// stops the run and is returned; items after it are not emitted.
//
// `help`, if given, is called by a worker that finds no item left to start, again and again while
// it returns true or another item is still being processed (SharedWork::Help: the worker then runs
// documents of the splits still in progress), before the worker leaves. When it has nothing to do
// it should wait a little (for work appearing) rather than return at once, or the worker spins.
#ifndef GRIST_COMMON_ORDERED_H_
#define GRIST_COMMON_ORDERED_H_

#include <cstddef>
#include <functional>
#include <map>
#include <optional>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/thread_pool.h"

namespace grist {

template <typename R>
absl::Status OrderedParallel(ThreadPool* pool, size_t n, size_t window,
                             const std::function<absl::StatusOr<R>(size_t)>& process,
                             const std::function<absl::Status(size_t, R&&)>& emit,
                             const std::function<bool()>& help = nullptr) {
  if (pool == nullptr || pool->size() <= 1) {
    for (size_t i = 0; i < n; ++i) {
      absl::StatusOr<R> r = process(i);
      if (!r.ok()) return r.status();
      absl::Status s = emit(i, std::move(*r));
      if (!s.ok()) return s;
    }
    return absl::OkStatus();
  }
  if (window < 1) window = 1;
  absl::Mutex mu;
  size_t next_to_start = 0;   // guarded by mu
  size_t next_to_emit = 0;    // guarded by mu
  bool stop = false;          // guarded by mu
  int running = 0;            // guarded by mu
  size_t processing = 0;      // items in process(); guarded by mu
  absl::Status first_error;   // guarded by mu
  std::map<size_t, absl::StatusOr<R>> done;  // guarded by mu

  int workers = static_cast<int>(std::min<size_t>(pool->size(), n));
  for (int w = 0; w < workers; ++w) {
    {
      absl::MutexLock l(&mu);
      ++running;
    }
    pool->Schedule([&] {
      while (true) {
        size_t i = 0;
        bool helping = false;
        {
          absl::MutexLock l(&mu);
          auto can_start = [&] { return stop || next_to_start >= n || next_to_start < next_to_emit + window; };
          mu.Await(absl::Condition(&can_start));
          if (stop) break;
          helping = next_to_start >= n;
          if (!helping) {
            i = next_to_start++;
            ++processing;
          }
        }
        if (helping) {
          while (help) {
            if (help()) continue;
            absl::MutexLock l(&mu);
            if (stop || processing == 0) break;
          }
          break;
        }
        absl::StatusOr<R> r = process(i);
        absl::MutexLock l(&mu);
        --processing;
        done.emplace(i, std::move(r));
      }
      absl::MutexLock l(&mu);
      --running;
    });
  }
  // The calling thread is the consumer.
  while (true) {
    absl::StatusOr<R> r = absl::UnknownError("unset");
    size_t i;
    {
      absl::MutexLock l(&mu);
      if (next_to_emit >= n) break;
      auto ready = [&] { return done.count(next_to_emit) > 0; };
      mu.Await(absl::Condition(&ready));
      auto it = done.find(next_to_emit);
      r = std::move(it->second);
      done.erase(it);
      i = next_to_emit;
    }
    absl::Status s = r.ok() ? emit(i, std::move(*r)) : r.status();
    absl::MutexLock l(&mu);
    if (!s.ok()) {
      first_error = s;
      stop = true;
      break;
    }
    ++next_to_emit;
  }
  absl::MutexLock l(&mu);
  stop = true;
  auto idle = [&] { return running == 0; };
  mu.Await(absl::Condition(&idle));
  return first_error;
}

}  // namespace grist

#endif  // GRIST_COMMON_ORDERED_H_
