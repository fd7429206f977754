// The stages of `grist build` as a table (Stages()): each stage's name, where its outputs go,
// whether the config enables it, what it reads, and how it runs, in one process or as `--stage`
// steps (job arrays and their merges). BuildRelease (release/build.cc) walks the table; the
// pack+shard stage that ends every build is release/internal/publish.h's.
#ifndef GRIST_RELEASE_INTERNAL_STAGES_H_
#define GRIST_RELEASE_INTERNAL_STAGES_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "common/crash_point.h"
#include "common/env.h"
#include "common/records.h"
#include "common/stage.h"
#include "common/status_macros.h"
#include "release/internal/build_config.h"
#include "release/internal/stage_record.h"
#include "release/release.h"
#include "tokenize/encode.h"
#include "tokenize/tokenizer.h"

namespace grist::release::internal {

struct Build;

// One `grist build --stage NAME` step of a stage.
struct Step {
  std::string name;
  bool parallel = false;  // runs as task I of N (--task/--tasks), concurrently with the others
  // Completes the stage (writes its record) when it succeeds; the last step of every stage does.
  bool completes = false;
  std::function<absl::StatusOr<StageRecord>(Build&, const RunOptions&)> run;
};

// A stage of the build, one entry of the table (Stages()). Adding a stage is adding one.
struct StageDef {
  std::string name;         // its record: WORK/stages/<name>.json; its crash points build.<name>.*
  std::string output_root;  // where it leaves its outputs, relative to the work folder
  std::function<bool(const BuildConfig&)> enabled;
  // What it reads: the inputs of the config (clean), else the documents the stages before kept.
  enum class Inputs { kConfigInputs, kDocuments } inputs = Inputs::kDocuments;
  // Whether its kept documents (the *.jsonl.zst at the top of its output root) are what the next
  // stages read; otherwise they read what this one read.
  bool keeps_documents = false;
  // Whether its report_json goes into the release manifest's counts (and its documents into the
  // "nothing lost" balance): {"enabled": false} there when disabled.
  bool counted = false;
  // Whether `--stage tokenizer` may run it in its own process when it has not completed (the
  // stages before the tokenizer, as before they ran as arrays of their own).
  bool runs_before_tokenizer = false;
  // The stage in one process (the unstaged build): run -> record.
  std::function<absl::StatusOr<StageRecord>(Build&)> run;
  // The stage as `--stage` steps, in order (job arrays and their merges).
  std::vector<Step> steps;

  // "clean (every task) and clean-merge": what to run for this stage, for messages.
  std::string HowToRun() const {
    std::string out;
    for (size_t i = 0; i < steps.size(); ++i) {
      if (i) out += i + 1 == steps.size() ? " and " : ", ";
      out += steps[i].name + (steps[i].parallel ? " (every task)" : "");
    }
    return out;
  }
};

// Shared by every stage of one BuildRelease call.
struct Build {
  Env* env;
  const BuildOptions& opts;
  const BuildConfig& bc;
  std::string work;
  std::vector<InputFile> input_files;  // listed once (sizes only: hashed when pack needs them)
  uint64_t input_bytes = 0;
  std::vector<std::string> docs;  // what the next stage reads
  std::map<std::string, StageRecord> records;  // the completed stages, by name
  std::unique_ptr<tokenize::Tokenizer> tokenizer;

  std::string Dir(const std::string& sub) const { return JoinPath(work, sub); }
  std::string StagesDir() const { return Dir("stages"); }
  std::string RecordPath(const std::string& stage) const {
    return JoinPath(StagesDir(), stage + ".json");
  }
  std::string ModelPath() const { return Dir("tokenizer.model"); }
  std::string TokensDir() const { return Dir("tokens"); }
  const std::vector<std::string>& Reads(const StageDef& s) const {
    return s.inputs == StageDef::Inputs::kConfigInputs ? bc.inputs : docs;
  }
  // The release's tokenizer (ModelPath()), loaded once: the given model (tokenizer.model), which
  // BuildRelease loads to check it before any stage runs, serves as long as the work folder's copy
  // has its bytes (a 32k model takes tens of milliseconds to load and to free, each time on the
  // build's one serial path).
  absl::StatusOr<tokenize::Tokenizer*> Tokenizer() {
    if (tokenizer) return tokenizer.get();
    if (given_model) {
      ASSIGN_OR_RETURN(std::string bytes, ReadFileToString(env, ModelPath()));
      if (bytes == given_model->model_bytes()) {
        tokenizer = std::move(given_model);
        return tokenizer.get();
      }
    }
    ASSIGN_OR_RETURN(tokenizer, tokenize::Tokenizer::Load(env, ModelPath()));
    return tokenizer.get();
  }
  // The config's tokenizer.model, loaded and checked by BuildRelease (null without one).
  std::unique_ptr<tokenize::Tokenizer> given_model;
  // Called once a stage's outputs are written and synced: hashes them into the record, then
  // writes the record (atomically), with the crash points of release/crash_points.h between.
  absl::Status Complete(const StageDef& s, StageRecord& r) {
    const std::string point = absl::StrCat("build.", s.name, ".");
    RETURN_IF_ERROR(crash::Point(point + "after_outputs"));
    ASSIGN_OR_RETURN(std::vector<StageOutput> outputs,
                     StageOutputs(env, work, s.output_root, opts.run.threads));
    r.outputs_json = StageOutputsJson(outputs);
    RETURN_IF_ERROR(crash::Point(point + "before_record"));
    RETURN_IF_ERROR(WriteFileAtomic(env, RecordPath(s.name), RecordJson(bc.hash, r)));
    return crash::Point(point + "after_record");
  }
};

// The table, in build order: clean, dedup, tokenizer, tokenize.
const std::vector<StageDef>& Stages();
// The step after the table's: pack+shard, which publishes the release.
inline constexpr const char* kPackStep = "pack";

// The document parts a stage left at the top level of `dir` (*.jsonl.zst), in name order.
absl::StatusOr<std::vector<std::string>> KeptParts(Env* env, const std::string& dir);
// Sums the per-task encode reports (tokens-TTTTT-of-NNNNN.json beside each part) into the report
// one task over all inputs would have written: counts add up, the longest document is the maximum.
absl::StatusOr<tokenize::EncodeReport> MergeEncodeReports(Env* env,
                                                          const std::vector<std::string>& parts);
// The tokenize stage's record from its (whole or merged) encode report.
StageRecord EncodeRecord(const tokenize::EncodeReport& er);

}  // namespace grist::release::internal

#endif  // GRIST_RELEASE_INTERNAL_STAGES_H_
