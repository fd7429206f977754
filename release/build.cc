#include <fcntl.h>
#include <simdjson.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <functional>
#include <map>
#include <memory>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "clean/run_clean.h"
#include "common/config.h"
#include "common/crash_point.h"
#include "common/env.h"
#include "common/hash.h"
#include "common/json_writer.h"
#include "common/progress.h"
#include "common/records.h"
#include "common/status_macros.h"
#include "common/sysinfo.h"
#include "common/task_parts.h"
#include "common/version.h"
#include "dedup/dedup.h"
#include "pack/pack.h"
#include "release/release.h"
#include "shard/indexed_dataset.h"
#include "shard/manifest.h"
#include "shard/shard_format.h"
#include "shard/split_policy.h"
#include "shard/split_writer.h"
#include "tokenize/encode.h"
#include "tokenize/indexed_dataset.h"
#include "tokenize/tokenizer.h"

namespace grist::release {
namespace {

struct BuildConfig {
  Config config;
  std::string release_version;
  uint64_t seed = 0;
  std::vector<std::string> inputs;
  bool clean_enabled = true;
  clean::CleanOptions clean;
  bool dedup_enabled = true;
  dedup::DedupOptions dedup;
  std::string tokenizer_model;  // pretrained model path; empty = train
  tokenize::TrainOptions train;
  tokenize::EncodeStageOptions encode;
  pack::PackOptions pack;
  shard::SplitPolicy split;
  uint64_t shard_max_bytes = 256ull << 20;
  std::string canonical_json;
  Hash128 hash;
};

absl::Status KeyError(const Config& c, std::string_view key, std::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat("config ", c.source(), ": key '", std::string(key), "': ", std::string(what)));
}

absl::StatusOr<BuildConfig> ReadBuildConfig(
    Env* env, const std::string& path, const std::function<void(Config*)>& overrides = nullptr) {
  BuildConfig b;
  ASSIGN_OR_RETURN(b.config, Config::FromFile(env, path));
  if (overrides) overrides(&b.config);
  const Config& c = b.config;
  ASSIGN_OR_RETURN(b.release_version, c.RequireString("release.version"));
  ASSIGN_OR_RETURN(int64_t seed, c.RequireInt("seed"));
  if (seed < 0) return KeyError(c, "seed", "must be >= 0");
  b.seed = static_cast<uint64_t>(seed);
  ASSIGN_OR_RETURN(b.inputs, c.RequireStringList("inputs.paths"));
  if (b.inputs.empty()) return KeyError(c, "inputs.paths", "must name at least one input");
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

// ---- Stage completion records ----

struct StageRecord {
  StageSummary summary;
  std::string report_json = "{}";
  std::string outputs_json = "[]";  // StageOutputs() of the completed stage
};

void ListFilesUnder(Env* env, const std::string& base, const std::string& rel,
                    std::vector<std::string>* out) {
  const std::string path = rel.empty() ? base : JoinPath(base, rel);
  if (!env->IsDirectory(path)) {
    if (env->FileExists(path)) out->push_back(rel);
    return;
  }
  auto names = env->ListDir(path);
  if (!names.ok()) return;
  for (const std::string& n : *names) ListFilesUnder(env, base, rel.empty() ? n : JoinPath(rel, n), out);
}

// One file a stage left under its output root (WORK/<root>, the table's StageDef::output_root).
struct StageOutput {
  std::string path;  // relative to the work folder
  uint64_t bytes = 0;
  std::string xxh3_128;
  bool operator==(const StageOutput&) const = default;
};

// Every file a stage left under WORK/<output_root>, in path order, with its size and XXH3-128:
// recorded with the stage, checked on resume.
absl::StatusOr<std::vector<StageOutput>> StageOutputs(Env* env, const std::string& work,
                                                      const std::string& output_root) {
  const std::string root = JoinPath(work, output_root);
  std::vector<std::string> rels;
  ListFilesUnder(env, root, "", &rels);
  std::sort(rels.begin(), rels.end());
  std::vector<StageOutput> out;
  for (const std::string& rel : rels) {
    const std::string path = rel.empty() ? root : JoinPath(root, rel);
    StageOutput o;
    o.path = rel.empty() ? output_root : JoinPath(output_root, rel);
    ASSIGN_OR_RETURN(o.bytes, env->GetFileSize(path));
    ASSIGN_OR_RETURN(Hash128 h, HashFile128(env, path));
    o.xxh3_128 = h.ToHex();
    out.push_back(std::move(o));
  }
  return out;
}

std::string StageOutputsJson(const std::vector<StageOutput>& outputs) {
  JsonWriter w(0);
  w.BeginArray();
  for (const StageOutput& o : outputs) {
    w.BeginObject().Field("path", o.path).Field("bytes", o.bytes).Field("xxh3_128", o.xxh3_128);
    w.EndObject();
  }
  w.EndArray();
  return w.Take();
}

// Why `now` differs from `recorded` (the first difference), empty when they are equal.
std::string OutputsDiffer(const std::vector<StageOutput>& recorded, const std::vector<StageOutput>& now) {
  std::map<std::string, const StageOutput*> have;
  for (const StageOutput& o : now) have[o.path] = &o;
  for (const StageOutput& o : recorded) {
    auto it = have.find(o.path);
    if (it == have.end()) return absl::StrCat(o.path, " is missing");
    if (it->second->bytes != o.bytes) {
      return absl::StrCat(o.path, " has ", it->second->bytes, " bytes, the record says ", o.bytes);
    }
    if (it->second->xxh3_128 != o.xxh3_128) return absl::StrCat(o.path, " does not match its checksum");
    have.erase(it);
  }
  if (!have.empty()) return absl::StrCat(have.begin()->first, " is not in the record");
  return "";
}

std::string RecordJson(const Hash128& config_hash, const StageRecord& r) {
  JsonWriter w(2);
  const StageSummary& s = r.summary;
  w.BeginObject();
  w.Field("config_xxh3_128", config_hash.ToHex()).Field("stage", s.name);
  w.Field("docs_in", s.docs_in).Field("docs_out", s.docs_out);
  w.Field("docs_rejected", s.docs_rejected).Field("docs_removed", s.docs_removed);
  w.Field("bytes_in", s.bytes_in).Field("tokens", s.tokens).Field("samples", s.samples);
  w.Field("seconds", s.seconds).Field("note", s.note).Field("report", r.report_json);
  w.Key("outputs").Raw(r.outputs_json);
  w.EndObject();
  return w.Take();
}

// The config hash a record names; nullopt when the record is missing or unreadable (a torn or
// damaged record is not another config's: only its stage runs again).
std::optional<std::string> RecordConfig(Env* env, const std::string& path) {
  auto text = ReadFileToString(env, path);
  if (!text.ok()) return std::nullopt;
  simdjson::dom::parser p;
  simdjson::dom::element e;
  simdjson::padded_string ps(*text);
  std::string_view h;
  if (p.parse(ps).get(e) != simdjson::SUCCESS || e["config_xxh3_128"].get(h) != simdjson::SUCCESS) {
    return std::nullopt;
  }
  return std::string(h);
}

// The stage's record when it completed under this config and its outputs (under `work`) are
// exactly as recorded; nullopt otherwise (missing, torn or damaged record, another config, an
// output missing, added, truncated or changed: the stage runs again, with a note on stderr when
// the record was there).
std::optional<StageRecord> LoadRecord(Env* env, const std::string& path, const Hash128& hash,
                                      const std::string& output_root) {
  auto text = ReadFileToString(env, path);
  if (!text.ok()) return std::nullopt;
  const std::string work = DirName(DirName(path));
  auto damaged = [&](const std::string& why) -> std::optional<StageRecord> {
    std::fprintf(stderr, "build: %s: %s; the stage runs again\n", path.c_str(), why.c_str());
    return std::nullopt;
  };
  simdjson::dom::parser p;
  simdjson::dom::element e;
  simdjson::padded_string ps(*text);
  if (p.parse(ps).get(e) != simdjson::SUCCESS) return damaged("not a valid stage record");
  std::string_view h;
  if (e["config_xxh3_128"].get(h) != simdjson::SUCCESS) return damaged("no config hash");
  if (h != hash.ToHex()) return std::nullopt;
  StageRecord r;
  StageSummary& s = r.summary;
  std::string_view sv;
  if (e["stage"].get(sv) != simdjson::SUCCESS) return std::nullopt;
  s.name = std::string(sv);
  for (auto [k, dst] : {std::pair{"docs_in", &s.docs_in}, std::pair{"docs_out", &s.docs_out},
                        std::pair{"docs_rejected", &s.docs_rejected},
                        std::pair{"docs_removed", &s.docs_removed},
                        std::pair{"bytes_in", &s.bytes_in}, std::pair{"tokens", &s.tokens},
                        std::pair{"samples", &s.samples}}) {
    if (e[k].get(*dst) != simdjson::SUCCESS) return std::nullopt;
  }
  if (e["seconds"].get(s.seconds) != simdjson::SUCCESS) return std::nullopt;
  if (e["note"].get(sv) != simdjson::SUCCESS) return std::nullopt;
  s.note = std::string(sv);
  if (e["report"].get(sv) != simdjson::SUCCESS) return std::nullopt;
  r.report_json = std::string(sv);
  simdjson::dom::array outputs;
  if (e["outputs"].get(outputs) != simdjson::SUCCESS) return damaged("no output checksums");
  std::vector<StageOutput> recorded;
  for (simdjson::dom::element o : outputs) {
    StageOutput x;
    std::string_view pth, hx;
    if (o["path"].get(pth) != simdjson::SUCCESS || o["bytes"].get(x.bytes) != simdjson::SUCCESS ||
        o["xxh3_128"].get(hx) != simdjson::SUCCESS) {
      return damaged("a bad entry in 'outputs'");
    }
    x.path = std::string(pth);
    x.xxh3_128 = std::string(hx);
    recorded.push_back(std::move(x));
  }
  auto now = StageOutputs(env, work, output_root);
  if (!now.ok()) return damaged(std::string(now.status().message()));
  if (std::string why = OutputsDiffer(recorded, *now); !why.empty()) return damaged(why);
  r.outputs_json = StageOutputsJson(*now);
  s.resumed = true;
  return r;
}

// The document parts a stage left at the top level of `dir` (*.jsonl.zst), in name order.
absl::StatusOr<std::vector<std::string>> KeptParts(Env* env, const std::string& dir) {
  ASSIGN_OR_RETURN(std::vector<std::string> names, env->ListDir(dir));
  std::vector<std::string> out;
  const std::string ext = ".jsonl.zst";
  for (const std::string& n : names) {
    if (n.size() > ext.size() && n.compare(n.size() - ext.size(), ext.size(), ext) == 0 &&
        !env->IsDirectory(JoinPath(dir, n))) {
      out.push_back(JoinPath(dir, n));
    }
  }
  return out;
}

// Sums the per-task encode reports (tokens-TTTTT-of-NNNNN.json beside each part) into the report
// one task over all inputs would have written: counts add up, the longest document is the maximum.
absl::StatusOr<tokenize::EncodeReport> MergeEncodeReports(Env* env,
                                                          const std::vector<std::string>& parts) {
  tokenize::EncodeReport all;
  for (const std::string& prefix : parts) {
    ASSIGN_OR_RETURN(std::string text, ReadFileToString(env, prefix + ".json"));
    simdjson::dom::parser p;
    simdjson::dom::element e;
    simdjson::padded_string ps(text);
    if (p.parse(ps).get(e) != simdjson::SUCCESS) {
      return absl::DataLossError(absl::StrCat(prefix, ".json: not a valid encode report"));
    }
    uint64_t v[9];
    const char* keys[9] = {"docs_in", "docs_out", "docs_rejected", "docs_removed", "bytes_in",
                           "tokens", "rejected_malformed", "rejected_empty", "max_document_tokens"};
    for (int i = 0; i < 9; ++i) {
      if (e[keys[i]].get(v[i]) != simdjson::SUCCESS) {
        return absl::DataLossError(absl::StrCat(prefix, ".json: no '", keys[i], "'"));
      }
    }
    all.counts.docs_in += v[0];
    all.counts.docs_out += v[1];
    all.counts.docs_rejected += v[2];
    all.counts.docs_removed += v[3];
    all.counts.bytes_in += v[4];
    all.tokens += v[5];
    all.rejected_malformed += v[6];
    all.rejected_empty += v[7];
    all.max_document_tokens = std::max(all.max_document_tokens, v[8]);
    double seconds = 0;
    if (e["seconds"].get(seconds) == simdjson::SUCCESS) all.seconds = std::max(all.seconds, seconds);
  }
  return all;
}

// Reads the counts of one clean task's report (clean-report-IIIII-of-NNNNN.json, CleanReport::ToJson,
// written last by the task) for clean-merge to sum; appends the kept parts it lists to `parts`.
absl::StatusOr<clean::CleanReport> ParseCleanTaskReport(const std::string& path,
                                                        const std::string& text,
                                                        std::vector<std::string>* parts) {
  simdjson::dom::parser p;
  simdjson::dom::element e;
  simdjson::padded_string ps(text);
  auto bad = [&](const std::string& what) {
    return absl::DataLossError(absl::StrCat(path, ": not a clean report (", what, ")"));
  };
  if (p.parse(ps).get(e) != simdjson::SUCCESS) return bad("not JSON");
  clean::CleanReport r;
  struct Field {
    const char* object;
    const char* key;
    uint64_t* dst;
  };
  for (const Field& f : {Field{"docs", "in", &r.counts.docs_in}, Field{"docs", "kept", &r.counts.docs_out},
                         Field{"docs", "rejected", &r.counts.docs_rejected},
                         Field{"docs", "bad_records", &r.bad_records},
                         Field{"bytes", "in", &r.counts.bytes_in}, Field{"bytes", "kept", &r.counts.bytes_out},
                         Field{"bytes", "records", &r.record_bytes}}) {
    if (e[f.object][f.key].get(*f.dst) != simdjson::SUCCESS) {
      return bad(absl::StrCat("no ", f.object, ".", f.key));
    }
  }
  simdjson::dom::object reasons;
  if (e["reasons"].get(reasons) != simdjson::SUCCESS) return bad("no reasons");
  for (auto [k, v] : reasons) {
    uint64_t n = 0;
    if (v.get(n) != simdjson::SUCCESS) return bad("a reason's count is not a number");
    r.reasons[std::string(k)] += n;
  }
  if (e["seconds"].get(r.seconds) != simdjson::SUCCESS) return bad("no seconds");
  simdjson::dom::array kept;
  if (e["kept_parts"].get(kept) != simdjson::SUCCESS) return bad("no kept_parts");
  for (simdjson::dom::element k : kept) {
    std::string_view name;
    if (k["path"].get(name) != simdjson::SUCCESS) return bad("a kept part without a path");
    parts->push_back(std::string(name));
  }
  return r;
}

// ---- The build: its context and its table of stages ----

struct Build;

// What a step of a stage gives back: the stage's record when the step completes the stage (the
// whole stage, or its merge), else the summary of what this task did (printed by the CLI).
struct StepResult {
  StageRecord record;
  bool completes = false;
};

// One `grist build --stage NAME` step of a stage.
struct Step {
  std::string name;
  bool parallel = false;  // runs as task I of N (--task/--tasks), concurrently with the others
  // Completes the stage (writes its record) when it succeeds; the last step of every stage does.
  bool completes = false;
  std::function<absl::StatusOr<StageRecord>(Build&, const RunOptions&)> run;
};

// A stage of the build, one entry of the table (Stages() below). Adding a stage is adding one.
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
  absl::StatusOr<tokenize::Tokenizer*> Tokenizer() {
    if (!tokenizer) {
      ASSIGN_OR_RETURN(tokenizer, tokenize::Tokenizer::Load(env, ModelPath()));
    }
    return tokenizer.get();
  }
  // Called once a stage's outputs are written and synced: hashes them into the record, then
  // writes the record (atomically), with the crash points of release/crash_points.h between.
  absl::Status Complete(const StageDef& s, StageRecord& r) {
    const std::string point = absl::StrCat("build.", s.name, ".");
    RETURN_IF_ERROR(crash::Point(point + "after_outputs"));
    ASSIGN_OR_RETURN(std::vector<StageOutput> outputs, StageOutputs(env, work, s.output_root));
    r.outputs_json = StageOutputsJson(outputs);
    RETURN_IF_ERROR(crash::Point(point + "before_record"));
    RETURN_IF_ERROR(WriteFileAtomic(env, RecordPath(s.name), RecordJson(bc.hash, r)));
    return crash::Point(point + "after_record");
  }
};

void CountsSummary(const DocCounts& c, StageSummary* s) {
  s->docs_in = c.docs_in;
  s->docs_out = c.docs_out;
  s->docs_rejected = c.docs_rejected;
  s->docs_removed = c.docs_removed;
}

RunOptions OneTask(const RunOptions& run) {
  RunOptions one = run;
  one.task = 0;
  one.tasks = 1;
  return one;
}

std::string TaskNote(const RunOptions& run) { return absl::StrCat("task ", run.task, " of ", run.tasks); }

// ---- clean ----

StageRecord CleanRecord(const clean::CleanReport& cr) {
  StageRecord r;
  CountsSummary(cr.counts, &r.summary);
  r.summary.bytes_in = cr.record_bytes;
  r.summary.seconds = cr.seconds;
  r.report_json = cr.CountsJson();
  return r;
}

// Whether `name` (a clean output: part-IIIII-of-NNNNN-*, clean-report-IIIII-of-NNNNN.json) was
// written by a task of another task count than `tasks`.
bool OfOtherTaskCount(const std::string& name, int tasks) {
  for (const char* stem : {clean::kPartStem, clean::kReportStem}) {
    if (std::optional<TaskPart> p = ParseTaskPart(name, stem)) return p->tasks != tasks;
  }
  return false;
}

absl::StatusOr<StageRecord> CleanTask(Build& b, const RunOptions& run) {
  const std::string dir = b.Dir("clean");
  // Files of an earlier attempt with another task count (tasks of this count each replace only
  // their own files, so the N tasks can run at once).
  for (const std::string& d : {dir, JoinPath(dir, "rejects")}) {
    if (!b.env->IsDirectory(d)) continue;
    ASSIGN_OR_RETURN(std::vector<std::string> names, b.env->ListDir(d));
    for (const std::string& n : names) {
      if (OfOtherTaskCount(n, run.tasks)) RETURN_IF_ERROR(b.env->RemoveFile(JoinPath(d, n)));
    }
  }
  ASSIGN_OR_RETURN(clean::CleanReport cr, clean::RunClean(b.env, b.bc.inputs, dir, b.bc.clean, run));
  StageRecord r = CleanRecord(cr);
  r.summary.note = TaskNote(run);
  return r;
}

absl::StatusOr<StageRecord> CleanMerge(Build& b, const RunOptions&) {
  Stopwatch sw;
  const std::string dir = b.Dir("clean");
  std::vector<std::string> names;
  if (b.env->IsDirectory(dir)) {
    ASSIGN_OR_RETURN(names, b.env->ListDir(dir));
  }
  ASSIGN_OR_RETURN(TaskParts reports,
                   FindTaskParts(names, clean::kReportStem, clean::kReportSuffix, dir));
  const int tasks = reports.tasks;
  if (tasks == 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        dir, ": no clean task has finished (no clean-report-*.json); run --stage clean first"));
  }
  clean::CleanReport all;
  std::vector<std::string> listed;
  for (int t = 0; t < tasks; ++t) {
    const std::string path = JoinPath(dir, clean::TaskReportName(t, tasks));
    auto text = ReadFileToString(b.env, path);
    if (!text.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat(path, ": clean task ", t, " of ", tasks, " has not finished"));
    }
    ASSIGN_OR_RETURN(clean::CleanReport r, ParseCleanTaskReport(path, *text, &listed));
    all.counts.docs_in += r.counts.docs_in;
    all.counts.docs_out += r.counts.docs_out;
    all.counts.docs_rejected += r.counts.docs_rejected;
    all.counts.bytes_in += r.counts.bytes_in;
    all.counts.bytes_out += r.counts.bytes_out;
    all.bad_records += r.bad_records;
    all.record_bytes += r.record_bytes;
    for (const auto& [reason, n] : r.reasons) all.reasons[reason] += n;
    all.seconds = std::max(all.seconds, r.seconds);
  }
  // The kept parts on disk are exactly those the reports list (none missing, none stray).
  ASSIGN_OR_RETURN(std::vector<std::string> kept, KeptParts(b.env, dir));
  std::vector<std::string> on_disk;
  for (const std::string& k : kept) on_disk.push_back(BaseName(k));
  std::sort(listed.begin(), listed.end());
  if (on_disk != listed) {
    return absl::DataLossError(absl::StrCat(
        dir, ": the kept parts are not those the ", tasks, " task reports list (",
        on_disk.size(), " on disk, ", listed.size(), " listed); rerun --stage clean"));
  }
  StageRecord r = CleanRecord(all);
  // The stage took as long as its slowest task (they run at once) plus this merge.
  r.summary.seconds = all.seconds + sw.Seconds();
  r.summary.note = absl::StrCat("merged ", tasks, " task(s); slowest ",
                                absl::StrFormat("%.2f", all.seconds), " s");
  return r;
}

