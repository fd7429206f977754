#include "common/status_macros.h"

#include <cstring>

#include "absl/strings/str_cat.h"

namespace grist {

absl::Status Annotate(const absl::Status& s, std::string_view context) {
  if (s.ok()) return s;
  return absl::Status(s.code(), absl::StrCat(std::string(context), ": ", s.message()));
}

absl::Status ErrnoError(int err, std::string_view what) {
  // Not absl::ErrnoToStatus(err, ...): it appends the strerror text itself, which gave it twice.
  return absl::Status(absl::ErrnoToStatusCode(err), absl::StrCat(std::string(what), ": ", std::strerror(err)));
}

}  // namespace grist
