#include "loader/internal/batch_pool.h"

#include <algorithm>
#include <cstdlib>
#include <memory>

#include "common/status_macros.h"
#include "loader/internal/cuda.h"

namespace grist::loader {
namespace {

constexpr size_t kAlign = 256;
size_t AlignUp(size_t v) { return (v + kAlign - 1) / kAlign * kAlign; }

size_t DTypeSize(DType d) { return d == DType::kInt64 ? 8 : 4; }

}  // namespace

Layout Layout::Make(int64_t m, int64_t s, uint32_t fields, bool int32_ids) {
  Layout l;
  l.rows = m;
  l.seq_len = s;
  const DType ids = int32_ids ? DType::kInt32 : DType::kInt64;
  size_t off = 0;
  for (uint32_t f : kFieldOrder) {
    if (!(fields & f)) continue;
    Entry e{f, ids, 2, {m, s}, off, 0};
    if (f == kLossMask) e.dtype = DType::kFloat32;
    if (f == kSampleIndex || f == kReleaseIndex) {
      e.dtype = DType::kInt64;
      e.ndim = 1;
      e.shape[0] = m;
      e.shape[1] = 0;
    }
    if (f == kCuSeqlens) {
      e.dtype = DType::kInt32;
      e.ndim = 1;
      e.shape[0] = m * s + 1;
      e.shape[1] = 0;
    }
    e.bytes = DTypeSize(e.dtype) * static_cast<size_t>(e.shape[0]) *
              static_cast<size_t>(e.ndim == 2 ? e.shape[1] : 1);
    off = AlignUp(off + e.bytes);
    l.entries.push_back(e);
  }
  l.total = std::max<size_t>(off, kAlign);
  return l;
}

Pool::~Pool() {
  std::unique_ptr<cuda::ScopedDevice> on;
  if (cuda_) {
    on = std::make_unique<cuda::ScopedDevice>(device_);
    if (stream_) (void)cuda::StreamSynchronize(stream_);
  }
  for (Slot& s : slots_) {
    if (cuda_) {
      cuda::HostFree(s.host);
      cuda::DeviceFree(s.dev);
      cuda::EventDestroy(s.copy_event);
      cuda::EventDestroy(s.free_event);
    } else {
      std::free(s.host);
    }
  }
  if (cuda_) cuda::StreamDestroy(stream_);
}

absl::Status Pool::Init() {
  if (cuda_) {
    cuda::ScopedDevice on(device_);  // the caller's current device is left as it was
    ASSIGN_OR_RETURN(stream_, cuda::StreamCreate());
  }
  return absl::OkStatus();
}

absl::StatusOr<int> Pool::Acquire() {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (!free_.empty()) {
      int i = free_.back();
      free_.pop_back();
      return i;
    }
  }
  Slot s;
  if (cuda_) {
    ASSIGN_OR_RETURN(void* h, cuda::HostAlloc(layout_.total));
    s.host = static_cast<char*>(h);
    auto d = cuda::DeviceAlloc(layout_.total);
    auto ce = d.ok() ? cuda::EventCreate() : absl::StatusOr<void*>(d.status());
    auto fe = ce.ok() ? cuda::EventCreate() : absl::StatusOr<void*>(ce.status());
    if (!fe.ok()) {
      cuda::HostFree(h);
      if (d.ok()) cuda::DeviceFree(*d);
      if (ce.ok()) cuda::EventDestroy(*ce);
      return fe.status();
    }
    s.dev = static_cast<char*>(*d);
    s.copy_event = *ce;
    s.free_event = *fe;
  } else {
    s.host = static_cast<char*>(std::aligned_alloc(4096, (layout_.total + 4095) / 4096 * 4096));
    if (!s.host) return absl::ResourceExhaustedError("loader: out of memory for a batch buffer");
  }
  std::lock_guard<std::mutex> l(mu_);
  slots_.push_back(s);
  return static_cast<int>(slots_.size() - 1);
}

void Pool::Release(int i, uintptr_t consumer_stream, bool waited) {
  std::lock_guard<std::mutex> l(mu_);
  Slot& s = slots_[static_cast<size_t>(i)];
  if (cuda_ && waited) {
    cuda::ScopedDevice on(device_);
    // Work the consumer queued on its stream before this release may still read the device
    // buffer: the next copy into it waits for this event.
    s.free_pending = cuda::EventRecord(s.free_event, reinterpret_cast<void*>(consumer_stream)).ok();
  }
  free_.push_back(i);
}

}  // namespace grist::loader
