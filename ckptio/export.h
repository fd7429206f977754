// Consolidating a sharded checkpoint into plain Hugging Face-style safetensors files.
//
// ExportCheckpoint reads every tensor whose name starts with `prefix` (all of them for an empty
// prefix), assembles each whole from its shards (reading only their byte ranges, every block
// verified) and writes `model.safetensors`, or, when the tensors exceed `max_shard_bytes`,
// `model-0000k-of-0000n.safetensors` files plus `model.safetensors.index.json` (weight_map from
// each name to its file, metadata.total_size). Names lose the prefix; dtypes are kept; the files'
// `__metadata__` has "format": "pt" (what transformers expects) besides grist's checksums.
// Memory: one output file's tensors at a time.
#ifndef GRIST_CKPTIO_EXPORT_H_
#define GRIST_CKPTIO_EXPORT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace grist::ckptio {

struct ExportOptions {
  std::string prefix;                       // e.g. "model."; empty: every tensor
  uint64_t max_shard_bytes = 5ull << 30;    // above this, several files and an index
  std::string base_name = "model";          // model.safetensors / model-00001-of-00003...
};

struct ExportResult {
  std::vector<std::string> files;           // written, in order (names inside out_dir)
  uint64_t tensors = 0;
  uint64_t total_bytes = 0;
  bool index = false;                       // model.safetensors.index.json written
};

absl::StatusOr<ExportResult> ExportCheckpoint(const std::string& dir, const std::string& out_dir,
                                              const ExportOptions& options);

}  // namespace grist::ckptio

#endif  // GRIST_CKPTIO_EXPORT_H_
