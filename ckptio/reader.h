// The checkpoint reader: reads a rank file with io_uring (O_DIRECT where allowed) into one aligned
// buffer (pinned for CUDA when a GPU is present), parses and validates the safetensors header
// against hostile input, and verifies grist's checksums (per block, per file, and the manifest's).
//
// Errors: DataLoss naming the file (and block offset) for a checksum mismatch, a truncated or
// malformed file, or a hostile header; NotFound when the folder is not a published checkpoint.
// Thread safety: LoadedFile is immutable after loading; share it freely.
#ifndef GRIST_CKPTIO_READER_H_
#define GRIST_CKPTIO_READER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ckptio/checkpoint.h"
#include "ckptio/safetensors.h"
#include "common/env.h"

namespace grist::ckptio {

struct ReadOptions {
  bool direct = true;                // O_DIRECT where the file system allows it
  int queue_depth = 16;
  uint64_t block_size = 4ull << 20;
  bool verify = true;                // check every checksum
  bool require_checksums = true;     // reject files without grist's checksums (foreign files)
  bool pin_for_cuda = true;
  Env* env = nullptr;                // nullptr: Env::Default() (the io_uring path)
};

class LoadedFile {
 public:
  ~LoadedFile();
  LoadedFile(const LoadedFile&) = delete;
  LoadedFile& operator=(const LoadedFile&) = delete;

  const std::string& path() const { return path_; }
  const ParsedHeader& header() const { return header_; }
  const std::vector<TensorInfo>& tensors() const { return header_.tensors; }
  // The tensor's bytes (valid while this object lives).
  std::string_view Bytes(const TensorInfo& t) const {
    return std::string_view(buffer_ + header_.data_start + t.begin, t.nbytes());
  }
  const char* data() const { return buffer_ + header_.data_start; }
  uint64_t file_size() const { return size_; }
  // The value of a `__metadata__` key, if present.
  std::optional<std::string> Metadata(std::string_view key) const;
  bool direct() const { return direct_; }
  bool pinned() const { return pinned_; }

 private:
  friend absl::StatusOr<std::unique_ptr<LoadedFile>> ReadCheckpointFile(
      const std::string&, const ReadOptions&, const ManifestFile*);
  LoadedFile() = default;
  std::string path_;
  ParsedHeader header_;
  char* buffer_ = nullptr;
  uint64_t capacity_ = 0;
  uint64_t size_ = 0;
  bool direct_ = false;
  bool pinned_ = false;
};

// Reads and verifies one safetensors file. With `expected`, its size and checksums must match.
absl::StatusOr<std::unique_ptr<LoadedFile>> ReadCheckpointFile(const std::string& path,
                                                               const ReadOptions& options,
                                                               const ManifestFile* expected = nullptr);

struct LoadedCheckpoint {
  Manifest manifest;
  std::vector<std::unique_ptr<LoadedFile>> files;  // by rank, or just the rank asked for
};
// Loads a published checkpoint folder: every rank (`rank` < 0) or one rank.
absl::StatusOr<LoadedCheckpoint> LoadCheckpoint(const std::string& dir, const ReadOptions& options,
                                                int rank = -1);
// Reads every file of `dir` and checks every checksum, keeping at most one file in memory.
absl::Status VerifyCheckpoint(const std::string& dir, const ReadOptions& options);

}  // namespace grist::ckptio

#endif  // GRIST_CKPTIO_READER_H_
