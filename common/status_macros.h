// Status helpers for absl::Status / absl::StatusOr (Debian's Abseil 20220623 has no status macros).
//
//   RETURN_IF_ERROR(expr);                 // returns the Status of `expr` when it is not OK
//   ASSIGN_OR_RETURN(auto x, MakeX());     // declares/assigns x, or returns the error
//   ASSIGN_OR_RETURN(x, MakeX(), _.With("while reading " + path));   // not supported: keep it simple
//
// Errors are values: library code never throws. CHECK-style aborts are for programmer bugs only.
#ifndef GRIST_COMMON_STATUS_MACROS_H_
#define GRIST_COMMON_STATUS_MACROS_H_

#include <cerrno>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

#define GRIST_STATUS_CONCAT_INNER_(a, b) a##b
#define GRIST_STATUS_CONCAT_(a, b) GRIST_STATUS_CONCAT_INNER_(a, b)

#define RETURN_IF_ERROR(expr)                                 \
  do {                                                        \
    ::absl::Status grist_status_ = ::grist::AsStatus((expr)); \
    if (!grist_status_.ok()) return grist_status_;            \
  } while (0)

#define ASSIGN_OR_RETURN(lhs, rexpr) \
  GRIST_ASSIGN_OR_RETURN_IMPL_(GRIST_STATUS_CONCAT_(grist_statusor_, __LINE__), lhs, rexpr)

#define GRIST_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, rexpr) \
  auto statusor = (rexpr);                                 \
  if (!statusor.ok()) return std::move(statusor).status(); \
  lhs = std::move(statusor).value()

namespace grist {

inline const absl::Status& AsStatus(const absl::Status& s) { return s; }
template <typename T>
inline absl::Status AsStatus(const absl::StatusOr<T>& s) {
  return s.status();
}

// Returns `s` with `context + ": "` prepended to its message; OK stays OK.
absl::Status Annotate(const absl::Status& s, std::string_view context);

// The code absl::ErrnoToStatusCode(err), with "<what>: <strerror>" as the message.
absl::Status ErrnoError(int err, std::string_view what);

}  // namespace grist

#endif  // GRIST_COMMON_STATUS_MACROS_H_