// ---- dedup ----

StageRecord DedupRecord(const dedup::DedupReport& dr) {
  StageRecord r;
  CountsSummary(dr.counts, &r.summary);
  r.summary.bytes_in = dr.counts.bytes_in;
  for (const auto& st : dr.stages) r.summary.seconds += st.seconds;
  r.report_json = dr.CountsJson();
  return r;
}

absl::Status NeedDocuments(const Build& b) {
  if (b.docs.empty()) return absl::FailedPreconditionError("build: the clean stage kept no documents");
  return absl::OkStatus();
}

// The dedup stage's own work folder (its scratch), cleared once its report is written.
std::string DedupScratch(const Build& b) {
  return b.bc.dedup.work_dir.empty() ? JoinPath(b.Dir("dedup"), ".dedup-work") : b.bc.dedup.work_dir;
}

Step DedupStep(dedup::DedupStage stage) {
  Step s;
  s.name = absl::StrCat("dedup-", dedup::DedupStageName(stage));
  s.parallel = dedup::StageIsParallel(stage);
  s.completes = stage == dedup::DedupStage::kReport;
  s.run = [stage](Build& b, const RunOptions& run) -> absl::StatusOr<StageRecord> {
    RETURN_IF_ERROR(NeedDocuments(b));
    ASSIGN_OR_RETURN(dedup::DedupReport dr,
                     dedup::RunDedupStage(b.env, stage, b.docs, b.Dir("dedup"), b.bc.dedup, run));
    if (stage != dedup::DedupStage::kReport) {
      StageRecord r;
      r.summary.name = "dedup";
      r.summary.note = dedup::StageIsParallel(stage)
                           ? absl::StrCat(dedup::DedupStageName(stage), ", ", TaskNote(run))
                           : std::string(dedup::DedupStageName(stage));
      return r;
    }
    if (!b.bc.dedup.keep_work) RETURN_IF_ERROR(b.env->RemoveAll(DedupScratch(b)));
    return DedupRecord(dr);
  };
  return s;
}

