// The stages of `grist build` (release/internal/stages.h): each one's adapter over its library
// (the whole stage in one process, its `--stage` steps, the record it leaves), and the table.
#include "release/internal/stages.h"

#include <simdjson.h>

#include <algorithm>

#include "absl/strings/str_format.h"
#include "clean/run_clean.h"
#include "common/hash.h"
#include "common/json_writer.h"
#include "common/sysinfo.h"
#include "common/version.h"
#include "common/task_parts.h"
#include "dedup/dedup.h"

namespace grist::release::internal {
namespace {

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

// A clean task's list of the inputs as it listed them, for clean-merge to check against its own
// (WORK/clean/clean-inputs-IIIII-of-NNNNN.json, docs/formats/build.md): the record the merge
// writes names the inputs as the merge finds them, which must be those the tasks read.
constexpr char kInputsStem[] = "clean-inputs";
constexpr char kInputsSuffix[] = ".json";
constexpr std::string_view kInputsFormat = "grist-clean-task-inputs";

std::string TaskInputsJson(const std::vector<InputFile>& files,
                           const std::vector<std::optional<FileStat>>& stats) {
  JsonWriter w(0);
  w.BeginObject().Field("format", kInputsFormat).Field("version", int64_t{1});
  w.Key("inputs").BeginArray();
  for (size_t i = 0; i < files.size(); ++i) {
    w.BeginObject().Field("path", files[i].path);
    if (i < stats.size() && stats[i]) {
      AppendFileStatFields(&w, *stats[i]);
    } else {
      w.Field("bytes", files[i].size);
    }
    w.EndObject();
  }
  w.EndArray().EndObject();
  return w.Take() + "\n";
}

// Why the inputs a clean task listed (its TaskInputsJson text) are not `files` with `stats`, the
// merge's own listing ("" when they are).
std::string TaskInputsDiffer(const std::string& text, const std::vector<InputFile>& files,
                             const std::vector<std::optional<FileStat>>& stats) {
  simdjson::dom::parser p;
  simdjson::dom::element e;
  simdjson::padded_string ps(text);
  std::string_view format;
  simdjson::dom::array inputs;
  if (p.parse(ps).get(e) != simdjson::SUCCESS || e["format"].get(format) != simdjson::SUCCESS ||
      format != kInputsFormat || e["inputs"].get(inputs) != simdjson::SUCCESS) {
    return "not a list of a clean task's inputs";
  }
  struct Then {
    std::string path;
    FileStat stat;
    bool has_stat = false;
  };
  std::vector<Then> then;
  for (simdjson::dom::element in : inputs) {
    Then& t = then.emplace_back();
    std::string_view path;
    if (in["path"].get(path) != simdjson::SUCCESS ||
        in["bytes"].get(t.stat.size) != simdjson::SUCCESS) {
      return "a bad entry";
    }
    t.path = std::string(path);
    t.has_stat = ReadFileStatFields(in, &t.stat);
  }
  std::vector<std::string> now_paths, then_paths;
  for (const InputFile& f : files) now_paths.push_back(f.path);
  for (const Then& t : then) then_paths.push_back(t.path);
  if (now_paths != then_paths) {
    for (const std::string& n : now_paths) {
      if (std::find(then_paths.begin(), then_paths.end(), n) == then_paths.end()) {
        return absl::StrCat(n, " is listed now, not by the task");
      }
    }
    for (const std::string& n : then_paths) {
      if (std::find(now_paths.begin(), now_paths.end(), n) == now_paths.end()) {
        return absl::StrCat("the task read ", n, ", which is not listed now");
      }
    }
    return "the task listed the inputs in another order";
  }
  for (size_t i = 0; i < files.size(); ++i) {
    if (then[i].stat.size != files[i].size) {
      return absl::StrCat(files[i].path, " had ", then[i].stat.size,
                          " bytes when the task read it, ", files[i].size, " now");
    }
    if (then[i].has_stat && i < stats.size() && stats[i] && then[i].stat != *stats[i]) {
      return absl::StrCat(files[i].path, " was written or replaced since the task read it (its "
                          "modification or change time, or its inode, is another)");
    }
  }
  return "";
}

// Whether `name` (a clean output: part-IIIII-of-NNNNN-*, clean-report-IIIII-of-NNNNN.json,
// clean-inputs-IIIII-of-NNNNN.json) was written by a task of another task count than `tasks`.
bool OfOtherTaskCount(const std::string& name, int tasks) {
  for (const char* stem : {clean::kPartStem, clean::kReportStem, kInputsStem}) {
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
  ASSIGN_OR_RETURN(clean::CleanReport cr,
                   clean::RunCleanFiles(b.env, b.input_files, dir, b.bc.clean, run));
  // The inputs as this task listed them, unchanged while it read them, for the merge to check.
  RETURN_IF_ERROR(CheckInputSizes(b.env, b.input_files, &b.input_stats));
  RETURN_IF_ERROR(WriteFileAtomic(
      b.env, JoinPath(dir, TaskPartName(kInputsStem, run.task, run.tasks) + kInputsSuffix),
      TaskInputsJson(b.input_files, b.input_stats)));
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
    // The inputs the task read are those this merge lists (its record names them as they are).
    const std::string inputs_path =
        JoinPath(dir, TaskPartName(kInputsStem, t, tasks) + kInputsSuffix);
    auto inputs = ReadFileToString(b.env, inputs_path);
    if (!inputs.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat(inputs_path, ": clean task ", t, " of ", tasks, " has not finished"));
    }
    if (std::string why = TaskInputsDiffer(*inputs, b.input_files, b.input_stats); !why.empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          inputs_path, ": the inputs changed since clean task ", t, " of ", tasks, " read them (",
          why, "); run --stage clean (every task) again, then clean-merge"));
    }
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

absl::StatusOr<StageRecord> RunTokenizer(Build& b, Env* out) {
  Stopwatch sw;
  StageRecord r;
  if (!b.bc.tokenizer_model.empty()) {
    auto bytes = ReadFileToString(out, b.bc.tokenizer_model);
    if (!bytes.ok()) return Annotate(bytes.status(), "config key 'tokenizer.model'");
    // Checked already when BuildRelease loaded it, unless the file changed since.
    if (b.given_model == nullptr || b.given_model->model_bytes() != *bytes) {
      RETURN_IF_ERROR(tokenize::Tokenizer::FromBytes(*bytes, b.bc.tokenizer_model).status());
    }
    RETURN_IF_ERROR(WriteFileAtomic(out, b.ModelPath(), *bytes));
    r.summary.note = "pretrained";
    r.report_json = absl::StrCat("{\"pretrained\":true,\"model_bytes\":", bytes->size(), "}");
  } else {
    ASSIGN_OR_RETURN(auto tr, tokenize::TrainTokenizer(out, b.docs, b.ModelPath(), b.bc.train,
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

absl::StatusOr<tokenize::EncodeReport> Encode(Build& b, Env* out, const RunOptions& run) {
  tokenize::EncodeStageOptions eo = b.bc.encode;
  eo.model_path = b.ModelPath();
  // The build's tokenizer, loaded once (the given model's encoder tables built while the stages
  // before ran: BuildRelease) and used again by pack.
  ASSIGN_OR_RETURN(tokenize::Tokenizer * tok, b.Tokenizer());
  return tokenize::RunEncode(out, b.docs, b.TokensDir(), eo, run, tok);
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

}  // namespace

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

// The tokenize stage's note: which encoder ran (EncodeReport::engine), as the summary table
// shows it: "grist encoder", "grist encoder, chunk cache", or "SentencePiece: <why>".
std::string EngineNote(const std::string& engine) {
  if (engine == "grist") return "grist encoder";
  if (engine == "grist (chunk cache)") return "grist encoder, chunk cache";
  constexpr std::string_view kSpm = "sentencepiece (";
  if (engine.rfind(kSpm, 0) == 0 && engine.back() == ')') {
    return absl::StrCat("SentencePiece: ",
                        engine.substr(kSpm.size(), engine.size() - kSpm.size() - 1));
  }
  return engine;
}

StageRecord EncodeRecord(const tokenize::EncodeReport& er) {
  StageRecord r;
  r.summary.name = "tokenize";
  CountsSummary(er.counts, &r.summary);
  r.summary.bytes_in = er.counts.bytes_in;
  r.summary.tokens = er.tokens;
  r.summary.seconds = er.seconds;
  r.summary.note = EngineNote(er.engine);
  r.report_json = er.ToJson();
  return r;
}

// ---- What a stage reads ----

namespace {
// A stage's report among its outputs (*.json, which holds times): left out of what the stages
// after it read.
bool IsReport(const StageOutput& o) {
  return o.path.size() >= 5 && o.path.compare(o.path.size() - 5, 5, ".json") == 0;
}
}  // namespace

void Build::StartInputHashing() {
  if (input_sums || input_hasher.joinable()) return;
  input_hasher = std::jthread(
      [this] { input_sums = HashInputs(env, input_files, opts.run.threads, sums.get()); });
}

void Build::StartCompletion(const StageDef& s, StageRecord r,
                            std::unique_ptr<DeferredSyncEnv> outputs) {
  Completion* before = completing.empty() ? nullptr : completing.back().get();
  Completion* c = completing.emplace_back(std::make_unique<Completion>()).get();
  c->stage = &s;
  c->record = std::move(r);
  c->outputs = std::move(outputs);
  c->thread = std::jthread([this, c, before] {
    if (before != nullptr) before->done.WaitForNotification();
    if (before != nullptr && !before->status.ok()) {
      c->status = before->status;
    } else {
      c->status = Complete(*c->stage, c->record, c->outputs.get());
      // Read by the next completion (its Upstream), which waits for `done`; by this thread's
      // caller only after JoinCompletion.
      if (c->status.ok()) records[c->stage->name] = c->record;
    }
    c->done.Notify();
  });
}

absl::Status Build::JoinCompletion() {
  for (std::unique_ptr<Completion>& c : completing) {
    c->thread.join();
    if (!c->status.ok() && completion_error.ok()) completion_error = c->status;
  }
  completing.clear();
  return completion_error;
}

absl::StatusOr<const std::vector<shard::FileInfo>*> Build::InputSums() {
  if (input_hasher.joinable()) input_hasher.join();
  if (!input_sums) input_sums = HashInputs(env, input_files, opts.run.threads, sums.get());
  if (!input_sums->ok()) return input_sums->status();
  return &**input_sums;
}

absl::StatusOr<std::string> Build::Upstream(const StageDef& s) {
  ASSIGN_OR_RETURN(const std::vector<shard::FileInfo>* inputs, InputSums());
  JsonWriter w(0);
  w.BeginObject().Key("inputs").BeginArray();
  for (const shard::FileInfo& f : *inputs) {
    w.BeginObject().Field("path", f.path).Field("bytes", f.bytes);
    w.Field("xxh3_128", f.xxh3_128.ToHex()).EndObject();
  }
  w.EndArray();
  if (s.reads_given_model && given_model_file) {
    const shard::FileInfo& m = *given_model_file;
    w.Key("tokenizer_model").BeginObject().Field("path", m.path).Field("bytes", m.bytes);
    w.Field("xxh3_128", m.xxh3_128.ToHex()).EndObject();
  }
  w.Key("stages").BeginArray();
  for (const StageDef& d : Stages()) {
    if (d.name == s.name) break;
    const auto it = records.find(d.name);
    if (it == records.end()) continue;
    w.BeginObject().Field("stage", d.name).Key("outputs").BeginArray();
    for (const StageOutput& o : it->second.outputs) {
      if (IsReport(o)) continue;
      w.BeginObject().Field("path", o.path).Field("bytes", o.bytes);
      w.Field(kChecksumKey, o.xxh3_128_pieces).EndObject();
    }
    w.EndArray().EndObject();
  }
  w.EndArray().EndObject();
  return Hash128Of(w.Take()).ToHex();
}

absl::StatusOr<std::string> Build::PackUpstream() const {
  const auto it = records.find("tokenize");
  if (it == records.end()) return absl::InternalError("build: pack before tokenize");
  JsonWriter w(0);
  w.BeginObject().Field("grist_version", GRIST_VERSION);
  w.Field("tokenize_upstream_xxh3_128", it->second.upstream).Key("tokenize_outputs").BeginArray();
  for (const StageOutput& o : it->second.outputs) {
    if (IsReport(o)) continue;
    w.BeginObject().Field("path", o.path).Field("bytes", o.bytes);
    w.Field(kChecksumKey, o.xxh3_128_pieces).EndObject();
  }
  w.EndArray().EndObject();
  return Hash128Of(w.Take()).ToHex();
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
      s.run = [](Build& b, Env* out) -> absl::StatusOr<StageRecord> {
        ASSIGN_OR_RETURN(auto cr, clean::RunCleanFiles(out, b.input_files, b.Dir("clean"),
                                                       b.bc.clean, OneTask(b.opts.run)));
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
      s.run = [](Build& b, Env* out) -> absl::StatusOr<StageRecord> {
        RETURN_IF_ERROR(NeedDocuments(b));
        ASSIGN_OR_RETURN(auto dr, dedup::RunDedup(out, b.docs, b.Dir("dedup"), b.bc.dedup,
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
      s.reads_given_model = true;
      s.run = RunTokenizer;
      s.steps = {Step{"tokenizer", false, true,
                      [](Build& b, const RunOptions&) { return RunTokenizer(b, b.env); }}};
      v->push_back(std::move(s));
    }
    {
      StageDef s;
      s.name = "tokenize";
      s.output_root = "tokens";
      s.enabled = [](const BuildConfig&) { return true; };
      s.counted = true;
      s.run = [](Build& b, Env* out) -> absl::StatusOr<StageRecord> {
        ASSIGN_OR_RETURN(auto er, Encode(b, out, OneTask(b.opts.run)));
        return EncodeRecord(er);
      };
      s.steps = {Step{"tokenize", true, false,
                      [](Build& b, const RunOptions& run) -> absl::StatusOr<StageRecord> {
                        ASSIGN_OR_RETURN(auto er, Encode(b, b.env, run));
                        StageRecord r = EncodeRecord(er);
                        r.summary.note = absl::StrCat(TaskNote(run), "; ", r.summary.note);
                        return r;
                      }},
                 Step{"tokenize-merge", false, true, TokenizeMerge}};
      v->push_back(std::move(s));
    }
    return v;
  }();
  return *stages;
}

}  // namespace grist::release::internal
