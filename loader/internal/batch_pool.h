// The batch buffers of a Loader (loader/loader.h). Layout: where each requested field lives in
// one buffer (cu_seqlens last, so that a copy can stop at its used length). Pool: the buffers,
// handed out to the workers that fill them and returned when a Batch is destroyed; page-aligned
// host memory, or with CUDA pinned host memory, a device buffer and a copy and a release event per
// buffer, and one copy stream.
//
// Thread safety: Pool's methods may be called from any thread; a slot belongs to the caller of
// Acquire until its Release.
#ifndef GRIST_LOADER_INTERNAL_BATCH_POOL_H_
#define GRIST_LOADER_INTERNAL_BATCH_POOL_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "loader/loader.h"

namespace grist::loader {

// The fields in the order their tensors are laid out (and listed in a batch).
inline constexpr uint32_t kFieldOrder[] = {kInputIds, kLabels, kPositionIds, kLossMask,
                                           kSampleIndex, kReleaseIndex, kCuSeqlens};

// Where each requested tensor lives in a batch buffer. cu_seqlens is last so that a copy can stop
// at its used length.
struct Layout {
  struct Entry {
    uint32_t field;
    DType dtype;
    int ndim;
    int64_t shape[2];
    size_t offset;
    size_t bytes;
  };
  std::vector<Entry> entries;
  size_t total = 0;
  int64_t rows = 0, seq_len = 0;

  // The layout of `m` rows of `s` positions of the requested `fields` (ids int32 or int64).
  static Layout Make(int64_t m, int64_t s, uint32_t fields, bool int32_ids);
};

class Pool {
 public:
  Pool(Layout layout, bool cuda, int device)
      : layout_(std::move(layout)), cuda_(cuda), device_(device) {}
  ~Pool();

  // Creates the copy stream (CUDA).
  absl::Status Init();

  struct Slot {
    char* host = nullptr;
    char* dev = nullptr;
    void* copy_event = nullptr;
    void* free_event = nullptr;
    bool copy_pending = false;  // copy_event recorded; host buffer busy until it completes
    bool free_pending = false;  // free_event recorded on the consumer's stream at release
  };

  // A free slot, or a new one. The caller owns it until Release.
  absl::StatusOr<int> Acquire();

  // Returns slot `i`; with CUDA, when the consumer waited on `consumer_stream`, the next copy into
  // the slot first waits for the work queued there before this release.
  void Release(int i, uintptr_t consumer_stream, bool waited);

  Slot* slot(int i) {
    std::lock_guard<std::mutex> l(mu_);
    return &slots_[static_cast<size_t>(i)];  // deque: stable address
  }
  const Layout& layout() const { return layout_; }
  bool cuda() const { return cuda_; }
  int device() const { return device_; }
  void* stream() const { return stream_; }
  size_t num_slots() {
    std::lock_guard<std::mutex> l(mu_);
    return slots_.size();
  }

 private:
  const Layout layout_;
  const bool cuda_;
  const int device_;
  void* stream_ = nullptr;
  // std::mutex rather than absl::Mutex: ThreadSanitizer sees through libstdc++/pthread, not
  // through Debian's uninstrumented Abseil.
  std::mutex mu_;
  std::deque<Slot> slots_ ABSL_GUARDED_BY(mu_);
  std::vector<int> free_ ABSL_GUARDED_BY(mu_);
};

}  // namespace grist::loader

#endif  // GRIST_LOADER_INTERNAL_BATCH_POOL_H_
