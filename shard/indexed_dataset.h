// Megatron-LM indexed datasets (MMIDIDX version 1): grist's one reader and writer of .bin/.idx
// files. `grist tokenize encode` writes its output with it, the release's document files
// (documents/<split>) are written with it, and the shard writer/reader (shard/shard.h) use its
// index encoder and validator for the packed shards' .idx. Grammar: docs/formats/mmidx.md;
// constants: shard/mmidx_format.h.
//
// Every sequence is one Megatron document (document_indices = 0, 1, ..., n), which is what
// Megatron's own preprocess_data.py writes without sentence splitting.
#ifndef GRIST_SHARD_INDEXED_DATASET_H_
#define GRIST_SHARD_INDEXED_DATASET_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/hash.h"
#include "shard/mmidx_format.h"

namespace grist {
class Env;
class WritableFile;
}

namespace grist::shard {

namespace internal {
class MappedFile;
}

// The index of `n` sequences of the given lengths, one document per sequence.
std::string EncodeIdx(TokenDtype dtype, std::span<const int32_t> lengths);

// A validated index image: what ParseIdx found.
struct IdxView {
  TokenDtype dtype = TokenDtype::kUint16;
  uint64_t sequences = 0;
  uint64_t tokens = 0;            // sum of the lengths
  const char* lengths = nullptr;  // i32le[sequences], inside the image
  int32_t length(uint64_t i) const;
};

// Validates an index image (magic, version, dtype code, counts, size, non-negative lengths,
// pointers equal to the running byte offsets, document indices 0..n). DataLoss
// "<path>: corrupt index: <what>" otherwise. The view points into `idx`.
absl::StatusOr<IdxView> ParseIdx(std::string_view idx, const std::string& path);

// What a finished dataset holds.
struct DatasetInfo {
  std::string prefix;  // files are prefix + ".bin" / ".idx"
  uint64_t sequences = 0;
  uint64_t tokens = 0;
  int dtype_bytes = 2;
  uint64_t bin_bytes = 0, idx_bytes = 0;
  Hash128 bin_xxh3_128, idx_xxh3_128;
};

// Writes prefix.bin / prefix.idx. Both are written under ".tmp" names and renamed by Finish() after
// being synced (then the directory is synced), so a crash leaves no file under the final names.
// Not thread-safe.
class IndexedDatasetWriter {
 public:
  // dtype_bytes: 2 for uint16 (vocabulary <= 65536), 4 for int32.
  static absl::StatusOr<std::unique_ptr<IndexedDatasetWriter>> Open(Env* env, std::string prefix,
                                                                    int dtype_bytes);
  static absl::StatusOr<std::unique_ptr<IndexedDatasetWriter>> Open(Env* env, std::string prefix,
                                                                    TokenDtype dtype) {
    return Open(env, std::move(prefix), static_cast<int>(TokenDtypeSize(dtype)));
  }
  ~IndexedDatasetWriter();
  // Appends one sequence (one document). InvalidArgument, writing nothing, for an id outside the
  // dtype's range or a sequence longer than 2^31-1 tokens.
  absl::Status Add(std::span<const int32_t> ids);
  absl::StatusOr<DatasetInfo> Finish();
  uint64_t sequences() const { return lengths_.size(); }
  uint64_t tokens() const { return tokens_; }

 private:
  IndexedDatasetWriter() = default;
  Env* env_ = nullptr;
  std::string prefix_;
  TokenDtype dtype_ = TokenDtype::kUint16;
  std::unique_ptr<WritableFile> bin_;
  Hasher128 bin_hash_;
  std::vector<int32_t> lengths_;
  uint64_t tokens_ = 0;
  std::string buf_;
  bool finished_ = false;
};

// Reads a dataset through a read-only mapping (POSIX Env) or a copy (other Envs), validating the
// .idx (ParseIdx) and the .bin's size against it before mapping: a truncated or corrupted dataset
// is DataLoss naming the file, never SIGBUS. Thread-safe for concurrent reads.
class IndexedDatasetReader {
 public:
  static absl::StatusOr<std::unique_ptr<IndexedDatasetReader>> Open(Env* env,
                                                                    const std::string& prefix);
  ~IndexedDatasetReader();
  uint64_t sequences() const { return lengths_.size(); }
  uint64_t tokens() const { return tokens_; }
  TokenDtype dtype() const { return dtype_; }
  int dtype_bytes() const { return static_cast<int>(TokenDtypeSize(dtype_)); }
  uint32_t length(uint64_t i) const { return static_cast<uint32_t>(lengths_[i]); }
  // Appends sequence i's ids to *out.
  void Read(uint64_t i, std::vector<int32_t>* out) const;

 private:
  IndexedDatasetReader() = default;
  std::unique_ptr<internal::MappedFile> bin_;
  std::vector<int32_t> lengths_;
  std::vector<uint64_t> offsets_;  // token offsets, n + 1
  uint64_t tokens_ = 0;
  TokenDtype dtype_ = TokenDtype::kUint16;
};

}  // namespace grist::shard

#endif  // GRIST_SHARD_INDEXED_DATASET_H_
