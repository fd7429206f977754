// Megatron-LM indexed datasets (MMIDIDX version 1) of variable-length sequences: what
// `grist tokenize encode` writes, one sequence (and one Megatron document) per input document.
// Grammar: docs/formats/mmidx.md. The .idx header constants are shared with shard/shard_format.h.
#ifndef GRIST_TOKENIZE_INDEXED_DATASET_H_
#define GRIST_TOKENIZE_INDEXED_DATASET_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/hash.h"

namespace grist {
class Env;
class WritableFile;
}

namespace grist::tokenize {

// Token dtype of a dataset: 2 (uint16) or 4 (int32) bytes.
struct DatasetInfo {
  std::string prefix;  // files are prefix + ".bin" / ".idx"
  uint64_t sequences = 0;
  uint64_t tokens = 0;
  int dtype_bytes = 2;
  uint64_t bin_bytes = 0, idx_bytes = 0;
};

// Writes prefix.bin / prefix.idx. Both are written under ".tmp" names and renamed by Finish() after
// being synced (then the directory is synced). Not thread-safe.
class IndexedDatasetWriter {
 public:
  // dtype_bytes: 2 for uint16 (vocabulary <= 65536), 4 for int32.
  static absl::StatusOr<std::unique_ptr<IndexedDatasetWriter>> Open(Env* env, std::string prefix,
                                                                    int dtype_bytes);
  ~IndexedDatasetWriter();
  // InvalidArgument for an id outside the dtype's range.
  absl::Status Add(std::span<const int> ids);
  absl::StatusOr<DatasetInfo> Finish();
  uint64_t sequences() const { return lengths_.size(); }

 private:
  IndexedDatasetWriter() = default;
  Env* env_ = nullptr;
  std::string prefix_;
  int dtype_bytes_ = 2;
  std::unique_ptr<WritableFile> bin_;
  std::vector<int32_t> lengths_;
  uint64_t tokens_ = 0;
  std::string buf_;
  bool finished_ = false;
};

// Reads a dataset, validating the .idx against the .bin's size before mapping: magic, version,
// dtype, counts, pointers consistent with the lengths, document indices 0..n. A truncated or
// corrupted dataset is DataLoss naming the file. Thread-safe for concurrent reads.
class IndexedDatasetReader {
 public:
  static absl::StatusOr<std::unique_ptr<IndexedDatasetReader>> Open(Env* env,
                                                                    const std::string& prefix);
  ~IndexedDatasetReader();
  uint64_t sequences() const { return lengths_.size(); }
  uint64_t tokens() const { return tokens_; }
  int dtype_bytes() const { return dtype_bytes_; }
  uint32_t length(uint64_t i) const { return static_cast<uint32_t>(lengths_[i]); }
  // Appends sequence i's ids to *out.
  void Read(uint64_t i, std::vector<int32_t>* out) const;

 private:
  IndexedDatasetReader() = default;
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::vector<int32_t> lengths_;
  std::vector<uint64_t> offsets_;  // token offsets
  uint64_t tokens_ = 0;
  int dtype_bytes_ = 2;
};

}  // namespace grist::tokenize

#endif  // GRIST_TOKENIZE_INDEXED_DATASET_H_
