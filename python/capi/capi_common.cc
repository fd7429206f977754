#include "python/capi/capi_common.h"

#include <algorithm>
#include <cstring>
#include <new>
#include <stdexcept>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/version.h"

namespace grist::capi {
namespace {

thread_local std::string last_error;

// grist_status is absl::StatusCode, number for number.
static_assert(GRIST_OK == static_cast<int>(absl::StatusCode::kOk));
static_assert(GRIST_CANCELLED == static_cast<int>(absl::StatusCode::kCancelled));
static_assert(GRIST_UNKNOWN == static_cast<int>(absl::StatusCode::kUnknown));
static_assert(GRIST_INVALID_ARGUMENT == static_cast<int>(absl::StatusCode::kInvalidArgument));
static_assert(GRIST_DEADLINE_EXCEEDED == static_cast<int>(absl::StatusCode::kDeadlineExceeded));
static_assert(GRIST_NOT_FOUND == static_cast<int>(absl::StatusCode::kNotFound));
static_assert(GRIST_ALREADY_EXISTS == static_cast<int>(absl::StatusCode::kAlreadyExists));
static_assert(GRIST_PERMISSION_DENIED == static_cast<int>(absl::StatusCode::kPermissionDenied));
static_assert(GRIST_RESOURCE_EXHAUSTED == static_cast<int>(absl::StatusCode::kResourceExhausted));
static_assert(GRIST_FAILED_PRECONDITION == static_cast<int>(absl::StatusCode::kFailedPrecondition));
static_assert(GRIST_ABORTED == static_cast<int>(absl::StatusCode::kAborted));
static_assert(GRIST_OUT_OF_RANGE == static_cast<int>(absl::StatusCode::kOutOfRange));
static_assert(GRIST_UNIMPLEMENTED == static_cast<int>(absl::StatusCode::kUnimplemented));
static_assert(GRIST_INTERNAL == static_cast<int>(absl::StatusCode::kInternal));
static_assert(GRIST_UNAVAILABLE == static_cast<int>(absl::StatusCode::kUnavailable));
static_assert(GRIST_DATA_LOSS == static_cast<int>(absl::StatusCode::kDataLoss));
static_assert(GRIST_UNAUTHENTICATED == static_cast<int>(absl::StatusCode::kUnauthenticated));

}  // namespace

int SetError(const absl::Status& s) {
  if (s.ok()) return 0;
  last_error = std::string(s.message());
  return -static_cast<int>(s.code());
}

int NullArgument(const char* fn, const char* what) {
  return SetError(absl::InvalidArgumentError(absl::StrCat(fn, ": ", what, " is NULL")));
}

int CheckStructSize(const char* fn, const char* type, uint32_t got, size_t want) {
  if (got == want) return 0;
  return SetError(absl::InvalidArgumentError(
      absl::StrCat(fn, ": ", type, ".struct_size is ", got, ", this library's is ", want,
                   " (the caller and libgrist_capi.so come from different builds)")));
}

int NegativeCount(const char* fn, const char* what, int64_t n) {
  return SetError(absl::InvalidArgumentError(absl::StrCat(fn, ": ", what, " is ", n, ", must be >= 0")));
}

int ExceptionToError(const char* fn, std::exception_ptr e) noexcept {
  try {
    std::rethrow_exception(e);
  } catch (const std::bad_alloc&) {
    last_error = absl::StrCat(fn, ": out of memory");
    return -GRIST_RESOURCE_EXHAUSTED;
  } catch (const std::exception& x) {
    last_error = absl::StrCat(fn, ": internal error: ", x.what());
  } catch (...) {
    last_error = absl::StrCat(fn, ": internal error: unknown exception");
  }
  return -GRIST_INTERNAL;
}

}  // namespace grist::capi

GRIST_CAPI const char* grist_last_error(void) { return grist::capi::last_error.c_str(); }

GRIST_CAPI size_t grist_last_error_copy(char* buf, size_t size) {
  const std::string& m = grist::capi::last_error;
  if (buf != nullptr && size > 0) {
    const size_t n = std::min(m.size(), size - 1);
    std::memcpy(buf, m.data(), n);
    buf[n] = '\0';
  }
  return m.size();
}

GRIST_CAPI const char* grist_status_name(int code) {
  switch (code < 0 ? -static_cast<int64_t>(code) : static_cast<int64_t>(code)) {
    case GRIST_OK: return "OK";
    case GRIST_CANCELLED: return "CANCELLED";
    case GRIST_INVALID_ARGUMENT: return "INVALID_ARGUMENT";
    case GRIST_DEADLINE_EXCEEDED: return "DEADLINE_EXCEEDED";
    case GRIST_NOT_FOUND: return "NOT_FOUND";
    case GRIST_ALREADY_EXISTS: return "ALREADY_EXISTS";
    case GRIST_PERMISSION_DENIED: return "PERMISSION_DENIED";
    case GRIST_RESOURCE_EXHAUSTED: return "RESOURCE_EXHAUSTED";
    case GRIST_FAILED_PRECONDITION: return "FAILED_PRECONDITION";
    case GRIST_ABORTED: return "ABORTED";
    case GRIST_OUT_OF_RANGE: return "OUT_OF_RANGE";
    case GRIST_UNIMPLEMENTED: return "UNIMPLEMENTED";
    case GRIST_INTERNAL: return "INTERNAL";
    case GRIST_UNAVAILABLE: return "UNAVAILABLE";
    case GRIST_DATA_LOSS: return "DATA_LOSS";
    case GRIST_UNAUTHENTICATED: return "UNAUTHENTICATED";
    default: return "UNKNOWN";
  }
}

GRIST_CAPI int grist_capi_abi_version(void) { return GRIST_CAPI_ABI_VERSION; }

GRIST_CAPI const char* grist_version(void) { return GRIST_VERSION; }
