// The pack+shard stage, whose output is the release itself: packs a complete tokenize output into
// a staging folder, writes the tokenizer, reports/ and manifest.json last, and moves the release
// to the output folder whole (release/release.h: an interrupted build never leaves something that
// looks published). Shared by `grist build` and `grist pack`.
#ifndef GRIST_RELEASE_INTERNAL_PUBLISH_H_
#define GRIST_RELEASE_INTERNAL_PUBLISH_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/env.h"
#include "common/records.h"
#include "common/stage.h"
#include "common/sysinfo.h"
#include "release/internal/build_config.h"
#include "release/internal/file_sums.h"
#include "release/internal/stage_record.h"
#include "release/release.h"
#include "shard/manifest.h"
#include "tokenize/tokenizer.h"

namespace grist::release::internal {

// What the pack+shard stage publishes from: the build's records and the tokens they describe.
struct PublishOptions {
  const BuildConfig* config = nullptr;
  std::string config_path;  // for reports/build.json
  std::string output_dir;
  // Where the release is written before it is moved to output_dir (same file system; removed and
  // rewritten by every pack).
  std::string staging_dir;
  RunOptions run;
  tokenize::Tokenizer* tokenizer = nullptr;
  std::string tokens_dir;  // a complete tokenize output (every task's part)
  // The config's inputs, hashed (HashInputs) for the manifest while the tokens are packed, unless
  // given hashed already (a build hashes them for its stage records: Build::InputSums).
  std::vector<InputFile> inputs;
  std::optional<std::vector<shard::FileInfo>> hashed_inputs;
  // The completed stages by name (the table's); a stage absent here is recorded as disabled.
  std::map<std::string, StageRecord> records;
  const Stopwatch* total = nullptr;
};

// The config's input files with their sizes and XXH3-128, for the manifest, in the order of
// `files`, hashed on up to `threads` threads (0: every CPU). An input whose size is no longer the
// one listed is an error (CheckInputSizes), as is one that is gone (NotFound naming it). With
// `sums`, a file whose checksum it remembers for the file's stat now is not read, and those read
// are remembered (release/internal/file_sums.h); datasets are always read.
absl::StatusOr<std::vector<shard::FileInfo>> HashInputs(Env* env,
                                                        const std::vector<InputFile>& files,
                                                        int threads = 1,
                                                        FileSums* sums = nullptr);
// FailedPrecondition naming the first of `files` (datasets aside) whose size is not the one
// listed any more, or NotFound for one that is gone: an input changed while the build read it.
// With `listed` (StatInputs when the files were listed), also one of the same size whose stat is
// another now (written in place, or replaced, since).
absl::Status CheckInputSizes(Env* env, const std::vector<InputFile>& files,
                             const std::vector<std::optional<FileStat>>* listed = nullptr);
// The stat of each of `files` now (none for a dataset, or where the Env has no stat).
std::vector<std::optional<FileStat>> StatInputs(Env* env, const std::vector<InputFile>& files);

// The pack+shard stage: packs the tokenized parts into the staging folder, then publishes it at
// the release folder (reports/, then manifest.json last, then the move: Publish).
absl::StatusOr<BuildReport> PackAndPublish(Env* env, const PublishOptions& o);

// When the release at o.output_dir is `release_id` (the one the pack record names) and every file
// its manifest lists has the listed size and XXH3-128 (through `sums`: read only where its stat
// changed), the report of a build that finds it up to date (every stage resumed, pack+shard
// "up to date"), with any staging folder left by an interrupted publish removed; nullopt when
// pack must run (a note on stderr says why when a release is there).
absl::StatusOr<std::optional<BuildReport>> ReleaseUpToDate(Env* env, const PublishOptions& o,
                                                           const std::string& release_id,
                                                           FileSums* sums);

}  // namespace grist::release::internal

#endif  // GRIST_RELEASE_INTERNAL_PUBLISH_H_