// ---- tokenizer ----

absl::StatusOr<StageRecord> RunTokenizer(Build& b) {
  Stopwatch sw;
  StageRecord r;
  if (!b.bc.tokenizer_model.empty()) {
    auto bytes = ReadFileToString(b.env, b.bc.tokenizer_model);
    if (!bytes.ok()) return Annotate(bytes.status(), "config key 'tokenizer.model'");
    RETURN_IF_ERROR(tokenize::Tokenizer::FromBytes(*bytes, b.bc.tokenizer_model).status());
    RETURN_IF_ERROR(WriteFileAtomic(b.env, b.ModelPath(), *bytes));
    r.summary.note = "pretrained";
    r.report_json = absl::StrCat("{\"pretrained\":true,\"model_bytes\":", bytes->size(), "}");
  } else {
    ASSIGN_OR_RETURN(auto tr, tokenize::TrainTokenizer(b.env, b.docs, b.ModelPath(), b.bc.train,
                                                       b.opts.run.progress));
    r.summary.docs_in = tr.documents;
    r.summary.docs_out = tr.documents - tr.documents_rejected;
    r.summary.docs_rejected = tr.documents_rejected;
    r.summary.bytes_in = b.input_bytes;
    r.summary.note = "trained";
    r.report_json = tr.ToJson();
  }
  r.summary.seconds = sw.Seconds();
  return r;
}

