// A read-only view of a whole file: a memory mapping for the POSIX Env, an in-memory copy for any
// other Env (MemEnv, FaultInjectionEnv in tests). The size is checked against `expected_size` on
// the open descriptor before mapping, so a truncated file is an error, never a SIGBUS.
#ifndef GRIST_SHARD_INTERNAL_MAPPED_FILE_H_
#define GRIST_SHARD_INTERNAL_MAPPED_FILE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace grist {
class Env;
}

namespace grist::shard::internal {

class MappedFile {
 public:
  // expected_size: UINT64_MAX to accept any size. DataLoss "<path>: size N, expected M" on a
  // mismatch; NotFound for a missing file.
  static absl::StatusOr<std::unique_ptr<MappedFile>> Open(Env* env, const std::string& path,
                                                          uint64_t expected_size = UINT64_MAX);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const char* data() const { return data_; }
  uint64_t size() const { return size_; }
  std::string_view view() const { return {data_, static_cast<size_t>(size_)}; }
  const std::string& path() const { return path_; }

 private:
  MappedFile() = default;
  std::string path_;
  const char* data_ = nullptr;
  uint64_t size_ = 0;
  void* map_ = nullptr;
  size_t map_size_ = 0;
  std::string copy_;
};

}  // namespace grist::shard::internal

#endif  // GRIST_SHARD_INTERNAL_MAPPED_FILE_H_
