// The v1.0 release builder: `grist build` (clean -> dedup -> tokenize -> pack -> shard), and the
// release checks behind `grist verify` and `grist inspect`. This is the only library that depends
// on every stage; tools/ call it through this header.
//
// Build layout: the release goes to `output_dir`; stage outputs go to `output_dir` + ".work/":
//   <output>.work/stages/<stage>.json   completion record of a stage (written last, atomically,
//                                        after the stage's outputs are synced) with its counts,
//                                        a checksum of what it read and its outputs' checksums
//   <output>.work/tokenizer.model       trained (or copied) tokenizer
//   <output>.work/tokens/               tokenize encode output (MMIDIDX per task)
// A rerun with the same config skips every stage that has a completion record, as long as what
// it read (the inputs' checksums, the earlier stages' outputs) and its outputs are unchanged; a
// different config (its canonical JSON hash differs) discards the work folder first. The inputs
// are hashed once per build; one that changes size or goes while the build reads it fails the
// build, naming it (docs/formats/build.md). The release itself is written
// to <output>.work/release/ with manifest.json last, then moved to output_dir whole (an earlier
// release there is swapped out atomically where the file system allows: docs/release.md), so an
// interrupted build never leaves something that looks published, and never unpublishes the
// release it replaces before the new one is complete.
#ifndef GRIST_RELEASE_RELEASE_H_
#define GRIST_RELEASE_RELEASE_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/stage.h"

namespace grist {
class Config;
class Env;
}

namespace grist::release {

struct StageSummary {
  std::string name;
  uint64_t docs_in = 0, docs_out = 0, docs_rejected = 0, docs_removed = 0;
  uint64_t bytes_in = 0, tokens = 0, samples = 0;
  double seconds = 0;
  bool resumed = false;  // completed by an earlier run
  std::string note;
};

struct BuildReport {
  std::string output_dir;
  std::string release_id;
  std::vector<StageSummary> stages;
  double seconds = 0;
  uint64_t peak_rss_bytes = 0;
  // The summary table (Markdown) printed at the end of a build.
  std::string Table() const;
  std::string ToJson() const;
};

struct BuildOptions {
  std::string config_path;
  std::string output_dir;
  RunOptions run;
  // Discard the work folder and rebuild every stage.
  bool restart = false;
  // Run one step only, so a cluster can spread the build over jobs (scripts/slurm/): empty runs
  // every stage in order. The steps (BuildStages(), in order), each stage's job array and merge:
  //   clean             task run.task of run.tasks cleans its slice of the inputs into WORK/clean
  //   clean-merge       checks every task's report is there (FailedPrecondition naming a missing
  //                     task), sums them and records the clean stage complete
  //   dedup-signatures, dedup-buckets, dedup-clusters (tasks), dedup-merge (once),
  //   dedup-filter (tasks), dedup-report (once: records the dedup stage complete)
  //                     the stages of dedup (dedup/dedup.h) over what clean kept, in WORK/dedup;
  //                     each refuses an incomplete set of the step before it, naming the task
  //   tokenizer         trains (or copies) the tokenizer; runs clean and dedup first (one process
  //                     each) when they are enabled and have not completed
  //   tokenize          task run.task of run.tasks encodes its slice of the kept documents
  //   tokenize-merge    checks every task's part is there (naming a missing task), records it
  //   pack              packs and shards into the release
  // Only the task steps (StageTakesTasks) take run.task/run.tasks; a step of a stage the config
  // disables does nothing and succeeds. Each needs the stages before it complete
  // (FailedPrecondition naming the stage and the steps to run). The release is byte-identical to an
  // unstaged build of the same config, whatever the task counts. A work folder from another config
  // is an error here rather than discarded (tasks run concurrently).
  std::string stage;
};

// The step names BuildOptions::stage accepts, in order.
const std::vector<std::string>& BuildStages();
// Whether a step runs as one task of many (--task I --tasks N): clean, the parallel dedup stages
// and tokenize.
bool StageTakesTasks(const std::string& stage);

absl::StatusOr<BuildReport> BuildRelease(Env* env, const BuildOptions& options);

struct PackReleaseOptions {
  std::string config_path;  // reads [pack], [split], [shard], seed, release.version, inputs.paths
  // Applied to the config once read from config_path, before any stage reads it (`grist pack`'s
  // option flags: tools/option_flags.h); the manifest records the result.
  std::function<void(Config*)> config_overrides;
  std::string tokens_dir;   // a complete `grist tokenize encode` output (all N tasks)
  std::string model_path;   // the tokenizer the tokens were made with
  std::string output_dir;
  RunOptions run;
};

// The pack+shard stage alone (`grist pack`): packs the tasks' token parts, in task order, into a
// release. The parts of N tasks give the same release bytes as the parts of 1 task. The manifest's
// tokenize counts are the sum of the tasks' reports; clean and dedup are recorded as not run.
absl::StatusOr<BuildReport> PackRelease(Env* env, const PackReleaseOptions& options);

struct VerifyReport {
  uint64_t files_checked = 0;
  uint64_t bytes_checked = 0;
  std::vector<std::string> problems;  // one line per bad file: "<path>: <what>"
  bool ok() const { return problems.empty(); }
};

// Checks structure, sizes and every checksum of a release, the tokenizer (loads, vocabulary size
// as recorded) and that every token id is below the vocabulary size. Returns a report listing
// every bad file; an error Status only when the folder is not a release at all (no or unparsable
// manifest). The files are checked on up to `threads` threads (0: every CPU; a parallel file
// system serves several streams at once); the report is the same for any count.
absl::StatusOr<VerifyReport> VerifyRelease(Env* env, const std::string& dir, int threads = 0);

// The Megatron-LM arguments that train on the release's document files (`grist inspect
// --megatron`): --data-path/--split for the train split, the per-split paths, --seq-length and the
// tokenizer, with absolute paths. FailedPrecondition when the train split has no document file.
absl::StatusOr<std::string> MegatronArguments(Env* env, const std::string& dir);

struct InspectOptions {
  int64_t sample = -1;            // decode this sample (split-global index) when >= 0
  std::string split = "train";
  int top_tokens = 10;
};

// The manifest summary, the segment-length histogram, the most frequent tokens, and optionally
// sample k decoded with the release's tokenizer, as text.
absl::StatusOr<std::string> InspectRelease(Env* env, const std::string& dir,
                                           const InspectOptions& options);

}  // namespace grist::release

#endif  // GRIST_RELEASE_RELEASE_H_