// ---- tokenize ----

// The tokenize stage's record from its (whole or merged) encode report.
StageRecord EncodeRecord(const tokenize::EncodeReport& er) {
  StageRecord r;
  r.summary.name = "tokenize";
  CountsSummary(er.counts, &r.summary);
  r.summary.bytes_in = er.counts.bytes_in;
  r.summary.tokens = er.tokens;
  r.summary.seconds = er.seconds;
  r.report_json = er.ToJson();
  return r;
}

absl::StatusOr<tokenize::EncodeReport> Encode(Build& b, const RunOptions& run) {
  tokenize::EncodeStageOptions eo = b.bc.encode;
  eo.model_path = b.ModelPath();
  return tokenize::RunEncode(b.env, b.docs, b.TokensDir(), eo, run);
}

absl::StatusOr<StageRecord> TokenizeMerge(Build& b, const RunOptions&) {
  Stopwatch sw;
  ASSIGN_OR_RETURN(std::vector<std::string> parts, tokenize::ListTokenParts(b.env, b.TokensDir()));
  ASSIGN_OR_RETURN(tokenize::EncodeReport er, MergeEncodeReports(b.env, parts));
  StageRecord r = EncodeRecord(er);
  // The stage took as long as its slowest task (they run at once) plus this merge.
  r.summary.seconds = er.seconds + sw.Seconds();
  r.summary.note = absl::StrCat("merged ", parts.size(), " task(s); slowest ",
                                absl::StrFormat("%.2f", er.seconds), " s");
  return r;
}

// ---- The table ----

