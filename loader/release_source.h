// The loader's view of a published release (shard::Release): one split as a SampleSource.
#ifndef GRIST_LOADER_RELEASE_SOURCE_H_
#define GRIST_LOADER_RELEASE_SOURCE_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "loader/source.h"

namespace grist {
class Env;
}

namespace grist::loader {

struct OpenedSplit {
  std::shared_ptr<const SampleSource> source;
  uint64_t release_seed = 0;  // the manifest's seed: the loader's default
};

// Opens `dir`'s manifest (validated by shard::ParseManifest) and `split`. Start-up cost does not
// depend on the data's size: each shard file is only stat-ed here (a missing file is NotFound, a
// size other than the manifest's is DataLoss, both naming the file), and a shard is mapped and
// validated (shard::ShardReader::Open) on its first use by a worker. With `verify_checksums` every
// shard is opened and hashed here instead. NotFound for an unknown or empty split.
absl::StatusOr<OpenedSplit> OpenReleaseSplit(Env* env, const std::string& dir,
                                             const std::string& split, bool verify_checksums);

}  // namespace grist::loader

#endif  // GRIST_LOADER_RELEASE_SOURCE_H_
