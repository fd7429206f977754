// The DLPack ABI (dlpack.h v0.8), field for field: what grist_batch_dlpack (grist_capi.h) hands
// out as a void* is a DLManagedTensor*, the stable v0.x layout torch 1.13 and 2.x read from a
// "dltensor" PyCapsule. The one declaration of that layout in grist: the library fills it
// (capi_loader.cc) and C++ callers of the ABI read it (tests/capi/capi_test.cc). C++ only, in
// namespace grist::dlpack, so it never collides with a caller's own dlpack.h.
#ifndef GRIST_PYTHON_CAPI_GRIST_DLPACK_H_
#define GRIST_PYTHON_CAPI_GRIST_DLPACK_H_

#include <cstdint>

namespace grist::dlpack {

// DLDeviceType values used by grist.
inline constexpr int32_t kDLCPU = 1;
inline constexpr int32_t kDLCUDA = 2;
// DLDataTypeCode values used by grist.
inline constexpr uint8_t kDLInt = 0;
inline constexpr uint8_t kDLUInt = 1;
inline constexpr uint8_t kDLFloat = 2;

struct DLDevice {
  int32_t device_type;  // kDLCPU, kDLCUDA
  int32_t device_id;
};

struct DLDataType {
  uint8_t code;  // kDLInt, kDLUInt, kDLFloat
  uint8_t bits;
  uint16_t lanes;
};

struct DLTensor {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;  // nullptr: compact row-major
  uint64_t byte_offset;
};

struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor* self);  // called once by the consumer
};

}  // namespace grist::dlpack

#endif  // GRIST_PYTHON_CAPI_GRIST_DLPACK_H_