const std::vector<StageDef>& Stages() {
  static const auto* stages = [] {
    auto* v = new std::vector<StageDef>();
    {
      StageDef s;
      s.name = "clean";
      s.output_root = "clean";
      s.enabled = [](const BuildConfig& bc) { return bc.clean_enabled; };
      s.inputs = StageDef::Inputs::kConfigInputs;
      s.keeps_documents = s.counted = s.runs_before_tokenizer = true;
      s.run = [](Build& b) -> absl::StatusOr<StageRecord> {
        ASSIGN_OR_RETURN(auto cr, clean::RunClean(b.env, b.bc.inputs, b.Dir("clean"), b.bc.clean,
                                                  OneTask(b.opts.run)));
        return CleanRecord(cr);
      };
      s.steps = {Step{"clean", true, false, CleanTask}, Step{"clean-merge", false, true, CleanMerge}};
      v->push_back(std::move(s));
    }
    {
      StageDef s;
      s.name = "dedup";
      s.output_root = "dedup";
      s.enabled = [](const BuildConfig& bc) { return bc.dedup_enabled; };
      s.keeps_documents = s.counted = s.runs_before_tokenizer = true;
      s.run = [](Build& b) -> absl::StatusOr<StageRecord> {
        RETURN_IF_ERROR(NeedDocuments(b));
        ASSIGN_OR_RETURN(auto dr, dedup::RunDedup(b.env, b.docs, b.Dir("dedup"), b.bc.dedup,
                                                  OneTask(b.opts.run)));
        return DedupRecord(dr);
      };
      for (dedup::DedupStage st : dedup::kDedupStages) s.steps.push_back(DedupStep(st));
      v->push_back(std::move(s));
    }
    {
      StageDef s;
      s.name = "tokenizer";
      s.output_root = "tokenizer.model";
      s.enabled = [](const BuildConfig&) { return true; };
      s.run = RunTokenizer;
      s.steps = {Step{"tokenizer", false, true,
                      [](Build& b, const RunOptions&) { return RunTokenizer(b); }}};
      v->push_back(std::move(s));
    }
    {
      StageDef s;
      s.name = "tokenize";
      s.output_root = "tokens";
      s.enabled = [](const BuildConfig&) { return true; };
      s.counted = true;
      s.run = [](Build& b) -> absl::StatusOr<StageRecord> {
        ASSIGN_OR_RETURN(auto er, Encode(b, OneTask(b.opts.run)));
        return EncodeRecord(er);
      };
      s.steps = {Step{"tokenize", true, false,
                      [](Build& b, const RunOptions& run) -> absl::StatusOr<StageRecord> {
                        ASSIGN_OR_RETURN(auto er, Encode(b, run));
                        StageRecord r = EncodeRecord(er);
                        r.summary.note = TaskNote(run);
                        return r;
                      }},
                 Step{"tokenize-merge", false, true, TokenizeMerge}};
      v->push_back(std::move(s));
    }
    return v;
  }();
  return *stages;
}

constexpr const char* kPackStep = "pack";

// ---- pack + shard ----

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
  std::vector<shard::FileInfo> inputs;  // the config's inputs, hashed, for the manifest
  // The completed stages by name (the table's); a stage absent here is recorded as disabled.
  std::map<std::string, StageRecord> records;
  const Stopwatch* total = nullptr;
};

absl::StatusOr<std::vector<shard::FileInfo>> HashInputs(Env* env, const std::vector<InputFile>& files) {
  std::vector<shard::FileInfo> inputs;
  for (const InputFile& f : files) {
    ASSIGN_OR_RETURN(Hash128 h, HashFile128(env, f.path));
    inputs.push_back({f.path, f.size, h});
  }
  return inputs;
}

