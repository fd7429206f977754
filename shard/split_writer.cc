#include "shard/split_writer.h"

#include <limits>

#include "absl/strings/str_format.h"
#include "common/config.h"
#include "common/status_macros.h"

namespace grist::shard {

const OptionTable<ShardOptions>& ShardOptions::Table() {
  static const OptionTable<ShardOptions>* table = [] {
    auto* t = new OptionTable<ShardOptions>("shard.");
    t->Int("shard.max_bytes", GRIST_OPTION_FIELD(max_bytes),
           "A new shard starts when the .bin of the current one would pass this many bytes (at "
           "least one sample per shard)",
           {1, std::numeric_limits<double>::infinity()})
        .Flags({"shard-max-bytes"});
    return t;
  }();
  return *table;
}

absl::StatusOr<ShardOptions> ShardOptions::FromConfig(const Config& config) {
  ShardOptions o;
  RETURN_IF_ERROR(Table().Read(config, &o));
  return o;
}

SplitWriter::SplitWriter(Env* env, std::string release_dir, std::string split,
                         uint32_t sample_tokens, TokenDtype dtype, uint64_t max_shard_bytes)
    : env_(env),
      dir_(std::move(release_dir)),
      split_(std::move(split)),
      sample_tokens_(sample_tokens),
      dtype_(dtype),
      max_bytes_(max_shard_bytes) {}

SplitWriter::~SplitWriter() = default;

absl::Status SplitWriter::Append(std::span<const int32_t> tokens,
                                 std::span<const uint32_t> segments) {
  const uint64_t sample_bytes = static_cast<uint64_t>(sample_tokens_) * TokenDtypeSize(dtype_);
  if (cur_ && cur_->samples() > 0 && (cur_->samples() + 1) * sample_bytes > max_bytes_) {
    RETURN_IF_ERROR(FinishShard());
  }
  if (!cur_) {
    std::string name = absl::StrFormat("%s/%s-%05d", std::string(kShardsDir), split_,
                                       static_cast<int>(info_.shards.size()));
    ASSIGN_OR_RETURN(cur_, ShardWriter::Open(env_, dir_, name, sample_tokens_, dtype_));
  }
  return cur_->Append(tokens, segments);
}

absl::StatusOr<SplitInfo> SplitWriter::Finish() {
  RETURN_IF_ERROR(FinishShard());
  return info_;
}

absl::Status SplitWriter::FinishShard() {
  if (!cur_) return absl::OkStatus();
  ASSIGN_OR_RETURN(ShardInfo s, cur_->Finish());
  s.first_sample = info_.samples;
  info_.samples += s.samples;
  info_.tokens += s.tokens;
  info_.padding_tokens += s.padding_tokens;
  info_.shards.push_back(std::move(s));
  cur_.reset();
  return absl::OkStatus();
}

}  // namespace grist::shard
