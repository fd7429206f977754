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
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "common/crash_point.h"
#include "common/env.h"
#include "common/records.h"
#include "common/stage.h"
#include "common/status_macros.h"
#include "release/internal/build_config.h"
#include "release/internal/publish.h"
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
  // Whether it reads the config's tokenizer.model when one is given (the tokenizer stage copies
  // it): its bytes are then part of what the stage read (Build::Upstream).
  bool reads_given_model = false;
  // The stage in one process (the unstaged build): run -> record, its outputs written through the
  // Env given (a DeferredSyncEnv over Build::env: they are made durable by the stage's completion,
  // Build::StartCompletion, while the next stage runs).
  std::function<absl::StatusOr<StageRecord>(Build&, Env*)> run;
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
  std::vector<InputFile> input_files;  // listed once, with their sizes
  std::vector<std::optional<FileStat>> input_stats;  // and their stats then (StatInputs)
  uint64_t input_bytes = 0;
  std::vector<std::string> docs;  // what the next stage reads
  std::map<std::string, StageRecord> records;  // the completed stages, by name
  std::unique_ptr<tokenize::Tokenizer> tokenizer;
  // The checksums remembered in the work folder (SumsPath(); release/internal/file_sums.h), loaded
  // once the work folder is known to be this config's: the inputs and the stages' outputs are
  // read again only where their stat changed. Saved by each step before it returns.
  std::unique_ptr<FileSums> sums;

  std::string Dir(const std::string& sub) const { return JoinPath(work, sub); }
  std::string SumsPath() const { return Dir("sums.json"); }
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
  // The config's tokenizer.model, loaded and checked by BuildRelease (null without one): loaded
  // on `model_loader` while the first stage runs (Tokenizer::FromBytes takes tens of ms for a 32k
  // model, which at 16 threads was the build's serial start), and moved here by JoinGivenModel,
  // which every stage but clean calls before it runs, and every stage after its run, before it is
  // recorded: a model that does not load fails the build then, with nothing recorded after it.
  std::unique_ptr<tokenize::Tokenizer> given_model;
  std::optional<absl::StatusOr<std::unique_ptr<tokenize::Tokenizer>>> loading_model;
  absl::Status given_model_status;  // the load's error, once joined
  std::jthread model_loader;        // writes loading_model: declared after it
  absl::Status JoinGivenModel() {
    if (model_loader.joinable()) model_loader.join();
    if (loading_model) {
      if (loading_model->ok()) {
        given_model = std::move(**loading_model);
      } else {
        given_model_status = loading_model->status();
      }
      loading_model.reset();
    }
    return given_model_status;
  }
  // That model file as read then (path, size, XXH3-128), for Upstream; none without one.
  std::optional<shard::FileInfo> given_model_file;
  // The config's inputs with their sizes and XXH3-128 (HashInputs): what the manifest lists and
  // every record's upstream checksum names. Hashed once per build: beside the first stage of an
  // unstaged build of more than one thread (StartInputHashing), else when first needed, on the
  // build's threads.
  void StartInputHashing();
  absl::StatusOr<const std::vector<shard::FileInfo>*> InputSums();
  // What stage `s` reads, as a checksum (hex): the XXH3-128 of a JSON text that names every input
  // (path, bytes, XXH3-128), the given tokenizer model likewise where `s` reads it, and, for each
  // stage before `s` in the table that completed, its name and its outputs' paths, sizes and
  // checksums, its reports aside (*.json, which hold times). A stage's record is trusted only
  // while this is what it recorded (docs/formats/build.md), so a changed input, or an earlier
  // stage's outputs that came out different when it ran again, runs the stage again; an earlier
  // stage run again to the same bytes leaves the later ones be.
  absl::StatusOr<std::string> Upstream(const StageDef& s);
  // What the pack step reads, as a checksum (hex): the XXH3-128 of a JSON text holding the grist
  // version, the tokenize stage's upstream checksum (which covers the inputs and every earlier
  // stage's outputs) and its outputs (docs/formats/build.md). Needs the tokenize stage's record.
  absl::StatusOr<std::string> PackUpstream() const;
  std::optional<absl::StatusOr<std::vector<shard::FileInfo>>> input_sums;
  std::jthread input_hasher;  // joined before what it reads and writes goes
  // Called once a stage's outputs are written (and synced, or written through `written`, which
  // syncs them first): checks that no input changed while the build ran, hashes the outputs into
  // the record with what the stage read (Upstream), then writes the record (atomically), with the
  // crash points of release/crash_points.h between.
  absl::Status Complete(const StageDef& s, StageRecord& r, DeferredSyncEnv* written = nullptr) {
    const std::string point = absl::StrCat("build.", s.name, ".");
    if (written != nullptr) RETURN_IF_ERROR(written->SyncAll(opts.run.threads));
    RETURN_IF_ERROR(crash::Point(point + "after_outputs"));
    if (Reads(s) == bc.inputs) RETURN_IF_ERROR(CheckInputSizes(env, input_files, &input_stats));
    ASSIGN_OR_RETURN(r.upstream, Upstream(s));
    ASSIGN_OR_RETURN(std::vector<StageOutput> outputs,
                     StageOutputs(env, work, s.output_root, opts.run.threads, sums.get()));
    r.outputs = std::move(outputs);
    RETURN_IF_ERROR(crash::Point(point + "before_record"));
    RETURN_IF_ERROR(WriteFileAtomic(env, RecordPath(s.name), RecordJson(bc.hash, r)));
    return crash::Point(point + "after_record");
  }
  // A stage of the unstaged build that ran is completed (Complete, its outputs synced through
  // `outputs`, which they were written through) on a thread of its own while the next stages run:
  // its fsyncs and its outputs' checksums were the serial tail of each stage at 16 threads.
  // Completions run one after another in stage order (each thread waits for the one before, and
  // does nothing after one that failed), so a record is written only once its outputs are durable
  // and after the records of the stages before it; each adds its record to `records` when
  // written. Anything else that reads `records` or checks a record (Upstream) calls
  // JoinCompletion first.
  void StartCompletion(const StageDef& s, StageRecord r, std::unique_ptr<DeferredSyncEnv> outputs);
  // Waits for every stage completing; the first error among them, if any (then every later call
  // returns it too: nothing after that stage is recorded).
  absl::Status JoinCompletion();
  struct Completion {
    const StageDef* stage = nullptr;
    StageRecord record;
    std::unique_ptr<DeferredSyncEnv> outputs;
    absl::Status status;        // written before `done`
    absl::Notification done;
    std::jthread thread;
  };
  absl::Status completion_error;
  // Removes the work folder a build discarded (--restart, another config: DiscardWork in
  // release/build.cc) beside the build; joined when the build returns.
  std::jthread discarding;
  // Declared last: joined (destroyed) before anything of the Build they use, the later first
  // (each may wait for the one before).
  std::vector<std::unique_ptr<Completion>> completing;
  ~Build() {
    while (!completing.empty()) completing.pop_back();
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