std::string Now() {
  std::time_t t = std::time(nullptr);
  char buf[64];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

// Appends a document to its split's Megatron document file (docs/formats/release.md,
// "documents/"): the document's tokens as packed, then EOS as Megatron's EOD unless the document
// already ends with it. Documents without tokens are not written. Opens the file at the first one.
absl::Status AddMegatronDocument(Env* env, const std::string& release_dir, const std::string& split,
                                 shard::TokenDtype dtype, int32_t eos_id,
                                 std::vector<int32_t>* doc,
                                 std::unique_ptr<shard::IndexedDatasetWriter>* writer,
                                 uint64_t* eod_appended) {
  if (doc->empty()) return absl::OkStatus();
  if (!*writer) {
    const std::string dir = JoinPath(release_dir, std::string(shard::kDocumentsDir));
    RETURN_IF_ERROR(env->CreateDirs(dir));
    ASSIGN_OR_RETURN(*writer, shard::IndexedDatasetWriter::Open(env, JoinPath(dir, split), dtype));
  }
  const bool append = eos_id >= 0 && doc->back() != eos_id;
  if (append) {
    doc->push_back(eos_id);
    ++*eod_appended;
  }
  absl::Status st = (*writer)->Add(*doc);
  if (append) doc->pop_back();
  return st;
}
// Moves the whole release at `staging` to `output`. An earlier release at `output` stays in place
// until the new one takes its name: with Env::Default() the two are swapped atomically
// (renameat2(RENAME_EXCHANGE); a reader of `output` sees the old release or the new one, never
// neither), elsewhere (other Envs, file systems without the exchange) the old one is renamed aside
// just before (a kill between the two renames leaves no release at `output` until a rerun).
// Returns the path now holding the earlier release (to remove once the new name is durable), or "".
absl::StatusOr<std::string> Publish(Env* env, const std::string& staging, const std::string& output) {
  RETURN_IF_ERROR(env->CreateDirs(DirName(output)));
  if (!env->IsDirectory(output)) {
    RETURN_IF_ERROR(env->RemoveAll(output));
    RETURN_IF_ERROR(env->RenameFile(staging, output));
    return std::string();
  }
#if defined(SYS_renameat2) && defined(RENAME_EXCHANGE)
  if (env == Env::Default()) {
    if (::syscall(SYS_renameat2, AT_FDCWD, staging.c_str(), AT_FDCWD, output.c_str(),
                  RENAME_EXCHANGE) == 0) {
      return staging;
    }
    const int e = errno;
    if (e != EINVAL && e != ENOSYS && e != ENOTSUP) {  // else: not supported here, rename instead
      return absl::Status(absl::ErrnoToStatusCode(e),
                          absl::StrCat("renameat2(RENAME_EXCHANGE) ", staging, " <-> ", output,
                                       ": ", std::strerror(e)));
    }
  }
#endif
  const std::string previous = staging + ".previous";
  RETURN_IF_ERROR(env->RemoveAll(previous));
  RETURN_IF_ERROR(env->RenameFile(output, previous));
  RETURN_IF_ERROR(env->RenameFile(staging, output));
  return previous;
}

// The pack+shard stage: packs the tokenized parts into the staging folder, then publishes it at
// the release folder (reports/, then manifest.json last, then the move: Publish).
absl::StatusOr<BuildReport> PackAndPublish(Env* env, const PublishOptions& o) {
  const BuildConfig& bc = *o.config;
  tokenize::Tokenizer* tok = o.tokenizer;
  auto record = [&](const std::string& name) -> const StageRecord* {
    auto it = o.records.find(name);
    return it == o.records.end() ? nullptr : &it->second;
  };
  const StageRecord* enc_rec = record("tokenize");
  const StageRecord* tok_rec = record("tokenizer");
  if (!enc_rec || !tok_rec) return absl::InternalError("build: pack before tokenize");
  BuildReport report;
  report.output_dir = o.output_dir;
  // ---- pack + shard (one stage: its output is the release itself) ----
  Stopwatch pack_sw;
  if (env->IsDirectory(o.output_dir)) {
    ASSIGN_OR_RETURN(auto names, env->ListDir(o.output_dir));
    bool ours = names.empty() || env->FileExists(JoinPath(o.output_dir, "shards")) ||
                env->FileExists(JoinPath(o.output_dir, std::string(shard::kManifestName)));
    if (!ours) {
      return absl::FailedPreconditionError(absl::StrCat(
          o.output_dir, ": exists and is not a release; refusing to overwrite it"));
    }
  }
  // The new release is written into the staging folder and moved to --output only when whole, so
  // an earlier release there stays published (and valid) until the new one replaces it at once.
  const std::string& dir = o.staging_dir;
  RETURN_IF_ERROR(env->RemoveAll(dir));
  RETURN_IF_ERROR(env->CreateDirs(JoinPath(dir, std::string(shard::kShardsDir))));
  pack::PackOptions po = bc.pack;
  po.pad_id = tok->pad_id() >= 0 ? tok->pad_id() : (tok->eos_id() >= 0 ? tok->eos_id() : 0);
  const shard::TokenDtype dtype = shard::DtypeForVocab(static_cast<uint64_t>(tok->vocab_size()));
  const uint32_t st = po.sample_tokens();
  struct SplitState {
    std::string name;
    std::unique_ptr<shard::SplitWriter> writer;
    std::unique_ptr<pack::Packer> packer;
    uint64_t documents = 0;
    // The split's Megatron document file (documents/<split>), opened at its first document.
    std::unique_ptr<shard::IndexedDatasetWriter> docs;
    uint64_t eod_appended = 0;
  };
  SplitState splits[2];
  for (int i = 0; i < 2; ++i) {
    SplitState& s = splits[i];
    s.name = std::string(i == 0 ? shard::kTrainSplit : shard::kValidationSplit);
    s.writer = std::make_unique<shard::SplitWriter>(env, dir, s.name, st, dtype,
                                                    bc.shard_max_bytes);
    shard::SplitWriter* w = s.writer.get();
    s.packer = std::make_unique<pack::Packer>(po, [w](const pack::PackedSample& p) {
      return w->Append(p.tokens, p.segments);
    });
  }
  ASSIGN_OR_RETURN(std::vector<std::string> parts, tokenize::ListTokenParts(env, o.tokens_dir));
  {
    Progress prog("pack", enc_rec->summary.tokens, Progress::Unit::kCount, !o.run.progress);
    std::vector<int32_t> doc;
    for (const std::string& part : parts) {
      ASSIGN_OR_RETURN(auto reader, tokenize::IndexedDatasetReader::Open(env, part));
      for (uint64_t i = 0; i < reader->sequences(); ++i) {
        doc.clear();
        reader->Read(i, &doc);
        SplitState& s = splits[bc.split.SplitOf(doc)];
        ++s.documents;
        RETURN_IF_ERROR(s.packer->Add(doc));
        RETURN_IF_ERROR(AddMegatronDocument(env, dir, s.name, dtype, tok->eos_id(),
                                            &doc, &s.docs, &s.eod_appended));
        prog.Add(doc.size());
      }
    }
    prog.Finish();
  }
  shard::Manifest m;
  m.release_version = bc.release_version;
  m.grist_version = GRIST_VERSION;
  m.config_json = bc.canonical_json;
  m.config_xxh3_128 = bc.hash;
  m.inputs = o.inputs;
  m.seq_len = static_cast<uint32_t>(po.seq_len);
  m.sample_tokens = st;
  m.token_dtype = dtype;
  m.seed = bc.seed;
  m.packing = po.strategy;
  pack::PackStats all;
  JsonWriter pj(0);
  pj.BeginObject();
  for (SplitState& s : splits) {
    RETURN_IF_ERROR(s.packer->Finish());
    ASSIGN_OR_RETURN(shard::SplitInfo info, s.writer->Finish());
    info.documents = s.documents;
    if (s.docs) {
      ASSIGN_OR_RETURN(shard::DatasetInfo d, s.docs->Finish());
      const std::string name = absl::StrCat(std::string(shard::kDocumentsDir), "/", s.name);
      info.documents_file = shard::DocumentsFileInfo{
          name, d.sequences, d.tokens, s.eod_appended, {name + ".bin", d.bin_bytes, d.bin_xxh3_128},
          {name + ".idx", d.idx_bytes, d.idx_xxh3_128}};
    }
    m.splits[s.name] = std::move(info);
    all.Merge(s.packer->stats());
    pj.Key(s.name).Raw(s.packer->stats().ToJson());
  }
  pj.EndObject();
  RETURN_IF_ERROR(crash::Point("build.pack.after_shards"));
  // Tokenizer into the release.
  RETURN_IF_ERROR(WriteFileAtomic(env, JoinPath(dir, std::string(shard::kTokenizerName)),
                                  tok->model_bytes()));
  m.tokenizer.file = {std::string(shard::kTokenizerName), tok->model_bytes().size(),
                      Hash128Of(tok->model_bytes())};
  m.tokenizer.vocab_size = static_cast<uint64_t>(tok->vocab_size());
  m.tokenizer.bos_id = tok->bos_id();
  m.tokenizer.eos_id = tok->eos_id();
  m.tokenizer.pad_id = po.pad_id;
  m.tokenizer.model_type = tok->model_type();
  // Counts: documents in = in shards + rejected + removed, per stage.
  const StageSummary& es = enc_rec->summary;
  if (all.documents != es.docs_out ||
      m.splits["train"].documents + m.splits["validation"].documents != es.docs_out) {
    return absl::InternalError("build: pack did not receive every tokenized document");
  }
  // Nothing lost: documents in = in shards + rejected + removed, summed over the counted stages
  // (clean, dedup, tokenize); documents in are those of the first counted stage that ran.
  JsonWriter cj(0);
  cj.BeginObject();
  uint64_t rejected = 0, removed = 0;
  std::optional<uint64_t> docs_in;
  for (const StageDef& s : Stages()) {
    if (!s.counted) continue;
    const StageRecord* r = record(s.name);
    if (!r) {
      cj.Key(s.name).BeginObject().Field("enabled", false).EndObject();
      continue;
    }
    cj.Key(s.name).Raw(r->report_json);
    if (!docs_in) docs_in = r->summary.docs_in;
    rejected += r->summary.docs_rejected;
    removed += r->summary.docs_removed;
  }
  cj.Key("pack").Raw(pj.str());
  cj.Key("shard").BeginObject();
  cj.Field("documents_in", es.docs_out);
  cj.Field("documents_train", m.splits["train"].documents);
  cj.Field("documents_validation", m.splits["validation"].documents);
  cj.Field("samples_train", m.splits["train"].samples);
  cj.Field("samples_validation", m.splits["validation"].samples);
  cj.Field("shards_train", static_cast<uint64_t>(m.splits["train"].shards.size()));
  cj.Field("shards_validation", static_cast<uint64_t>(m.splits["validation"].shards.size()));
  cj.EndObject();
  if (*docs_in != es.docs_out + rejected + removed) {
    return absl::InternalError(absl::StrCat("build: documents in (", *docs_in,
                                            ") != in shards + rejected + removed (", es.docs_out,
                                            " + ", rejected, " + ", removed, ")"));
  }
  cj.Key("total").BeginObject();
  cj.Field("documents_in", *docs_in).Field("documents_in_shards", es.docs_out);
  cj.Field("documents_rejected", rejected).Field("documents_removed", removed);
  cj.EndObject();
  cj.EndObject();
  m.counts_json = cj.Take();
  m.release_id = shard::ComputeReleaseId(m);

  StageSummary ps{.name = "pack+shard"};
  ps.docs_in = all.documents;
  ps.docs_out = all.documents - all.empty_documents;
  ps.tokens = all.tokens_out;
  ps.samples = all.samples;
  ps.bytes_in = es.tokens * shard::TokenDtypeSize(dtype);
  ps.note = absl::StrFormat("%s, %.1f%% padding", po.strategy, 100 * all.padding_fraction());
  ps.seconds = pack_sw.Seconds();

  for (const StageDef& s : Stages()) {
    const StageRecord* r = record(s.name);
    report.stages.push_back(r ? r->summary : StageSummary{.name = s.name, .note = "disabled"});
  }
  report.stages.push_back(ps);
  report.release_id = m.release_id;
  report.seconds = o.total->Seconds();
  report.peak_rss_bytes = PeakRssBytes();
  // reports/ (not reproducible, not in the manifest), then the manifest last.
  const std::string reports = JoinPath(dir, std::string(shard::kReportsDir));
  RETURN_IF_ERROR(env->CreateDirs(reports));
  JsonWriter bj(2);
  bj.BeginObject().Key("build").Raw(report.ToJson());
  bj.Field("threads", static_cast<int64_t>(o.run.threads)).Field("config", o.config_path);
  bj.EndObject();
  RETURN_IF_ERROR(WriteFileAtomic(env, JoinPath(reports, "build.json"), bj.str() + "\n"));
  RETURN_IF_ERROR(WriteFileAtomic(env, JoinPath(reports, "summary.md"), report.Table()));
  RETURN_IF_ERROR(crash::Point("build.pack.before_manifest"));
  RETURN_IF_ERROR(shard::WriteManifest(env, dir, m));
  ASSIGN_OR_RETURN(std::string previous, Publish(env, dir, o.output_dir));
  RETURN_IF_ERROR(crash::Point("build.pack.after_manifest"));
  RETURN_IF_ERROR(env->SyncDir(DirName(o.output_dir)));
  if (!previous.empty()) RETURN_IF_ERROR(env->RemoveAll(previous));
  return report;
}

}  // namespace

