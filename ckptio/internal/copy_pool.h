// The writer's snapshot copier: a persistent set of threads that copy host bytes into the staging
// arena in consecutive chunks, all busy at once, and report the contiguous finished prefix so the
// I/O thread can write it while later chunks are still being copied.
//
// Thread safety: Copy() may be called from any thread; concurrent calls are serialized. The
// calling thread takes part in the copy, so `threads` counts it (threads - 1 workers are started
// by the constructor and joined by the destructor).
#ifndef GRIST_CKPTIO_INTERNAL_COPY_POOL_H_
#define GRIST_CKPTIO_INTERNAL_COPY_POOL_H_

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"

namespace grist::ckptio::internal {

// One contiguous copy: `len` bytes from `src` to `dst`. `upto` is the caller's progress mark that
// becomes final once this piece and every piece before it have landed.
struct CopyPiece {
  char* dst = nullptr;
  const char* src = nullptr;
  uint64_t len = 0;
  uint64_t upto = 0;
};

class CopyPool {
 public:
  explicit CopyPool(int threads);
  ~CopyPool();
  CopyPool(const CopyPool&) = delete;
  CopyPool& operator=(const CopyPool&) = delete;

  int threads() const { return threads_; }

  // Copies every piece (split into chunks of at most `chunk` bytes, handed out in order so the
  // threads work on consecutive chunks) and returns when all have landed. `progress`, when set, is
  // called with the `upto` of the last piece of the contiguous finished prefix each time that
  // prefix ends a piece; calls are serialized and their arguments strictly increase (pieces'
  // `upto` must not decrease).
  void Copy(const std::vector<CopyPiece>& pieces, uint64_t chunk,
            const std::function<void(uint64_t)>& progress);

 private:
  struct Batch;
  void Worker();
  void Work(Batch* b);

  const int threads_;
  std::mutex run_mu_;  // one Copy() at a time
  std::mutex mu_;
  std::condition_variable cv_;       // a batch was posted, or stop_
  std::condition_variable done_cv_;  // a worker left the batch
  Batch* batch_ ABSL_GUARDED_BY(mu_) = nullptr;
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  int busy_ ABSL_GUARDED_BY(mu_) = 0;  // workers inside the current batch
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> workers_;
};

}  // namespace grist::ckptio::internal

#endif  // GRIST_CKPTIO_INTERNAL_COPY_POOL_H_
