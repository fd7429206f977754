#include "loader/release_source.h"

#include <algorithm>
#include <atomic>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/env.h"
#include "common/status_macros.h"
#include "shard/manifest.h"

namespace grist::loader {
namespace {

class ReleaseSplitSource : public SampleSource {
 public:
  ReleaseSplitSource(std::unique_ptr<shard::Release> release, std::string split)
      : release_(std::move(release)), split_(std::move(split)) {
    const shard::Manifest& m = release_->manifest();
    shards_ = &release_->shards(split_);
    first_.reserve(shards_->size());
    for (const shard::ShardInfo& s : *shards_) first_.push_back(s.first_sample);
    readers_ = std::vector<std::atomic<const shard::ShardReader*>>(shards_->size());
    num_samples_ = m.split(split_)->samples;
    sample_tokens_ = m.sample_tokens;
    dtype_ = m.token_dtype == shard::TokenDtype::kUint16 ? TokenDtype::kUint16 : TokenDtype::kInt32;
    release_id_ = m.release_id;
    tokenizer_id_ = absl::StrCat(m.tokenizer.file.xxh3_128.ToHex(), "/vocab ", m.tokenizer.vocab_size);
  }

  uint64_t num_samples() const override { return num_samples_; }
  uint32_t sample_tokens() const override { return sample_tokens_; }
  TokenDtype token_dtype() const override { return dtype_; }
  const std::string& release_id() const override { return release_id_; }
  const std::string& split() const override { return split_; }

  absl::Status GetSample(uint64_t index, SampleView* out) const override {
    if (index >= num_samples_) {
      return absl::OutOfRangeError(absl::StrCat("sample ", index, " is past the split's ",
                                                num_samples_, " samples"));
    }
    const size_t i = ShardOf(index);
    ASSIGN_OR_RETURN(const shard::ShardReader* r, Reader(i));
    const uint64_t k = index - first_[i];
    if (k >= r->samples()) {
      return absl::DataLossError(absl::StrCat(Describe(index), ": shard holds only ", r->samples(),
                                              " samples"));
    }
    shard::SampleView v = r->sample(k);
    out->tokens = v.tokens;
    out->segments = v.segments.data();
    out->num_segments = v.segments.size();
    return absl::OkStatus();
  }

  std::string Describe(uint64_t index) const override {
    const size_t i = ShardOf(index);
    return absl::StrCat(release_->dir(), "/", (*shards_)[i].name, " sample ", index - first_[i]);
  }

  std::string Location() const override { return release_->dir(); }
  std::string TokenizerId() const override { return tokenizer_id_; }

  absl::StatusOr<const shard::ShardReader*> Reader(size_t i) const {
    const shard::ShardReader* r = readers_[i].load(std::memory_order_acquire);
    if (r) return r;
    ASSIGN_OR_RETURN(r, release_->OpenShard(split_, i));
    readers_[i].store(r, std::memory_order_release);
    return r;
  }

 private:
  size_t ShardOf(uint64_t index) const {
    auto it = std::upper_bound(first_.begin(), first_.end(), index);
    return static_cast<size_t>(it - first_.begin()) - 1;
  }

  std::unique_ptr<shard::Release> release_;  // thread-safe OpenShard
  std::string split_;
  const std::vector<shard::ShardInfo>* shards_;
  std::vector<uint64_t> first_;
  mutable std::vector<std::atomic<const shard::ShardReader*>> readers_;
  uint64_t num_samples_ = 0;
  uint32_t sample_tokens_ = 0;
  TokenDtype dtype_ = TokenDtype::kUint16;
  std::string release_id_;
  std::string tokenizer_id_;
};

}  // namespace

absl::StatusOr<OpenedSplit> OpenReleaseSplit(Env* env, const std::string& dir,
                                             const std::string& split, bool verify_checksums) {
  shard::ReleaseOpenOptions ro;
  ro.verify_checksums = verify_checksums;
  ASSIGN_OR_RETURN(std::unique_ptr<shard::Release> release, shard::Release::Open(env, dir, ro));
  const shard::SplitInfo* info = release->manifest().split(split);
  if (info == nullptr || info->samples == 0 || info->shards.empty()) {
    return absl::NotFoundError(
        absl::StrCat(dir, ": release has no samples in split \"", split, "\""));
  }
  for (const shard::ShardInfo& s : info->shards) {
    for (const shard::FileInfo* f : {&s.bin, &s.idx, &s.seg}) {
      const std::string path = JoinPath(dir, f->path);
      if (!env->FileExists(path)) {
        return absl::NotFoundError(absl::StrCat(path, ": shard file is missing"));
      }
      ASSIGN_OR_RETURN(uint64_t size, env->GetFileSize(path));
      if (size != f->bytes) {
        return absl::DataLossError(absl::StrCat(path, ": ", size, " bytes, but the manifest says ",
                                                f->bytes, " (truncated or replaced shard)"));
      }
    }
  }
  OpenedSplit out;
  out.release_seed = release->manifest().seed;
  auto source = std::make_shared<ReleaseSplitSource>(std::move(release), split);
  if (verify_checksums) {
    for (size_t i = 0; i < info->shards.size(); ++i) RETURN_IF_ERROR(source->Reader(i).status());
  }
  out.source = std::move(source);
  return out;
}

}  // namespace grist::loader