std::string BuildReport::Table() const {
  std::string out =
      "| stage | docs in | docs out | rejected | removed | tokens | samples | seconds | MB/s |\n"
      "|---|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const StageSummary& s : stages) {
    std::string secs = s.resumed ? absl::StrFormat("%.2f (earlier run)", s.seconds)
                                 : absl::StrFormat("%.2f", s.seconds);
    std::string mbs = s.seconds > 0 && s.bytes_in > 0
                          ? absl::StrFormat("%.1f", s.bytes_in / s.seconds / 1e6)
                          : std::string("-");
    out += absl::StrFormat("| %s%s | %d | %d | %d | %d | %d | %d | %s | %s |\n", s.name,
                           s.note.empty() ? "" : " (" + s.note + ")", s.docs_in, s.docs_out,
                           s.docs_rejected, s.docs_removed, s.tokens, s.samples, secs, mbs);
  }
  out += absl::StrFormat("\nrelease %s in %s, total %.2f s, peak RSS %.0f MiB\n", release_id,
                         output_dir, seconds, peak_rss_bytes / 1048576.0);
  return out;
}

std::string BuildReport::ToJson() const {
  JsonWriter w(2);
  w.BeginObject();
  w.Field("output_dir", output_dir).Field("release_id", release_id);
  w.Field("seconds", seconds).Field("peak_rss_bytes", peak_rss_bytes);
  w.Field("host", HostName()).Field("date", Now()).Field("cpu", CpuModel());
  w.Key("stages").BeginArray();
  for (const StageSummary& s : stages) {
    w.BeginObject().Field("name", s.name).Field("note", s.note).Field("resumed", s.resumed);
    w.Field("docs_in", s.docs_in).Field("docs_out", s.docs_out);
    w.Field("docs_rejected", s.docs_rejected).Field("docs_removed", s.docs_removed);
    w.Field("bytes_in", s.bytes_in).Field("tokens", s.tokens).Field("samples", s.samples);
    w.Field("seconds", s.seconds);
    w.Field("mb_per_s", s.seconds > 0 ? s.bytes_in / s.seconds / 1e6 : 0.0);
    w.EndObject();
  }
  w.EndArray().EndObject();
  return w.Take();
}

const std::vector<std::string>& BuildStages() {
  static const auto* names = [] {
    auto* v = new std::vector<std::string>();
    for (const StageDef& s : Stages()) {
      for (const Step& step : s.steps) v->push_back(step.name);
    }
    v->push_back(kPackStep);
    return v;
  }();
  return *names;
}

bool StageTakesTasks(const std::string& step) {
  for (const StageDef& s : Stages()) {
    for (const Step& st : s.steps) {
      if (st.name == step) return st.parallel;
    }
  }
  return false;
}

