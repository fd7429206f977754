// Which split (train or validation) a document of a release goes to: the policy `grist build` and
// `grist pack` apply to every tokenized document, in one place.
//
// A document goes to validation when u < validation_fraction, where u in [0, 1) is the top 53
// bits of XXH3-64 (seeded by the release seed) of its token ids (int32, little-endian, as packed),
// so the assignment depends only on the document's tokens and the seed: not on its position, the
// thread or task count, nor on which other documents are in the release (docs/formats/release.md).
#ifndef GRIST_SHARD_SPLIT_POLICY_H_
#define GRIST_SHARD_SPLIT_POLICY_H_

#include <cstdint>
#include <span>

#include "absl/status/statusor.h"
#include "common/option_table.h"

namespace grist {
class Config;
}

namespace grist::shard {

struct SplitPolicy {
  double validation_fraction = 0.01;  // config key split.validation_fraction, in [0, 1)
  uint64_t seed = 0;                  // the release seed (config key seed)

  // The options of section [split], declared once (shard/split_policy.cc): FromConfig, the flags
  // of `grist pack` and their help come from it. The seed is the release's, not in the table.
  static const OptionTable<SplitPolicy>& Table();
  // Reads split.validation_fraction (default 0.01) and checks it is in [0, 1).
  static absl::StatusOr<SplitPolicy> FromConfig(const Config& config, uint64_t seed);

  // 0 for the train split (kTrainSplit), 1 for validation (kValidationSplit).
  int SplitOf(std::span<const int32_t> document_tokens) const;
};

}  // namespace grist::shard

#endif  // GRIST_SHARD_SPLIT_POLICY_H_
