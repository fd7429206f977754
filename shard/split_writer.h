// Writes one split of a release as a sequence of size-bounded shards
// (shards/<split>-00000, -00001, ...), numbering first_sample across them.
#ifndef GRIST_SHARD_SPLIT_WRITER_H_
#define GRIST_SHARD_SPLIT_WRITER_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "absl/status/statusor.h"
#include "common/option_table.h"
#include "shard/manifest.h"
#include "shard/shard.h"

namespace grist {
class Config;
}

namespace grist::shard {

// The options of section [shard] of a release config.
struct ShardOptions {
  uint64_t max_bytes = 256ull << 20;  // SplitWriter's max_shard_bytes

  // Declared once (shard/split_writer.cc): FromConfig, the flags of `grist pack` and their help.
  static const OptionTable<ShardOptions>& Table();
  // Reads shard.max_bytes (> 0). InvalidArgument naming the config and the key.
  static absl::StatusOr<ShardOptions> FromConfig(const Config& config);
};

class SplitWriter {
 public:
  // A new shard starts when the current one's .bin would exceed `max_shard_bytes` (at least one
  // sample per shard). `release_dir`/shards must exist.
  SplitWriter(Env* env, std::string release_dir, std::string split, uint32_t sample_tokens,
              TokenDtype dtype, uint64_t max_shard_bytes);
  ~SplitWriter();
  absl::Status Append(std::span<const int32_t> tokens, std::span<const uint32_t> segments);
  // Finishes the open shard; returns the split (documents left 0 for the caller to fill).
  absl::StatusOr<SplitInfo> Finish();

 private:
  // Finishes the current shard (if any) and adds it to info_ after the ones before it.
  absl::Status FinishShard();

  Env* env_;
  std::string dir_, split_;
  uint32_t sample_tokens_;
  TokenDtype dtype_;
  uint64_t max_bytes_;
  std::unique_ptr<ShardWriter> cur_;
  SplitInfo info_;
};

}  // namespace grist::shard

#endif  // GRIST_SHARD_SPLIT_WRITER_H_
