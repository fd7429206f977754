// Shared pieces of grist's C ABI (libgrist_capi.so), used by the Python package over ctypes.
//
// Conventions for every exported function: `extern "C"`, GRIST_CAPI visibility, return int
// (0 = success, else a negative absl::StatusCode) and set a thread-local message readable with
// grist_last_error(). Objects are opaque handles created by grist_*_open/new and released by the
// matching grist_*_close/free. No C++ exception crosses the boundary.
#ifndef GRIST_PYTHON_CAPI_CAPI_COMMON_H_
#define GRIST_PYTHON_CAPI_CAPI_COMMON_H_

#include "absl/status/status.h"

#define GRIST_CAPI extern "C" __attribute__((visibility("default")))

namespace grist::capi {

// Stores `s`'s message for grist_last_error() and returns -code (0 for OK).
int SetError(const absl::Status& s);

}  // namespace grist::capi

#endif  // GRIST_PYTHON_CAPI_CAPI_COMMON_H_
