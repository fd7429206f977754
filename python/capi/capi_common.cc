#include "python/capi/capi_common.h"

#include <string>

#include "common/version.h"

namespace grist::capi {
namespace {
thread_local std::string last_error;
}

int SetError(const absl::Status& s) {
  if (s.ok()) {
    last_error.clear();
    return 0;
  }
  last_error = std::string(s.message());
  return -static_cast<int>(s.code());
}

}  // namespace grist::capi

GRIST_CAPI const char* grist_last_error(void) { return grist::capi::last_error.c_str(); }
GRIST_CAPI const char* grist_version(void) { return GRIST_VERSION; }
