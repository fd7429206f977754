// The checkpoint reader: reads a rank file with io_uring (O_DIRECT where allowed) into one aligned
// buffer (pinned for CUDA when a GPU is present), parses and validates the safetensors header
// against hostile input, and verifies grist's checksums (per block, per file, and the manifest's).
//
// Errors: DataLoss naming the file (and block offset) for a checksum mismatch, a truncated or
// malformed file, or a hostile header; NotFound when the folder is not a published checkpoint.
// Thread safety: LoadedFile is immutable after loading; share it freely.
#ifndef GRIST_CKPTIO_READER_H_
#define GRIST_CKPTIO_READER_H_

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
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
  friend class StreamingRead;
  LoadedFile() = default;
  std::string path_;
  ParsedHeader header_;
  char* buffer_ = nullptr;
  uint64_t capacity_ = 0;
  uint64_t size_ = 0;
  bool direct_ = false;
  bool pinned_ = false;
};

// Reads one file in the background so the caller can consume its data as it lands (e.g. start
// host-to-device copies of the first tensors while later ones are still being read). Data seen
// before Finish() is not yet verified: use it only once Finish() returned OK.
// Thread safety: Header/WaitData/Finish from one thread; the reading runs on an internal thread.
class StreamingRead {
 public:
  static absl::StatusOr<std::unique_ptr<StreamingRead>> Start(const std::string& path,
                                                              const ReadOptions& options,
                                                              const ManifestFile* expected = nullptr);
  ~StreamingRead();
  // Blocks until the header is read; parses and validates it (hostile input -> DataLoss).
  absl::StatusOr<const ParsedHeader*> Header();
  // Start of the data region (valid once Header() returned OK).
  const char* data() const;
  // Whether the buffer is registered with CUDA (host-to-device copies from it are asynchronous).
  bool pinned() const;
  // Blocks until data bytes [0, upto) are in memory, or the read failed.
  absl::Status WaitData(uint64_t upto);
  // Blocks until the whole file is read, then verifies it. Call once.
  absl::StatusOr<std::unique_ptr<LoadedFile>> Finish();

 private:
  StreamingRead() = default;
  void Progress(uint64_t prefix, const absl::Status& error, bool finished);
  absl::Status WaitPrefix(uint64_t bytes);
  std::unique_ptr<LoadedFile> file_;
  ReadOptions options_;
  bool has_expected_ = false;
  ManifestFile expected_;
  bool header_parsed_ = false;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t prefix_ = 0;       // GUARDED_BY(mu_): file bytes [0, prefix_) are in memory
  bool finished_ = false;     // GUARDED_BY(mu_)
  absl::Status error_;        // GUARDED_BY(mu_)
};

// Part of a rank file's data region: bytes [begin, end), relative to the data start.
struct DataRange {
  uint64_t begin = 0;
  uint64_t end = 0;
};

// Reads only the checksum blocks of one checkpoint file that cover `ranges` (a resharding load
// reads just the bytes overlapping its shards): the header first (its checksum, and the block
// list's digest, checked against the manifest's record), then each needed run of blocks with
// io_uring (O_DIRECT where allowed: blocks are multiples of 4096 from a 4096-aligned data start),
// every block verified against its XXH3-64 before Range() is available. DataLoss naming the file
// and block on any mismatch; InvalidArgument for a range beyond the data region.
class RangeRead {
 public:
  static absl::StatusOr<std::unique_ptr<RangeRead>> Read(const std::string& path,
                                                         const ManifestFile& expected,
                                                         const std::vector<DataRange>& ranges,
                                                         const ReadOptions& options);
  ~RangeRead();
  RangeRead(const RangeRead&) = delete;
  RangeRead& operator=(const RangeRead&) = delete;
  // The bytes of ranges[i] (valid while this object lives).
  const char* Range(size_t i) const { return buffer_ + range_offsets_[i]; }
  const ParsedHeader& header() const { return header_; }
  uint64_t bytes_read() const { return bytes_read_; }
  bool direct() const { return direct_; }

 private:
  RangeRead() = default;
  ParsedHeader header_;
  char* buffer_ = nullptr;
  uint64_t capacity_ = 0;
  std::vector<uint64_t> range_offsets_;
  uint64_t bytes_read_ = 0;
  bool direct_ = false;
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
