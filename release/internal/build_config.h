// The release config as `grist build` and `grist pack` read it: every stage's options through the
// stage's own FromConfig, the config's canonical JSON and its hash (which names the work folder's
// records and goes into the manifest).
#ifndef GRIST_RELEASE_INTERNAL_BUILD_CONFIG_H_
#define GRIST_RELEASE_INTERNAL_BUILD_CONFIG_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "clean/cleaner.h"
#include "common/config.h"
#include "common/env.h"
#include "common/hash.h"
#include "dedup/dedup.h"
#include "pack/pack.h"
#include "shard/split_policy.h"
#include "tokenize/encode.h"
#include "tokenize/tokenizer.h"

namespace grist::release::internal {

struct BuildConfig {
  Config config;
  std::string release_version;
  uint64_t seed = 0;
  std::vector<std::string> inputs;
  bool clean_enabled = true;
  clean::CleanOptions clean;
  bool dedup_enabled = true;
  dedup::DedupOptions dedup;
  std::string tokenizer_model;  // pretrained model path; empty = train
  tokenize::TrainOptions train;
  tokenize::EncodeStageOptions encode;
  pack::PackOptions pack;
  shard::SplitPolicy split;
  uint64_t shard_max_bytes = 256ull << 20;
  std::string canonical_json;
  Hash128 hash;
};

// Reads the config at `path`, `overrides` applied to it before any stage reads it. A key no stage
// reads is InvalidArgument naming it (misspelled, or not used with these settings).
absl::StatusOr<BuildConfig> ReadBuildConfig(
    Env* env, const std::string& path, const std::function<void(Config*)>& overrides = nullptr);

}  // namespace grist::release::internal

#endif  // GRIST_RELEASE_INTERNAL_BUILD_CONFIG_H_
