#include "release/internal/build_config.h"

#include <string_view>

#include "absl/strings/str_cat.h"
#include "clean/run_clean.h"
#include "common/input_plan.h"
#include "common/status_macros.h"
#include "shard/split_writer.h"

namespace grist::release::internal {
namespace {

absl::Status KeyError(const Config& c, std::string_view key, std::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat("config ", c.source(), ": key '", std::string(key), "': ", std::string(what)));
}

}  // namespace

absl::StatusOr<BuildConfig> ReadBuildConfig(
    Env* env, const std::string& path, const std::function<void(Config*)>& overrides) {
  BuildConfig b;
  ASSIGN_OR_RETURN(b.config, Config::FromFile(env, path));
  if (overrides) overrides(&b.config);
  const Config& c = b.config;
  ASSIGN_OR_RETURN(b.release_version, c.RequireString("release.version"));
  ASSIGN_OR_RETURN(int64_t seed, c.RequireInt("seed"));
  if (seed < 0) return KeyError(c, "seed", "must be >= 0");
  b.seed = static_cast<uint64_t>(seed);
  ASSIGN_OR_RETURN(b.inputs, ConfigInputs(c));  // inputs.paths, then inputs.hf_datasets
  ASSIGN_OR_RETURN(b.clean_enabled, c.GetBool("clean.enabled", true));
  if (b.clean_enabled) {
    ASSIGN_OR_RETURN(b.clean, clean::CleanOptions::FromConfig(c));
  }
  ASSIGN_OR_RETURN(b.dedup_enabled, c.GetBool("dedup.enabled", true));
  if (c.Has("dedup.mode")) {  // the switch of earlier configs: "none" turns dedup off
    ASSIGN_OR_RETURN(std::string mode, c.GetString("dedup.mode", ""));
    if (mode != "none") return KeyError(c, "dedup.mode", "only \"none\" (use dedup.enabled)");
    b.dedup_enabled = false;
  }
  if (b.dedup_enabled) {
    ASSIGN_OR_RETURN(b.dedup, dedup::DedupOptions::FromConfig(c));
    RETURN_IF_ERROR(b.dedup.Validate());
  }
  ASSIGN_OR_RETURN(b.tokenizer_model, c.GetString("tokenizer.model", ""));
  if (b.tokenizer_model.empty()) {
    ASSIGN_OR_RETURN(b.train, tokenize::TrainOptions::FromConfig(c));
  }
  ASSIGN_OR_RETURN(b.encode, tokenize::EncodeStageOptions::FromConfig(c));
  ASSIGN_OR_RETURN(b.pack, pack::PackOptions::FromConfig(c));
  ASSIGN_OR_RETURN(b.split, shard::SplitPolicy::FromConfig(c, b.seed));
  ASSIGN_OR_RETURN(shard::ShardOptions shard_options, shard::ShardOptions::FromConfig(c));
  b.shard_max_bytes = shard_options.max_bytes;
  std::vector<std::string> unused = c.UnusedKeys();
  if (!unused.empty()) {
    return KeyError(c, unused.front(),
                    "unknown key (misspelled, or not used with these settings)");
  }
  b.canonical_json = c.ResolvedJson(0);
  b.hash = Hash128Of(b.canonical_json);
  return b;
}

}  // namespace grist::release::internal
