#include "loader/internal/cuda.h"

#include "absl/strings/str_cat.h"

#ifdef GRIST_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace grist::loader::cuda {

#ifdef GRIST_HAVE_CUDA
namespace {
absl::Status Check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return absl::OkStatus();
  std::string msg = absl::StrCat(what, ": ", cudaGetErrorName(e), ": ", cudaGetErrorString(e));
  if (e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver || e == cudaErrorInvalidDevice) {
    return absl::UnavailableError(msg);
  }
  return absl::InternalError(msg);
}
}  // namespace

bool Built() { return true; }

absl::Status CheckDevice(int device) {
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return absl::UnavailableError(
        absl::StrCat("no CUDA device: cudaGetDeviceCount: ", cudaGetErrorName(e)));
  }
  if (device < 0 || device >= count) {
    return absl::UnavailableError(
        absl::StrCat("CUDA device ", device, " does not exist (", count, " present)"));
  }
  return absl::OkStatus();
}
absl::Status SetDevice(int device) { return Check(cudaSetDevice(device), "cudaSetDevice"); }
int CurrentDevice() {
  int d = -1;
  if (cudaGetDevice(&d) != cudaSuccess) {
    (void)cudaGetLastError();
    return -1;
  }
  return d;
}
absl::StatusOr<void*> HostAlloc(size_t bytes) {
  void* p = nullptr;
  absl::Status s = Check(cudaHostAlloc(&p, bytes, cudaHostAllocPortable), "cudaHostAlloc");
  if (!s.ok()) return s;
  return p;
}
void HostFree(void* p) {
  if (p) (void)cudaFreeHost(p);
}
absl::StatusOr<void*> DeviceAlloc(size_t bytes) {
  void* p = nullptr;
  absl::Status s = Check(cudaMalloc(&p, bytes), "cudaMalloc");
  if (!s.ok()) return s;
  return p;
}
void DeviceFree(void* p) {
  if (p) (void)cudaFree(p);
}
absl::StatusOr<void*> StreamCreate() {
  cudaStream_t s = nullptr;
  absl::Status st = Check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
  if (!st.ok()) return st;
  return static_cast<void*>(s);
}
void StreamDestroy(void* stream) {
  if (stream) (void)cudaStreamDestroy(static_cast<cudaStream_t>(stream));
}
absl::StatusOr<void*> EventCreate() {
  cudaEvent_t e = nullptr;
  absl::Status st = Check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate");
  if (!st.ok()) return st;
  return static_cast<void*>(e);
}
void EventDestroy(void* event) {
  if (event) (void)cudaEventDestroy(static_cast<cudaEvent_t>(event));
}
absl::Status MemcpyHostToDeviceAsync(void* dst, const void* src, size_t bytes, void* stream) {
  return Check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice,
                               static_cast<cudaStream_t>(stream)),
               "cudaMemcpyAsync");
}
absl::Status EventRecord(void* event, void* stream) {
  return Check(cudaEventRecord(static_cast<cudaEvent_t>(event), static_cast<cudaStream_t>(stream)),
               "cudaEventRecord");
}
absl::Status StreamWaitEvent(void* stream, void* event) {
  return Check(cudaStreamWaitEvent(static_cast<cudaStream_t>(stream),
                                   static_cast<cudaEvent_t>(event), 0),
               "cudaStreamWaitEvent");
}
absl::Status EventSynchronize(void* event) {
  return Check(cudaEventSynchronize(static_cast<cudaEvent_t>(event)), "cudaEventSynchronize");
}
absl::Status StreamSynchronize(void* stream) {
  return Check(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)), "cudaStreamSynchronize");
}
absl::Status MemcpyDeviceToHost(void* dst, const void* src, size_t bytes) {
  return Check(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy");
}

#else  // !GRIST_HAVE_CUDA

namespace {
absl::Status NotBuilt() {
  return absl::UnavailableError("grist was built without the CUDA toolkit");
}
}  // namespace

bool Built() { return false; }
absl::Status CheckDevice(int) { return NotBuilt(); }
absl::Status SetDevice(int) { return NotBuilt(); }
int CurrentDevice() { return -1; }
absl::StatusOr<void*> HostAlloc(size_t) { return NotBuilt(); }
void HostFree(void*) {}
absl::StatusOr<void*> DeviceAlloc(size_t) { return NotBuilt(); }
void DeviceFree(void*) {}
absl::StatusOr<void*> StreamCreate() { return NotBuilt(); }
void StreamDestroy(void*) {}
absl::StatusOr<void*> EventCreate() { return NotBuilt(); }
void EventDestroy(void*) {}
absl::Status MemcpyHostToDeviceAsync(void*, const void*, size_t, void*) { return NotBuilt(); }
absl::Status EventRecord(void*, void*) { return NotBuilt(); }
absl::Status StreamWaitEvent(void*, void*) { return NotBuilt(); }
absl::Status EventSynchronize(void*) { return NotBuilt(); }
absl::Status StreamSynchronize(void*) { return NotBuilt(); }
absl::Status MemcpyDeviceToHost(void*, const void*, size_t) { return NotBuilt(); }

#endif

}  // namespace grist::loader::cuda
