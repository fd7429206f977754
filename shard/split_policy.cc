#include "shard/split_policy.h"

#include "absl/strings/str_cat.h"
#include "common/config.h"
#include "common/hash.h"
#include "common/status_macros.h"

namespace grist::shard {

const OptionTable<SplitPolicy>& SplitPolicy::Table() {
  static const OptionTable<SplitPolicy>* table = [] {
    auto* t = new OptionTable<SplitPolicy>("split.");
    // The bounds are inclusive; FromConfig refuses 1 (nothing would be left to train on).
    t->Double("split.validation_fraction", GRIST_OPTION_FIELD(validation_fraction),
              "Expected fraction of documents in the validation split, chosen by a hash of each "
              "document's tokens and the seed; below 1",
              {0, 1});
    return t;
  }();
  return *table;
}

absl::StatusOr<SplitPolicy> SplitPolicy::FromConfig(const Config& config, uint64_t seed) {
  SplitPolicy p;
  p.seed = seed;
  RETURN_IF_ERROR(Table().Read(config, &p));
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
