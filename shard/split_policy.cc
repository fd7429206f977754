#include "shard/split_policy.h"

#include "absl/strings/str_cat.h"
#include "common/config.h"
#include "common/hash.h"
#include "common/status_macros.h"

namespace grist::shard {

absl::StatusOr<SplitPolicy> SplitPolicy::FromConfig(const Config& config, uint64_t seed) {
  SplitPolicy p;
  p.seed = seed;
  ASSIGN_OR_RETURN(p.validation_fraction, config.GetDouble("split.validation_fraction", 0.01));
  if (!(p.validation_fraction >= 0 && p.validation_fraction < 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "config ", config.source(), ": key 'split.validation_fraction': must be in [0, 1)"));
  }
  return p;
}

int SplitPolicy::SplitOf(std::span<const int32_t> document_tokens) const {
  const uint64_t h = Hash64(document_tokens.data(), document_tokens.size() * sizeof(int32_t), seed);
  const double u = static_cast<double>(h >> 11) * 0x1.0p-53;
  return u < validation_fraction ? 1 : 0;
}

}  // namespace grist::shard
