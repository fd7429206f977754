// A thin wrapper over the CUDA runtime API, so the loader builds and runs without CUDA. Handles are
// opaque pointers (cudaStream_t / cudaEvent_t). Without the toolkit at build time every call returns
// Unavailable. CUDA errors become Internal (or Unavailable for "no device") with the CUDA error name.
#ifndef GRIST_LOADER_INTERNAL_CUDA_H_
#define GRIST_LOADER_INTERNAL_CUDA_H_

#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace grist::loader::cuda {

// Whether the loader was built with the CUDA runtime.
bool Built();
// OK when `device` exists; Unavailable with the reason (not built, no driver, no device) otherwise.
absl::Status CheckDevice(int device);
absl::Status SetDevice(int device);
// The calling thread's current device, or -1.
int CurrentDevice();

// Makes `device` current for the scope and restores the previous one (events and streams must be
// used with their device current, e.g. from a thread that releases a batch).
class ScopedDevice {
 public:
  explicit ScopedDevice(int device) : previous_(CurrentDevice()) {
    if (previous_ != device) (void)SetDevice(device);
  }
  ~ScopedDevice() {
    if (previous_ >= 0 && previous_ != CurrentDevice()) (void)SetDevice(previous_);
  }
  ScopedDevice(const ScopedDevice&) = delete;
  ScopedDevice& operator=(const ScopedDevice&) = delete;

 private:
  int previous_;
};
absl::StatusOr<void*> HostAlloc(size_t bytes);  // pinned, portable
void HostFree(void* p);
absl::StatusOr<void*> DeviceAlloc(size_t bytes);
void DeviceFree(void* p);
absl::StatusOr<void*> StreamCreate();  // non-blocking stream
void StreamDestroy(void* stream);
absl::StatusOr<void*> EventCreate();  // timing disabled
void EventDestroy(void* event);
absl::Status MemcpyHostToDeviceAsync(void* dst, const void* src, size_t bytes, void* stream);
absl::Status EventRecord(void* event, void* stream);
absl::Status StreamWaitEvent(void* stream, void* event);
absl::Status EventSynchronize(void* event);
absl::Status StreamSynchronize(void* stream);
// Synchronous device-to-host copy (tests and benchmarks read back what the loader delivered).
absl::Status MemcpyDeviceToHost(void* dst, const void* src, size_t bytes);

}  // namespace grist::loader::cuda

#endif  // GRIST_LOADER_INTERNAL_CUDA_H_