absl::StatusOr<BuildReport> BuildRelease(Env* env, const BuildOptions& opts) {
  Stopwatch total;
  if (opts.output_dir.empty()) return absl::InvalidArgumentError("--output is required");
  const std::string& stage = opts.stage;
  const bool staged = !stage.empty();
  // The step --stage names, and its stage (nullptr for pack).
  const StageDef* target = nullptr;
  const Step* step = nullptr;
  for (const StageDef& s : Stages()) {
    for (const Step& st : s.steps) {
      if (st.name == stage) target = &s, step = &st;
    }
  }
  if (staged && !step && stage != kPackStep) {
    return absl::InvalidArgumentError(absl::StrCat("--stage ", stage, ": unknown; stages are ",
                                                   absl::StrJoin(BuildStages(), ", ")));
  }
  if (staged && !(step && step->parallel) && opts.run.tasks != 1) {
    std::vector<std::string> arrays;
    for (const std::string& n : BuildStages()) {
      if (StageTakesTasks(n)) arrays.push_back(n);
    }
    return absl::InvalidArgumentError(absl::StrCat("--stage ", stage, " runs once; only --stage ",
                                                   absl::StrJoin(arrays, ", "),
                                                   " take --task/--tasks"));
  }
  if (staged && opts.restart) {
    return absl::InvalidArgumentError("--restart rebuilds every stage; it cannot go with --stage");
  }
  // A staged report (one stage's summary) for the steps that stop early.
  auto stage_report = [&](StageSummary s) {
    BuildReport r;
    r.output_dir = opts.output_dir;
    r.stages = {std::move(s)};
    r.seconds = total.Seconds();
    r.peak_rss_bytes = PeakRssBytes();
    return r;
  };
  ASSIGN_OR_RETURN(BuildConfig bc, ReadBuildConfig(env, opts.config_path));
  if (!bc.tokenizer_model.empty()) {  // fail before any stage runs
    auto bytes = ReadFileToString(env, bc.tokenizer_model);
    if (!bytes.ok()) return Annotate(bytes.status(), "config key 'tokenizer.model'");
    RETURN_IF_ERROR(tokenize::Tokenizer::FromBytes(*bytes, bc.tokenizer_model).status());
  }
  Build b{.env = env, .opts = opts, .bc = bc, .work = opts.output_dir + ".work"};
  // A work folder from another config (or --restart) is discarded.
  if (opts.restart) RETURN_IF_ERROR(env->RemoveAll(b.work));
  if (env->IsDirectory(b.StagesDir())) {
    ASSIGN_OR_RETURN(auto names, env->ListDir(b.StagesDir()));
    for (const std::string& n : names) {
      std::optional<std::string> h;
      if (n.size() > 5 && n.substr(n.size() - 5) == ".json") {
        h = RecordConfig(env, JoinPath(b.StagesDir(), n));
      }
      if (h && *h != bc.hash.ToHex()) {
        if (staged) {
          return absl::FailedPreconditionError(absl::StrCat(
              b.work, " was made with another config; remove it before a staged build"));
        }
        if (opts.run.progress) {
          std::fprintf(stderr, "build: %s was made with another config; starting over\n",
                       b.work.c_str());
        }
        RETURN_IF_ERROR(env->RemoveAll(b.work));
        break;
      }
    }
  }
  RETURN_IF_ERROR(env->CreateDirs(b.StagesDir()));
  ASSIGN_OR_RETURN(b.input_files, ListInputs(env, bc.inputs));
  for (const InputFile& f : b.input_files) b.input_bytes += f.size;
  b.docs = bc.inputs;

  for (const StageDef& s : Stages()) {
    const bool is_target = target == &s;
    if (!s.enabled(bc)) {
      if (is_target) return stage_report({.name = s.name, .note = "disabled in the config"});
      continue;
    }
    std::optional<StageRecord> rec = LoadRecord(env, b.RecordPath(s.name), bc.hash, s.output_root);
    if (is_target) {
      if (rec && !step->completes) {
        return absl::FailedPreconditionError(absl::StrCat("--stage ", stage,
                                                          ": the stage is already complete (",
                                                          b.RecordPath(s.name), ")"));
      }
      if (!rec) {
        if (s.keeps_documents) RETURN_IF_ERROR(env->CreateDirs(b.Dir(s.output_root)));
        ASSIGN_OR_RETURN(StageRecord r, step->run(b, opts.run));
        r.summary.name = s.name;
        if (!step->completes) return stage_report(r.summary);
        RETURN_IF_ERROR(b.Complete(s, r));
        rec = std::move(r);
      }
      return stage_report(rec->summary);
    }
    if (!rec) {
      // In a staged build every stage before the one asked for must have completed, except that
      // `--stage tokenizer` runs the stages before it (clean, dedup) in its own process.
      const bool may_run = !staged || (stage == "tokenizer" && s.runs_before_tokenizer);
      if (!may_run) {
        return absl::FailedPreconditionError(absl::StrCat(
            "--stage ", stage, ": stage ", s.name, " has not completed under this config (no ",
            b.RecordPath(s.name), "); run --stage ", s.HowToRun(), " first"));
      }
      RETURN_IF_ERROR(env->RemoveAll(b.Dir(s.output_root)));
      ASSIGN_OR_RETURN(StageRecord r, s.run(b));
      r.summary.name = s.name;
      RETURN_IF_ERROR(b.Complete(s, r));
      rec = std::move(r);
    }
    if (s.keeps_documents) {
      ASSIGN_OR_RETURN(b.docs, KeptParts(env, b.Dir(s.output_root)));
    }
    b.records[s.name] = std::move(*rec);
    if (s.keeps_documents && b.docs.empty()) {
      return absl::FailedPreconditionError(
          absl::StrCat("build: no documents left after ", s.name));
    }
  }

  PublishOptions po;
  po.config = &bc;
  po.config_path = opts.config_path;
  po.output_dir = opts.output_dir;
  po.staging_dir = b.Dir("release");
  po.run = opts.run;
  ASSIGN_OR_RETURN(po.tokenizer, b.Tokenizer());
  po.tokens_dir = b.TokensDir();
  ASSIGN_OR_RETURN(po.inputs, HashInputs(env, b.input_files));
  po.records = std::move(b.records);
  po.total = &total;
  return PackAndPublish(env, po);
}

absl::StatusOr<BuildReport> PackRelease(Env* env, const PackReleaseOptions& pro) {
  Stopwatch total;
  if (pro.output_dir.empty()) return absl::InvalidArgumentError("--output is required");
  ASSIGN_OR_RETURN(BuildConfig bc, ReadBuildConfig(env, pro.config_path, pro.config_overrides));
  ASSIGN_OR_RETURN(auto tok, tokenize::Tokenizer::Load(env, pro.model_path));
  ASSIGN_OR_RETURN(std::vector<std::string> parts, tokenize::ListTokenParts(env, pro.tokens_dir));
  ASSIGN_OR_RETURN(std::vector<InputFile> files, ListInputs(env, bc.inputs));
  PublishOptions po;
  po.config = &bc;
  po.config_path = pro.config_path;
  po.output_dir = pro.output_dir;
  po.staging_dir = pro.output_dir + ".partial";
  po.run = pro.run;
  po.tokenizer = tok.get();
  po.tokens_dir = pro.tokens_dir;
  ASSIGN_OR_RETURN(po.inputs, HashInputs(env, files));
  // The tokenize stage's counts: the sum over the tasks' reports; clean and dedup not run.
  ASSIGN_OR_RETURN(tokenize::EncodeReport er, MergeEncodeReports(env, parts));
  StageRecord enc = EncodeRecord(er);
  enc.summary.seconds = 0;
  enc.summary.note = absl::StrCat(parts.size(), " task(s)");
  enc.summary.resumed = true;
  StageRecord tr;
  tr.summary.name = "tokenizer";
  tr.summary.note = "given";
  tr.summary.resumed = true;
  po.records = {{"tokenizer", std::move(tr)}, {"tokenize", std::move(enc)}};
  po.total = &total;
  return PackAndPublish(env, po);
}

}  // namespace grist::release
