// Shared pieces of the implementation of grist's C ABI (python/capi/grist_capi.h, which states the
// contracts: return codes, handles, string lifetimes, thread safety).
//
// Every exported function is defined as `GRIST_CAPI <type> grist_x(...)`: C linkage, so a definition
// whose signature differs from grist_capi.h's declaration is a compile error, and default
// visibility (the library is built with hidden visibility: nothing else is exported).
#ifndef GRIST_PYTHON_CAPI_CAPI_COMMON_H_
#define GRIST_PYTHON_CAPI_CAPI_COMMON_H_

#include <cstddef>
#include <cstdint>
#include <exception>

#include "absl/status/status.h"
#include "python/capi/grist_capi.h"

#define GRIST_CAPI extern "C" __attribute__((visibility("default")))

namespace grist::capi {

// Stores `s`'s message for grist_last_error() and returns -code (0 for OK).
int SetError(const absl::Status& s);

// InvalidArgument "<fn>: <what> is NULL".
int NullArgument(const char* fn, const char* what);

// 0 when `got` (a struct_size field) is `want`, else InvalidArgument naming the struct and both
// sizes (Python and the library come from different builds).
int CheckStructSize(const char* fn, const char* type, uint32_t got, size_t want);

// The checks that open a C ABI function taking a versioned options struct `s` (argument `what`,
// C type `type`): NullArgument when it is NULL, CheckStructSize against sizeof(T). 0: go on.
template <class T>
int CheckStruct(const char* fn, const char* what, const char* type, const T* s) {
  if (s == nullptr) return NullArgument(fn, what);
  return CheckStructSize(fn, type, s->struct_size, sizeof(T));
}

// An out-pointer argument: NullArgument when it is NULL, else sets *out to NULL (what the caller
// holds on any failure after this) and returns 0.
template <class T>
int ClearOut(const char* fn, T** out) {
  if (out == nullptr) return NullArgument(fn, "out");
  *out = nullptr;
  return 0;
}

// InvalidArgument "<fn>: <what> is <n>, must be >= 0" for a negative count.
int NegativeCount(const char* fn, const char* what, int64_t n);

// Runs `f` (returning the int of a C ABI function) so that no exception crosses the boundary: one
// that escapes becomes -GRIST_INTERNAL naming `fn`.
int ExceptionToError(const char* fn, std::exception_ptr e) noexcept;
template <class F>
int Guard(const char* fn, F&& f) noexcept {
  try {
    return f();
  } catch (...) {
    return ExceptionToError(fn, std::current_exception());
  }
}

}  // namespace grist::capi

#endif  // GRIST_PYTHON_CAPI_CAPI_COMMON_H_
