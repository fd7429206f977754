// A stage's completion record, WORK/stages/<stage>.json (release/release.h): the stage's summary
// and report, a checksum of what it was built from (the config's inputs and the outputs of the
// stages before it), and every output file it left with its size and checksum, so that a rerun
// resumes after a stage only when it would read the same bytes again and its outputs are exactly
// as recorded (docs/formats/build.md).
#ifndef GRIST_RELEASE_INTERNAL_STAGE_RECORD_H_
#define GRIST_RELEASE_INTERNAL_STAGE_RECORD_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/env.h"
#include "common/hash.h"
#include "release/internal/file_sums.h"
#include "release/release.h"

namespace grist::release::internal {

// A stage output's checksum is the XXH3-128 of the XXH3-128 digests (16 bytes each, canonical
// big-endian order) of its pieces of kChecksumPieceBytes, in file order (the last one shorter; an
// empty file has none): not the file's own XXH3-128, so that the pieces of one large file are
// hashed on many threads at once. Lowercase hex under kChecksumKey in the record.
inline constexpr uint64_t kChecksumPieceBytes = 4ull << 20;
inline constexpr const char* kChecksumKey = "xxh3_128_of_4mib_pieces";

// One file a stage left under its output root (WORK/<root>, the table's StageDef::output_root).
struct StageOutput {
  std::string path;  // relative to the work folder
  uint64_t bytes = 0;
  std::string xxh3_128_pieces;  // the checksum above, hex
  bool operator==(const StageOutput&) const = default;
};

struct StageRecord {
  StageSummary summary;
  std::string report_json = "{}";
  std::vector<StageOutput> outputs;  // StageOutputs() of the completed stage
  // What the stage read: Build::Upstream (release/internal/stages.h), hex.
  std::string upstream;
};

// Every file a stage left under WORK/<output_root>, in path order, with its size and checksum:
// recorded with the stage, checked on resume. The pieces of all the files are hashed on up to
// `threads` threads (0: every CPU); the result does not depend on it. With `sums`, a file whose
// checksum it remembers for the file's stat now is not read, and those read are remembered
// (release/internal/file_sums.h).
absl::StatusOr<std::vector<StageOutput>> StageOutputs(Env* env, const std::string& work,
                                                      const std::string& output_root,
                                                      int threads = 1, FileSums* sums = nullptr);
// The pack step's record, WORK/stages/pack.json (docs/formats/build.md), written once a release is
// published: the config hash, what pack read (Build::PackUpstream: the tokenize stage's record and
// outputs, and the grist version) and the release id it published. Its JSON:
std::string PackRecordJson(const Hash128& config_hash, const std::string& upstream,
                           const std::string& release_id);
// The release id a pack record names when it holds for this config and `upstream`; nullopt when it
// is missing, damaged or another's.
std::optional<std::string> PackRecordRelease(Env* env, const std::string& path,
                                             const Hash128& config_hash,
                                             const std::string& upstream);
// The record's JSON (written atomically by Build::Complete).
std::string RecordJson(const Hash128& config_hash, const StageRecord& r);
// The config hash a record names; nullopt when the record is missing or unreadable (a torn or
// damaged record is not another config's: only its stage runs again).
std::optional<std::string> RecordConfig(Env* env, const std::string& path);
// The stage's record when it completed under this config, from `upstream` (what it would be built
// from now: Build::Upstream), and its outputs (under `work`) are exactly as recorded; nullopt
// otherwise (missing, torn or damaged record, another config, other inputs or other outputs of
// the stages before it, a record of an earlier grist without the upstream checksum, an output
// missing, added, truncated or changed: the stage runs again, with a note on stderr when the
// record was there, or with `stale` given, that note's reason in *stale for the caller to say).
// The outputs are hashed on up to `threads` threads, as StageOutputs, through `sums` if given.
std::optional<StageRecord> LoadRecord(Env* env, const std::string& path, const Hash128& hash,
                                      const std::string& upstream, const std::string& output_root,
                                      int threads, std::string* stale = nullptr,
                                      FileSums* sums = nullptr);

}  // namespace grist::release::internal

#endif  // GRIST_RELEASE_INTERNAL_STAGE_RECORD_H_
