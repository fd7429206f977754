#include "dedup/dedup.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <queue>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "common/config.h"
#include "common/env.h"
#include "common/hash.h"
#include "common/json_writer.h"
#include "common/ordered.h"
#include "common/progress.h"
#include "common/rng.h"
#include "common/status_macros.h"
#include "common/sysinfo.h"
#include "common/thread_pool.h"
#include "dedup/dedup_format.h"
#include "dedup/internal/files.h"

namespace grist::dedup {

using format::BucketRecord;
using format::ClusterRecord;
using format::EdgeRecord;
using format::Kind;
using format::LineRecord;
using format::PairKind;
using format::PairRecord;
using format::SigRecord;
using internal::FileHeader;
using internal::FileReader;
using internal::FileWriter;
using internal::FindTaskFiles;
using internal::TaskFileName;

// ---------------------------------------------------------------------------------------------
// Options

namespace {

absl::StatusOr<ExactNormalize> ParseExactNormalize(const std::string& s) {
  if (s == "none") return ExactNormalize::kNone;
  if (s == "whitespace") return ExactNormalize::kWhitespace;
  if (s == "lower") return ExactNormalize::kLower;
  return absl::InvalidArgumentError(absl::StrCat(
      "dedup.exact_normalize: expected none, whitespace or lower, got '", s, "'"));
}

const char* ExactNormalizeName(ExactNormalize m) {
  switch (m) {
    case ExactNormalize::kNone:
      return "none";
    case ExactNormalize::kWhitespace:
      return "whitespace";
    case ExactNormalize::kLower:
      return "lower";
  }
  return "?";
}

bool IsAsciiSpace(unsigned char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

}  // namespace

std::string NormalizeForExact(std::string_view text, ExactNormalize mode) {
  if (mode == ExactNormalize::kNone) return std::string(text);
  std::string out;
  out.reserve(text.size());
  bool pending_space = false;
  for (unsigned char c : text) {
    if (IsAsciiSpace(c)) {
      pending_space = !out.empty();
      continue;
    }
    if (pending_space) out.push_back(' ');
    pending_space = false;
    if (mode == ExactNormalize::kLower && c >= 'A' && c <= 'Z') c = static_cast<unsigned char>(c + 32);
    out.push_back(static_cast<char>(c));
  }
  return out;
}

absl::StatusOr<DedupOptions> DedupOptions::FromConfig(const Config& config) {
  DedupOptions o;
  ASSIGN_OR_RETURN(o.exact, config.GetBool("dedup.exact", o.exact));
  ASSIGN_OR_RETURN(std::string norm, config.GetString("dedup.exact_normalize", "whitespace"));
  ASSIGN_OR_RETURN(o.exact_normalize, ParseExactNormalize(norm));
  ASSIGN_OR_RETURN(o.near, config.GetBool("dedup.near", o.near));
  ASSIGN_OR_RETURN(std::string kind, config.GetString("dedup.shingle", "word"));
  if (kind == "word") {
    o.shingle.kind = ShingleKind::kWord;
  } else if (kind == "char") {
    o.shingle.kind = ShingleKind::kChar;
  } else {
    return absl::InvalidArgumentError(absl::StrCat(config.source(), ": key 'dedup.shingle': expected "
                                                   "word or char, got '", kind, "'"));
  }
  ASSIGN_OR_RETURN(int64_t ngram, config.GetInt("dedup.ngram", o.shingle.n));
  o.shingle.n = static_cast<int>(ngram);
  ASSIGN_OR_RETURN(int64_t num_perm, config.GetInt("dedup.num_perm", o.num_perm));
  o.num_perm = static_cast<int>(num_perm);
  const bool auto_lsh =
      config.Has("dedup.threshold") && !config.Has("dedup.bands") && !config.Has("dedup.rows");
  ASSIGN_OR_RETURN(int64_t bands, config.GetInt("dedup.bands", auto_lsh ? 0 : o.bands));
  ASSIGN_OR_RETURN(int64_t rows, config.GetInt("dedup.rows", auto_lsh ? 0 : o.rows));
  o.bands = static_cast<int>(bands);
  o.rows = static_cast<int>(rows);
  ASSIGN_OR_RETURN(o.threshold, config.GetDouble("dedup.threshold", o.threshold));
  ASSIGN_OR_RETURN(o.verify, config.GetBool("dedup.verify", o.verify));
  ASSIGN_OR_RETURN(int64_t seed, config.GetInt("dedup.seed", static_cast<int64_t>(o.seed)));
  o.seed = static_cast<uint64_t>(seed);
  ASSIGN_OR_RETURN(o.line_dedup, config.GetBool("dedup.line_dedup", o.line_dedup));
  ASSIGN_OR_RETURN(int64_t mem_mb, config.GetInt("dedup.memory_limit_mb",
                                                 static_cast<int64_t>(o.memory_limit >> 20)));
  if (mem_mb <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(config.source(), ": key 'dedup.memory_limit_mb': must be positive"));
  }
  o.memory_limit = static_cast<uint64_t>(mem_mb) << 20;
  ASSIGN_OR_RETURN(o.work_dir, config.GetString("dedup.work_dir", ""));
  ASSIGN_OR_RETURN(o.keep_work, config.GetBool("dedup.keep_work", false));
  ASSIGN_OR_RETURN(o.input.text_field, config.GetString("dedup.text_field", o.input.text_field));
  ASSIGN_OR_RETURN(o.input.txt_mode, config.GetString("dedup.txt_mode", o.input.txt_mode));
  RETURN_IF_ERROR(o.Validate());
  return o;
}

absl::Status DedupOptions::Validate() const {
  auto bad = [](std::string what) { return absl::InvalidArgumentError("dedup: " + what); };
  if (shingle.n < 1 || shingle.n > 1000) return bad(absl::StrCat("ngram must be in [1, 1000], got ", shingle.n));
  if (num_perm < 1 || num_perm > 4096) return bad(absl::StrCat("num_perm must be in [1, 4096], got ", num_perm));
  if (!(threshold > 0.0 && threshold <= 1.0)) return bad(absl::StrCat("threshold must be in (0, 1], got ", threshold));
  if ((bands == 0) != (rows == 0)) return bad("set both bands and rows, or neither (automatic)");
  if (bands < 0 || rows < 0) return bad("bands and rows must be positive");
  if (bands > 0 && static_cast<int64_t>(bands) * rows > num_perm) {
    return bad(absl::StrCat("bands x rows = ", bands, " x ", rows, " exceeds num_perm ", num_perm));
  }
  if (bands == 0 && threshold >= 1.0) return bad("automatic bands x rows needs a threshold below 1");
  if (memory_limit < (1ull << 20)) return bad("memory limit must be at least 1 MB");
  if (split_bytes == 0) return bad("split_bytes must be positive");
  if (input.txt_mode != "file" && input.txt_mode != "blocks") {
    return bad(absl::StrCat("txt_mode must be file or blocks, got '", input.txt_mode, "'"));
  }
  return absl::OkStatus();
}

DedupOptions DedupOptions::Resolved() const {
  DedupOptions o = *this;
  // Splits small enough that the splits in flight fit a quarter of a small budget. Results do not
  // depend on the split plan (keys order documents as the input does).
  o.split_bytes = std::min<uint64_t>(o.split_bytes, std::max<uint64_t>(64 << 10, o.memory_limit / 32));
  if (o.bands == 0 || o.rows == 0) {
    LshParams p = OptimalLshParams(o.threshold, o.num_perm);
    o.bands = p.bands;
    o.rows = p.rows;
  }
  return o;
}

// ---------------------------------------------------------------------------------------------
// Report

std::string DedupReport::ToJson() const {
  JsonWriter w(2);
  w.BeginObject();
  w.Field("docs_in", counts.docs_in).Field("docs_kept", counts.docs_out);
  w.Field("docs_removed", counts.docs_removed).Field("docs_rejected", counts.docs_rejected);
  w.Field("bytes_in", counts.bytes_in).Field("bytes_out", counts.bytes_out);
  w.Field("removed_exact", removed_exact).Field("removed_near", removed_near);
  w.Field("removed_lines", removed_lines).Field("lines_removed", lines_removed);
  w.Field("clusters", clusters);
  w.Key("cluster_sizes").BeginObject();
  for (const auto& [size, n] : cluster_sizes) w.Field(std::to_string(size), n);
  w.EndObject();
  w.Field("candidate_pairs", candidate_pairs).Field("exact_pairs", exact_pairs);
  w.Field("verified_pairs", verified_pairs).Field("duplicated_lines", duplicated_lines);
  w.Field("verify_passes", verify_passes).Field("spilled_set_bytes", spilled_set_bytes);
  w.Field("merge_rounds", merge_rounds);
  w.Field("memory_limit_bytes", memory_limit);
  w.Field("num_perm", num_perm).Field("bands", bands).Field("rows", rows);
  w.Field("threshold", threshold);
  w.Key("stages").BeginArray();
  for (const StageTiming& s : stages) {
    w.BeginObject().Field("stage", s.stage).Field("tasks", s.tasks).Field("seconds", s.seconds);
    w.Field("task_seconds_total", s.cpu_seconds).Field("input_bytes", s.input_bytes);
    w.Field("peak_rss_bytes", s.peak_rss_bytes).EndObject();
  }
  w.EndArray();
  w.Field("peak_rss_bytes", peak_rss_bytes).Field("simd_target", simd_target);
  w.EndObject();
  return w.str();
}

// ---------------------------------------------------------------------------------------------
// Stage plumbing

absl::StatusOr<DedupStage> ParseDedupStage(const std::string& name) {
  for (DedupStage s : {DedupStage::kSignatures, DedupStage::kBuckets, DedupStage::kClusters,
                       DedupStage::kMerge, DedupStage::kFilter, DedupStage::kReport}) {
    if (name == DedupStageName(s)) return s;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown dedup stage '", name,
      "' (expected signatures, buckets, clusters, merge, filter or report)"));
}

const char* DedupStageName(DedupStage stage) {
  switch (stage) {
    case DedupStage::kSignatures:
      return "signatures";
    case DedupStage::kBuckets:
      return "buckets";
    case DedupStage::kClusters:
      return "clusters";
    case DedupStage::kMerge:
      return "merge";
    case DedupStage::kFilter:
      return "filter";
    case DedupStage::kReport:
      return "report";
  }
  return "?";
}

bool StageIsParallel(DedupStage stage) {
  return stage != DedupStage::kMerge && stage != DedupStage::kReport;
}

namespace {

enum StatSlot : size_t {
  kWallUs,
  kPeakRss,
  kInputBytes,
  kDocsIn,
  kDocsOut,
  kDocsRejected,
  kDocsRemoved,
  kBytesIn,
  kBytesOut,
  kRemovedExact,
  kRemovedNear,
  kRemovedLines,
  kLinesRemoved,
  kClusters,
  kCandidatePairs,
  kExactPairs,
  kVerifiedPairs,
  kDupLines,
  kVerifyPasses,
  kSpilledSetBytes,
  kMergeRounds,
  kNumSlots,
};
// After kNumSlots: (cluster size, count) pairs (merge stage).

struct Ctx {
  Env* env;
  DedupOptions opt;  // resolved
  RunOptions run;
  std::string output_dir;
  std::string work;
  std::vector<InputFile> files;
  std::vector<InputSplit> splits;
  uint64_t fingerprint = 0;
  std::unique_ptr<ThreadPool> pool;

  std::string Dir(const char* sub) const { return JoinPath(work, sub); }
  FileHeader Header(Kind kind, uint32_t record_size, uint32_t aux = 0) const {
    FileHeader h;
    h.kind = kind;
    h.record_size = record_size;
    h.aux = aux;
    h.task = static_cast<uint32_t>(run.task);
    h.tasks = static_cast<uint32_t>(run.tasks);
    h.fingerprint = fingerprint;
    return h;
  }
  absl::Status CheckFingerprint(const FileReader& r, const std::string& path) const {
    if (r.header().fingerprint != fingerprint) {
      return absl::FailedPreconditionError(absl::StrCat(
          path, " was written for different inputs or dedup options; clear the work directory ",
          work, " or use the options of that run"));
    }
    return absl::OkStatus();
  }
};

uint64_t OptionsFingerprint(const DedupOptions& o) {
  std::string s = absl::StrCat(
      o.exact, "|", ExactNormalizeName(o.exact_normalize), "|", o.near, "|",
      static_cast<int>(o.shingle.kind), "|", o.shingle.n, "|", o.num_perm, "|", o.bands, "|",
      o.rows, "|", absl::StrFormat("%.17g", o.threshold), "|", o.verify, "|", o.seed, "|",
      o.line_dedup, "|", o.split_bytes, "|", o.input.text_field, "|", o.input.txt_mode, "|",
      o.input.max_record_bytes);
  return Hash64(s);
}

absl::StatusOr<Ctx> MakeCtx(Env* env, const std::vector<std::string>& inputs,
                            const std::string& output_dir, const DedupOptions& options,
                            const RunOptions& run) {
  RETURN_IF_ERROR(options.Validate());
  if (run.tasks < 1 || run.task < 0 || run.task >= run.tasks) {
    return absl::InvalidArgumentError(
        absl::StrCat("dedup: task ", run.task, " is not in [0, ", run.tasks, ")"));
  }
  Ctx c;
  c.env = env;
  c.opt = options.Resolved();
  c.run = run;
  c.output_dir = output_dir;
  c.work = options.work_dir.empty() ? JoinPath(output_dir, ".dedup-work") : options.work_dir;
  ASSIGN_OR_RETURN(c.files, ListInputs(env, inputs));
  c.pool = std::make_unique<ThreadPool>(run.threads);
  ASSIGN_OR_RETURN(c.splits, PlanSplits(env, c.files, c.opt.split_bytes, c.pool.get()));
  if (c.splits.size() >= (uint64_t{1} << (64 - format::kOrdinalBits))) {
    return absl::InvalidArgumentError("dedup: too many input splits");
  }
  Hasher64 h(OptionsFingerprint(c.opt));
  for (const InputFile& f : c.files) {
    h.Update(f.path);
    h.Update(&f.size, sizeof(f.size));
    h.Update("\0", 1);
  }
  for (const InputSplit& s : c.splits) {
    uint64_t v[3] = {s.file_index, s.begin, s.end};
    h.Update(v, sizeof(v));
  }
  c.fingerprint = h.Digest();
  return c;
}

// How many input splits the stages that read documents (signatures, the verification spill,
// filter) keep in flight: two per thread, but at most a quarter of the budget's worth of input
// (split_bytes each), and at least one.
size_t SplitWindow(const Ctx& c, int per_thread) {
  const uint64_t by_budget = c.opt.memory_limit / 4 / c.opt.split_bytes;
  const uint64_t by_threads = static_cast<uint64_t>(per_thread) * std::max(1, c.pool->size());
  return static_cast<size_t>(std::max<uint64_t>(1, std::min(by_budget, by_threads)));
}

// Global indices of the splits task `task` of `tasks` processes.
std::vector<size_t> TaskSplitIndices(const Ctx& c, int task, int tasks) {
  std::vector<InputSplit> mine = SelectTaskSplits(c.splits, task, tasks);
  std::vector<size_t> out;
  size_t j = 0;
  for (size_t i = 0; i < c.splits.size() && j < mine.size(); ++i) {
    const InputSplit& s = c.splits[i];
    if (s.file_index == mine[j].file_index && s.begin == mine[j].begin && s.end == mine[j].end) {
      out.push_back(i);
      ++j;
    }
  }
  return out;
}

inline uint64_t MakeKey(size_t split, uint64_t ordinal) {
  return (static_cast<uint64_t>(split) << format::kOrdinalBits) | ordinal;
}
inline size_t SplitOfKey(uint64_t key) { return static_cast<size_t>(key >> format::kOrdinalBits); }

inline uint64_t Partition(uint64_t tag, uint64_t hi, uint64_t lo, int parts) {
  uint64_t x = SplitMix64(SplitMix64(tag ^ 0x9e37) ^ hi) ^ lo;
  return SplitMix64(x) % static_cast<uint64_t>(parts);
}

// Reads every document of split `split_index`, calling fn(key, doc).
template <typename Fn>
absl::Status ForEachDoc(const Ctx& c, size_t split_index, Fn fn) {
  const InputSplit& split = c.splits[split_index];
  ASSIGN_OR_RETURN(auto reader,
                   OpenRecordReader(c.env, c.files[split.file_index], split, c.opt.input));
  Document doc;
  uint64_t ordinal = 0;
  while (true) {
    ASSIGN_OR_RETURN(bool more, reader->Next(&doc));
    if (!more) break;
    if (ordinal >= (uint64_t{1} << format::kOrdinalBits)) {
      return absl::ResourceExhaustedError(
          absl::StrCat(c.files[split.file_index].path, ": too many records in one split"));
    }
    RETURN_IF_ERROR(fn(MakeKey(split_index, ordinal), doc));
    ++ordinal;
  }
  return absl::OkStatus();
}

// Removes outputs "<stem>-IIIII-of-MMMMM.bin" of an earlier run of this stage with another task
// count M != tasks (they would make the next stage's task set ambiguous).
absl::Status RemoveStaleTaskFiles(Env* env, const std::string& dir, const std::string& stem,
                                  int tasks) {
  if (!env->IsDirectory(dir)) return absl::OkStatus();
  ASSIGN_OR_RETURN(std::vector<std::string> names, env->ListDir(dir));
  const std::string mine = absl::StrFormat("-of-%05d.bin", tasks);
  for (const std::string& n : names) {
    if (n.rfind(stem + "-", 0) != 0 || n.size() != stem.size() + 20) continue;
    if (n.compare(n.size() - mine.size(), mine.size(), mine) == 0) continue;
    RETURN_IF_ERROR(env->RemoveFile(JoinPath(dir, n)));
  }
  return absl::OkStatus();
}

std::vector<uint64_t> NewStats() { return std::vector<uint64_t>(kNumSlots, 0); }

absl::Status WriteStats(const Ctx& c, DedupStage stage, std::vector<uint64_t> stats,
                        const Stopwatch& sw) {
  stats[kWallUs] = static_cast<uint64_t>(sw.Seconds() * 1e6);
  stats[kPeakRss] = PeakRssBytes();
  std::string dir = c.Dir("stats");
  RETURN_IF_ERROR(c.env->CreateDirs(dir));
  RETURN_IF_ERROR(RemoveStaleTaskFiles(c.env, dir, DedupStageName(stage), c.run.tasks));
  ASSIGN_OR_RETURN(auto w, FileWriter::Open(c.env,
                                            JoinPath(dir, TaskFileName(DedupStageName(stage),
                                                                       c.run.task, c.run.tasks)),
                                            c.Header(Kind::kStats, 8)));
  for (uint64_t v : stats) RETURN_IF_ERROR(w->Add(v));
  return w->Finish();
}

absl::StatusOr<std::vector<std::vector<uint64_t>>> ReadStats(const Ctx& c, DedupStage stage) {
  ASSIGN_OR_RETURN(std::vector<std::string> paths,
                   FindTaskFiles(c.env, c.Dir("stats"), DedupStageName(stage), DedupStageName(stage)));
  std::vector<std::vector<uint64_t>> out;
  for (const std::string& p : paths) {
    ASSIGN_OR_RETURN(auto r, FileReader::Open(c.env, p, Kind::kStats, 8));
    RETURN_IF_ERROR(c.CheckFingerprint(*r, p));
    ASSIGN_OR_RETURN(auto v, FileReader::ReadAll<uint64_t>(c.env, p, Kind::kStats));
    if (v.size() < kNumSlots) return absl::DataLossError(absl::StrCat(p, ": too few counters"));
    out.push_back(std::move(v));
  }
  return out;
}

// Opens every task output `stem` of the producing stage in `dir`, checking the fingerprint.
absl::StatusOr<std::vector<std::unique_ptr<FileReader>>> OpenAll(const Ctx& c, const char* sub,
                                                                const std::string& stem,
                                                                DedupStage producer, Kind kind,
                                                                uint32_t record_size) {
  ASSIGN_OR_RETURN(std::vector<std::string> paths,
                   FindTaskFiles(c.env, c.Dir(sub), stem, DedupStageName(producer)));
  std::vector<std::unique_ptr<FileReader>> out;
  for (const std::string& p : paths) {
    // The fingerprint first: files of a run with other options differ in record size too.
    ASSIGN_OR_RETURN(auto r, FileReader::Open(c.env, p, kind, 0));
    RETURN_IF_ERROR(c.CheckFingerprint(*r, p));
    if (record_size != 0 && r->header().record_size != record_size) {
      return absl::DataLossError(absl::StrCat(p, ": corrupt dedup intermediate file: record size ",
                                              r->header().record_size, ", expected ", record_size));
    }
    out.push_back(std::move(r));
  }
  return out;
}

uint32_t SigRecordSize(const Ctx& c) {
  return static_cast<uint32_t>(sizeof(SigRecord) + 8 * static_cast<size_t>(c.opt.num_perm));
}

// Calls fn(line) for each '\n'-terminated line of text (the last one may lack the newline). The
// view excludes the newline.
template <typename Fn>
void ForEachLine(std::string_view text, Fn fn) {
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    size_t end = nl == std::string_view::npos ? text.size() : nl;
    fn(text.substr(pos, end - pos), nl != std::string_view::npos);
    pos = end + 1;
  }
}

bool IsBlank(std::string_view line) {
  for (unsigned char ch : line) {
    if (!IsAsciiSpace(ch)) return false;
  }
  return true;
}

// ---------------------------------------------------------------------------------------------
// signatures

absl::Status RunSignatures(Ctx& c) {
  Stopwatch sw;
  std::vector<uint64_t> stats = NewStats();
  const std::string dir = c.Dir("sig");
  RETURN_IF_ERROR(c.env->CreateDirs(dir));
  for (const char* stem : {"sig", "ids", "lines"}) {
    RETURN_IF_ERROR(RemoveStaleTaskFiles(c.env, dir, stem, c.run.tasks));
  }
  const uint32_t rec_size = SigRecordSize(c);
  ASSIGN_OR_RETURN(auto sig_w, FileWriter::Open(c.env, JoinPath(dir, TaskFileName("sig", c.run.task, c.run.tasks)),
                                                c.Header(Kind::kSignatures, rec_size, c.opt.num_perm)));
  ASSIGN_OR_RETURN(auto ids_w, FileWriter::Open(c.env, JoinPath(dir, TaskFileName("ids", c.run.task, c.run.tasks)),
                                                c.Header(Kind::kIds, 0)));
  std::unique_ptr<FileWriter> lines_w;
  if (c.opt.line_dedup) {
    ASSIGN_OR_RETURN(lines_w, FileWriter::Open(c.env, JoinPath(dir, TaskFileName("lines", c.run.task, c.run.tasks)),
                                               c.Header(Kind::kLineHashes, sizeof(LineRecord))));
  }
  const std::vector<size_t> mine = TaskSplitIndices(c, c.run.task, c.run.tasks);
  uint64_t total_bytes = 0;
  for (size_t i : mine) total_bytes += c.splits[i].bytes;
  Progress progress("dedup signatures", total_bytes, Progress::Unit::kBytes, !c.run.progress);
  const MinHasher hasher(c.opt.num_perm, c.opt.seed);

  struct SplitOut {
    std::string sigs;
    std::vector<std::pair<uint64_t, std::string>> ids;
    std::vector<LineRecord> lines;
    uint64_t docs = 0, bad = 0, bytes = 0;
  };
  const size_t window = SplitWindow(c, 2);
  RETURN_IF_ERROR(OrderedParallel<SplitOut>(
      c.pool.get(), mine.size(), window,
      [&](size_t i) -> absl::StatusOr<SplitOut> {
        SplitOut out;
        std::vector<uint64_t> shingles;
        std::string scratch;
        std::vector<uint64_t> sig(c.opt.num_perm);
        std::vector<std::pair<uint64_t, uint64_t>> doc_lines;
        RETURN_IF_ERROR(ForEachDoc(c, mine[i], [&](uint64_t key, const Document& doc) -> absl::Status {
          ++out.docs;
          out.bytes += doc.input_bytes;
          progress.Add(doc.input_bytes);
          SigRecord r{};
          r.key = key;
          out.ids.emplace_back(key, doc.id());
          if (!doc.error.empty()) {
            ++out.bad;
            r.flags = format::kFlagBadRecord;
            std::fill(sig.begin(), sig.end(), ~uint64_t{0});
          } else {
            Hash128 h = Hash128Of(NormalizeForExact(doc.text, c.opt.exact_normalize));
            r.exact_hi = h.high;
            r.exact_lo = h.low;
            if (c.opt.near) {
              ShingleHashesUnordered(doc.text, c.opt.shingle, &shingles, &scratch);
            } else {
              shingles.clear();
            }
            r.shingles = static_cast<uint32_t>(std::min<size_t>(shingles.size(), UINT32_MAX));
            if (shingles.empty()) {
              r.flags |= format::kFlagNoShingles;
              std::fill(sig.begin(), sig.end(), ~uint64_t{0});
            } else {
              hasher.Compute(shingles, sig.data());
            }
            if (c.opt.line_dedup) {
              doc_lines.clear();
              ForEachLine(doc.text, [&](std::string_view line, bool) {
                if (IsBlank(line)) return;
                Hash128 lh = Hash128Of(line);
                doc_lines.emplace_back(lh.high, lh.low);
              });
              std::sort(doc_lines.begin(), doc_lines.end());
              doc_lines.erase(std::unique(doc_lines.begin(), doc_lines.end()), doc_lines.end());
              for (const auto& [hi, lo] : doc_lines) out.lines.push_back(LineRecord{hi, lo, key});
            }
          }
          out.sigs.append(reinterpret_cast<const char*>(&r), sizeof(r));
          out.sigs.append(reinterpret_cast<const char*>(sig.data()), 8 * sig.size());
          return absl::OkStatus();
        }));
        return out;
      },
      [&](size_t, SplitOut&& out) -> absl::Status {
        const size_t n = out.sigs.size() / rec_size;
        for (size_t k = 0; k < n; ++k) {
          RETURN_IF_ERROR(sig_w->AddRecord(out.sigs.data() + k * rec_size, rec_size));
        }
        for (const auto& [key, id] : out.ids) RETURN_IF_ERROR(ids_w->AddId(key, id));
        if (lines_w) {
          for (const LineRecord& l : out.lines) RETURN_IF_ERROR(lines_w->Add(l));
        }
        stats[kDocsIn] += out.docs;
        stats[kDocsRejected] += out.bad;
        stats[kBytesIn] += out.bytes;
        stats[kInputBytes] += out.bytes;
        return absl::OkStatus();
      }));
  RETURN_IF_ERROR(sig_w->Finish());
  RETURN_IF_ERROR(ids_w->Finish());
  if (lines_w) RETURN_IF_ERROR(lines_w->Finish());
  progress.Finish();
  return WriteStats(c, DedupStage::kSignatures, std::move(stats), sw);
}

// ---------------------------------------------------------------------------------------------
// buckets

absl::Status RunBuckets(Ctx& c) {
  Stopwatch sw;
  std::vector<uint64_t> stats = NewStats();
  const int J = c.run.task, M = c.run.tasks;
  const std::string dir = c.Dir("buckets");
  const std::string tmp = c.Dir("tmp");
  RETURN_IF_ERROR(c.env->CreateDirs(dir));
  RETURN_IF_ERROR(c.env->CreateDirs(tmp));
  for (const char* stem : {"pairs", "duplines"}) {
    RETURN_IF_ERROR(RemoveStaleTaskFiles(c.env, dir, stem, M));
  }
  const uint32_t rec_size = SigRecordSize(c);
  ASSIGN_OR_RETURN(auto sig_readers, OpenAll(c, "sig", "sig", DedupStage::kSignatures,
                                             Kind::kSignatures, rec_size));
  // A quarter of the budget for the bucket records, an eighth for the pairs (the rest is the
  // process itself, the readers and writers, and the allocator's slack).
  internal::ExternalSorter<BucketRecord> sorter(
      c.env, tmp, absl::StrFormat("buckets-%05d", J), c.opt.memory_limit / 4);
  std::vector<char> rec(rec_size);
  const int bands = c.opt.near ? c.opt.bands : 0;
  const int rows = c.opt.rows;
  for (auto& r : sig_readers) {
    while (true) {
      ASSIGN_OR_RETURN(bool more, r->Next(rec.data()));
      if (!more) break;
      stats[kInputBytes] += rec_size;
      SigRecord s;
      std::memcpy(&s, rec.data(), sizeof(s));
      if (s.flags & format::kFlagBadRecord) continue;
      if (c.opt.exact && Partition(0, s.exact_hi, s.exact_lo, M) == static_cast<uint64_t>(J)) {
        RETURN_IF_ERROR(sorter.Add(BucketRecord{0, s.exact_hi, s.exact_lo, s.key}));
      }
      if (s.flags & format::kFlagNoShingles) continue;
      const char* sig = rec.data() + sizeof(SigRecord);
      for (int b = 0; b < bands; ++b) {
        uint64_t h = Hash64(sig + 8 * static_cast<size_t>(b) * rows, 8 * static_cast<size_t>(rows),
                            static_cast<uint64_t>(b));
        uint64_t tag = 2 + static_cast<uint64_t>(b);
        if (Partition(tag, 0, h, M) == static_cast<uint64_t>(J)) {
          RETURN_IF_ERROR(sorter.Add(BucketRecord{tag, 0, h, s.key}));
        }
      }
    }
  }
  if (c.opt.line_dedup) {
    ASSIGN_OR_RETURN(auto line_readers, OpenAll(c, "sig", "lines", DedupStage::kSignatures,
                                                Kind::kLineHashes, sizeof(LineRecord)));
    for (auto& r : line_readers) {
      LineRecord l;
      while (true) {
        ASSIGN_OR_RETURN(bool more, r->Next(&l));
        if (!more) break;
        stats[kInputBytes] += sizeof(l);
        if (Partition(1, l.hi, l.lo, M) == static_cast<uint64_t>(J)) {
          RETURN_IF_ERROR(sorter.Add(BucketRecord{1, l.hi, l.lo, l.doc}));
        }
      }
    }
  }
  internal::ExternalSorter<PairRecord> pairs(c.env, tmp, absl::StrFormat("pairs-%05d", J),
                                             c.opt.memory_limit / 8);
  ASSIGN_OR_RETURN(auto lines_w, FileWriter::Open(c.env, JoinPath(dir, TaskFileName("duplines", J, M)),
                                                  c.Header(Kind::kDupLines, sizeof(LineRecord))));
  // Groups of equal (tag, hi, lo): for exact and band groups, a star of pairs from the group's
  // first document; for line groups, the line when two or more documents have it.
  bool have = false;
  BucketRecord first{};
  uint64_t last_doc = 0, distinct = 0;
  auto close_group = [&]() -> absl::Status {
    if (have && first.tag == 1 && distinct >= 2) {
      ++stats[kDupLines];
      RETURN_IF_ERROR(lines_w->Add(LineRecord{first.hi, first.lo, 0}));
    }
    return absl::OkStatus();
  };
  RETURN_IF_ERROR(sorter.Finish([&](const BucketRecord& r) -> absl::Status {
    if (!have || r.tag != first.tag || r.hi != first.hi || r.lo != first.lo) {
      RETURN_IF_ERROR(close_group());
      have = true;
      first = r;
      last_doc = r.doc;
      distinct = 1;
      return absl::OkStatus();
    }
    if (r.doc == last_doc) return absl::OkStatus();
    last_doc = r.doc;
    ++distinct;
    if (r.tag != 1) {
      uint32_t kind = static_cast<uint32_t>(r.tag == 0 ? PairKind::kExact : PairKind::kNear);
      RETURN_IF_ERROR(pairs.Add(PairRecord{first.doc, r.doc, kind, 0}));
    }
    return absl::OkStatus();
  }));
  RETURN_IF_ERROR(close_group());
  RETURN_IF_ERROR(lines_w->Finish());
  ASSIGN_OR_RETURN(auto pairs_w, FileWriter::Open(c.env, JoinPath(dir, TaskFileName("pairs", J, M)),
                                                  c.Header(Kind::kPairs, sizeof(PairRecord))));
  bool have_pair = false;
  PairRecord prev{};
  RETURN_IF_ERROR(pairs.Finish([&](const PairRecord& p) -> absl::Status {
    if (have_pair && p.a == prev.a && p.b == prev.b) return absl::OkStatus();
    have_pair = true;
    prev = p;
    return pairs_w->Add(p);
  }));
  RETURN_IF_ERROR(pairs_w->Finish());
  return WriteStats(c, DedupStage::kBuckets, std::move(stats), sw);
}

// ---------------------------------------------------------------------------------------------
// clusters
//
// Bounded memory, whatever the number of duplicates:
//   1. the task's distinct pairs go to a temporary pairs file (sorted by (a, b)) and the keys of
//      the documents in near pairs to an external sorter;
//   2. the sets of those documents (sorted distinct shingle hashes, or signatures without
//      verification) are recomputed from the input, split by split, and spilled in key order to a
//      checksummed sets file (format::Kind::kShingleSets);
//   3. the pairs are verified block by block: a block of pairs is read, and one scan of the sets
//      file loads the sets of the block's first documents (a) into a cache of an eighth of the
//      budget, and batches the sets of the second documents (b > a, so their a is already loaded
//      or known to be beyond the cache) to compute the similarities. Pairs whose a did not fit
//      stay for the next block (a block nested loop). Every scan reads the whole file, so its
//      checksum is checked each time.

// Documents (sorted keys) of one input split whose sets are spilled.
struct KeyGroup {
  size_t split = 0;
  std::vector<uint64_t> keys;
};

// Appends the sets of the documents of `groups` (in key order) to `w`.
absl::Status SpillSets(const Ctx& c, const MinHasher& hasher, const std::vector<KeyGroup>& groups,
                       FileWriter* w, std::atomic<uint64_t>* bytes_read) {
  struct Out {
    std::string data;
    uint64_t records = 0;
  };
  const size_t window = SplitWindow(c, 1);
  return OrderedParallel<Out>(
      c.pool.get(), groups.size(), window,
      [&](size_t g) -> absl::StatusOr<Out> {
        const KeyGroup& group = groups[g];
        if (group.split >= c.splits.size()) {
          return absl::DataLossError(absl::StrCat("dedup: document key ", group.keys[0],
                                                  " names split ", group.split,
                                                  " beyond the input plan"));
        }
        Out out;
        size_t next = 0;
        std::vector<uint64_t> set, shingles;
        std::string scratch;
        RETURN_IF_ERROR(
            ForEachDoc(c, group.split, [&](uint64_t key, const Document& doc) -> absl::Status {
              bytes_read->fetch_add(doc.input_bytes, std::memory_order_relaxed);
              if (next >= group.keys.size() || group.keys[next] != key) return absl::OkStatus();
              set.clear();
              if (doc.error.empty()) {
                if (c.opt.verify) {
                  ShingleHashes(doc.text, c.opt.shingle, &set, &scratch);
                } else {
                  ShingleHashesUnordered(doc.text, c.opt.shingle, &shingles, &scratch);
                  set.resize(static_cast<size_t>(c.opt.num_perm));
                  hasher.Compute(shingles, set.data());
                }
              }
              internal::AppendSetRecord(&out.data, key, set);
              ++out.records;
              ++next;
              return absl::OkStatus();
            }));
        if (next != group.keys.size()) {
          return absl::FailedPreconditionError(absl::StrCat(
              "dedup: the input changed since the signatures stage (document ", group.keys[next],
              " not found)"));
        }
        return out;
      },
      [&](size_t, Out&& out) -> absl::Status { return w->AddSerialized(out.data, out.records); });
}

// Reusable buffers of the verification (reserved once: pages are touched only as they fill).
struct VerifyBuffers {
  std::vector<uint64_t> a_arena;  // sets of loaded first documents
  std::vector<uint64_t> b_arena;  // sets of the batch of second documents
  uint64_t a_words = 0, b_words = 0;
};

// Computes (*sims)[i] for the near pairs of `block` (sorted by (a, b)) with one scan of the sets
// file, and returns how many pairs of `block` (a prefix) are resolved: those whose first document
// fit in the cache, and the exact pairs among them.
absl::StatusOr<size_t> VerifyBlock(const Ctx& c, const std::string& sets_path,
                                   const std::vector<PairRecord>& block, std::vector<double>* sims,
                                   VerifyBuffers* buf, uint64_t* bytes_read) {
  const uint32_t kNear = static_cast<uint32_t>(PairKind::kNear);
  std::vector<uint64_t> a_keys;       // distinct first documents of the near pairs, sorted
  std::vector<uint32_t> a_of(block.size(), 0);
  std::vector<uint32_t> by_b;         // near pairs ordered by (b, a)
  for (size_t i = 0; i < block.size(); ++i) {
    if (block[i].kind != kNear) continue;
    if (a_keys.empty() || a_keys.back() != block[i].a) a_keys.push_back(block[i].a);
    a_of[i] = static_cast<uint32_t>(a_keys.size() - 1);
    by_b.push_back(static_cast<uint32_t>(i));
  }
  std::stable_sort(by_b.begin(), by_b.end(),
                   [&](uint32_t x, uint32_t y) { return block[x].b < block[y].b; });
  std::vector<std::pair<uint64_t, uint64_t>> a_span(a_keys.size());  // (offset, length) in a_arena
  size_t a_loaded = 0;  // a_keys[0, a_loaded) are in the cache
  bool a_full = false;  // a key did not fit: a_keys[a_loaded] and later wait for the next block
  struct BItem {
    size_t begin, end;  // into by_b
    uint64_t offset, length;
  };
  std::vector<BItem> batch;
  buf->a_arena.clear();
  buf->b_arena.clear();
  auto flush = [&]() -> absl::Status {
    constexpr size_t kChunk = 64;
    RETURN_IF_ERROR(ParallelFor(c.pool.get(), (batch.size() + kChunk - 1) / kChunk,
                                [&](size_t chunk) -> absl::Status {
      for (size_t k = chunk * kChunk; k < std::min(batch.size(), (chunk + 1) * kChunk); ++k) {
        const BItem& item = batch[k];
        const uint64_t* y = buf->b_arena.data() + item.offset;
        for (size_t j = item.begin; j < item.end; ++j) {
          const uint32_t i = by_b[j];
          if (a_of[i] >= a_loaded) continue;  // deferred to the next block
          const auto [off, len] = a_span[a_of[i]];
          const uint64_t* x = buf->a_arena.data() + off;
          if (c.opt.verify) {
            (*sims)[i] = JaccardSorted(x, len, y, item.length);
          } else {
            (*sims)[i] = (len == 0 || item.length == 0)
                             ? 0.0
                             : EstimateJaccard(x, y, c.opt.num_perm);
          }
        }
      }
      return absl::OkStatus();
    }));
    batch.clear();
    buf->b_arena.clear();
    return absl::OkStatus();
  };
  auto missing = [&](uint64_t key) {
    return absl::DataLossError(absl::StrCat(sets_path, ": corrupt dedup intermediate file: no set "
                                            "for candidate document ", key));
  };
  ASSIGN_OR_RETURN(auto reader, FileReader::Open(c.env, sets_path, Kind::kShingleSets, 0));
  RETURN_IF_ERROR(c.CheckFingerprint(*reader, sets_path));
  size_t b_next = 0;
  uint64_t key = 0;
  std::vector<uint64_t> set;
  while (true) {
    ASSIGN_OR_RETURN(bool more, reader->NextSet(&key, &set));
    if (!more) break;
    *bytes_read += sizeof(format::SetRecord) + 8 * set.size();
    if (b_next < by_b.size() && block[by_b[b_next]].b < key) return missing(block[by_b[b_next]].b);
    if (b_next < by_b.size() && block[by_b[b_next]].b == key) {
      const size_t begin = b_next;
      while (b_next < by_b.size() && block[by_b[b_next]].b == key) ++b_next;
      if (!batch.empty() && buf->b_arena.size() + set.size() > buf->b_words) {
        RETURN_IF_ERROR(flush());
      }
      batch.push_back(BItem{begin, b_next, buf->b_arena.size(), set.size()});
      buf->b_arena.insert(buf->b_arena.end(), set.begin(), set.end());
    }
    if (!a_full && a_loaded < a_keys.size()) {
      if (a_keys[a_loaded] < key) return missing(a_keys[a_loaded]);
      if (a_keys[a_loaded] == key) {
        if (a_loaded > 0 && buf->a_arena.size() + set.size() > buf->a_words) {
          a_full = true;
        } else {
          a_span[a_loaded] = {buf->a_arena.size(), set.size()};
          buf->a_arena.insert(buf->a_arena.end(), set.begin(), set.end());
          ++a_loaded;
        }
      }
    }
  }
  RETURN_IF_ERROR(flush());
  if (b_next < by_b.size()) return missing(block[by_b[b_next]].b);
  if (!a_full && a_loaded < a_keys.size()) return missing(a_keys[a_loaded]);
  if (a_loaded == a_keys.size()) return block.size();
  const uint64_t cutoff = a_keys[a_loaded];
  return static_cast<size_t>(
      std::lower_bound(block.begin(), block.end(), cutoff,
                       [](const PairRecord& p, uint64_t k) { return p.a < k; }) -
      block.begin());
}

absl::Status RunClusters(Ctx& c) {
  Stopwatch sw;
  std::vector<uint64_t> stats = NewStats();
  const int K = c.run.task, L = c.run.tasks;
  const uint64_t budget = c.opt.memory_limit;
  const std::string dir = c.Dir("clusters");
  const std::string tmp = c.Dir("tmp");
  RETURN_IF_ERROR(c.env->CreateDirs(dir));
  RETURN_IF_ERROR(c.env->CreateDirs(tmp));
  RETURN_IF_ERROR(RemoveStaleTaskFiles(c.env, dir, "edges", L));
  const std::string pairs_path = JoinPath(tmp, absl::StrFormat("verify-%05d-pairs.bin", K));
  const std::string sets_path = JoinPath(tmp, absl::StrFormat("verify-%05d-sets.bin", K));
  struct RemoveOnExit {
    Env* env;
    std::vector<std::string> paths;
    ~RemoveOnExit() {
      for (const std::string& p : paths) {
        if (env->FileExists(p)) (void)env->RemoveFile(p);
      }
    }
  } cleanup{c.env, {pairs_path, sets_path}};

  // 1. Distinct pairs of this task's partition -> pairs file; candidate documents -> key sorter.
  {
    ASSIGN_OR_RETURN(auto readers, OpenAll(c, "buckets", "pairs", DedupStage::kBuckets,
                                           Kind::kPairs, sizeof(PairRecord)));
    internal::ExternalSorter<PairRecord> sorter(c.env, tmp, absl::StrFormat("cpairs-%05d", K),
                                                budget / 4);
    for (auto& r : readers) {
      PairRecord p;
      while (true) {
        ASSIGN_OR_RETURN(bool more, r->Next(&p));
        if (!more) break;
        stats[kInputBytes] += sizeof(p);
        if (Partition(3, p.a, p.b, L) == static_cast<uint64_t>(K)) RETURN_IF_ERROR(sorter.Add(p));
      }
    }
    internal::ExternalSorter<uint64_t> keys(c.env, tmp, absl::StrFormat("ckeys-%05d", K),
                                            budget / 8);
    ASSIGN_OR_RETURN(auto pairs_w, FileWriter::Open(c.env, pairs_path,
                                                    c.Header(Kind::kPairs, sizeof(PairRecord)),
                                                    /*sync=*/false));
    bool have = false;
    PairRecord prev{};
    RETURN_IF_ERROR(sorter.Finish([&](const PairRecord& p) -> absl::Status {
      if (have && prev.a == p.a && prev.b == p.b) return absl::OkStatus();
      have = true;
      prev = p;
      if (p.kind == static_cast<uint32_t>(PairKind::kExact)) {
        ++stats[kExactPairs];
      } else {
        ++stats[kCandidatePairs];
        RETURN_IF_ERROR(keys.Add(p.a));
        RETURN_IF_ERROR(keys.Add(p.b));
      }
      return pairs_w->Add(p);
    }));
    RETURN_IF_ERROR(pairs_w->Finish());

    // 2. The sets of the candidate documents -> sets file, in key order.
    if (stats[kCandidatePairs] > 0) {
      ASSIGN_OR_RETURN(auto sets_w,
                       FileWriter::Open(c.env, sets_path,
                                        c.Header(Kind::kShingleSets, 0,
                                                 c.opt.verify ? 0 : c.opt.num_perm),
                                        /*sync=*/false));
      const MinHasher hasher(c.opt.num_perm, c.opt.seed);
      const size_t window = SplitWindow(c, 1);
      std::atomic<uint64_t> bytes{0};
      std::vector<KeyGroup> groups;
      bool any = false;
      uint64_t last = 0;
      RETURN_IF_ERROR(keys.Finish([&](uint64_t key) -> absl::Status {
        if (any && key == last) return absl::OkStatus();
        any = true;
        last = key;
        if (groups.empty() || groups.back().split != SplitOfKey(key)) {
          if (groups.size() == window) {
            RETURN_IF_ERROR(SpillSets(c, hasher, groups, sets_w.get(), &bytes));
            groups.clear();
          }
          groups.push_back(KeyGroup{SplitOfKey(key), {}});
        }
        groups.back().keys.push_back(key);
        return absl::OkStatus();
      }));
      if (!groups.empty()) RETURN_IF_ERROR(SpillSets(c, hasher, groups, sets_w.get(), &bytes));
      stats[kSpilledSetBytes] = sets_w->bytes();
      RETURN_IF_ERROR(sets_w->Finish());
      stats[kInputBytes] += bytes.load();
    }
  }

  // 3. Verify block by block; edges in (a, b) order.
  ASSIGN_OR_RETURN(auto pairs_r,
                   FileReader::Open(c.env, pairs_path, Kind::kPairs, sizeof(PairRecord)));
  ASSIGN_OR_RETURN(auto edges_w, FileWriter::Open(c.env, JoinPath(dir, TaskFileName("edges", K, L)),
                                                  c.Header(Kind::kEdges, sizeof(EdgeRecord))));
  // Per pair in a block: the record, its similarity, two u32 indices and a share of a_keys/a_span
  // (64 bytes): a sixteenth of the budget; the first documents' sets an eighth, the batch of second
  // documents' sets a sixteenth.
  const size_t block_cap = static_cast<size_t>(std::max<uint64_t>(1024, budget / 16 / 64));
  VerifyBuffers buf;
  buf.a_words = budget / 8 / 8;
  buf.b_words = budget / 16 / 8;
  std::vector<PairRecord> block;
  block.reserve(block_cap);
  std::vector<double> sims;
  bool pairs_done = false;
  while (true) {
    while (!pairs_done && block.size() < block_cap) {
      PairRecord p;
      ASSIGN_OR_RETURN(bool more, pairs_r->Next(&p));
      if (!more) {
        pairs_done = true;
        break;
      }
      block.push_back(p);
    }
    if (block.empty()) break;
    sims.assign(block.size(), 1.0);
    size_t resolved = block.size();
    const bool any_near = std::any_of(block.begin(), block.end(), [](const PairRecord& p) {
      return p.kind == static_cast<uint32_t>(PairKind::kNear);
    });
    if (any_near) {
      if (buf.a_arena.capacity() == 0) {
        buf.a_arena.reserve(buf.a_words);
        buf.b_arena.reserve(buf.b_words);
      }
      ASSIGN_OR_RETURN(resolved, VerifyBlock(c, sets_path, block, &sims, &buf,
                                             &stats[kInputBytes]));
      ++stats[kVerifyPasses];
    }
    for (size_t i = 0; i < resolved; ++i) {
      const PairRecord& p = block[i];
      if (p.kind != static_cast<uint32_t>(PairKind::kExact)) {
        if (c.opt.verify && sims[i] < c.opt.threshold) continue;
        ++stats[kVerifiedPairs];
      }
      RETURN_IF_ERROR(edges_w->Add(EdgeRecord{p.a, p.b, sims[i], p.kind, 0}));
    }
    block.erase(block.begin(), block.begin() + static_cast<ptrdiff_t>(resolved));
  }
  RETURN_IF_ERROR(edges_w->Finish());
  return WriteStats(c, DedupStage::kClusters, std::move(stats), sw);
}

// ---------------------------------------------------------------------------------------------
// merge

// What the in-memory merge holds per edge at most: the edge (32 bytes), its two documents' keys
// (16), and per document the union-find parent, best edge, root, size and cluster number (2 x 44),
// with slack for the vectors' growth.
constexpr uint64_t kInMemoryMergeBytesPerEdge = 160;

// The external merge (when the documents in edges do not fit the in-memory share of the budget):
// every step is a pass over sorted, checksummed scratch files in work/tmp, each sort within a
// quarter of the budget.

struct KV {  // a (key, value) pair of document keys, ordered by key then value
  uint64_t k;
  uint64_t v;
};
inline bool operator<(const KV& x, const KV& y) { return x.k != y.k ? x.k < y.k : x.v < y.v; }
struct EdgeByB {  // an edge ordered by its later document
  EdgeRecord e;
};
inline bool operator<(const EdgeByB& x, const EdgeByB& y) {
  return std::tie(x.e.b, x.e.a, x.e.kind, x.e.similarity) < std::tie(y.e.b, y.e.a, y.e.kind, y.e.similarity);
}
struct EdgeByA {  // an edge ordered by its earlier document
  EdgeRecord e;
};
inline bool operator<(const EdgeByA& x, const EdgeByA& y) {
  return std::tie(x.e.a, x.e.b, x.e.kind, x.e.similarity) < std::tie(y.e.a, y.e.b, y.e.kind, y.e.similarity);
}
struct NodeBest {  // a document's chosen partner
  uint64_t node;
  uint64_t partner;
  double sim;
  uint32_t kind;
  uint32_t reserved;
};
struct ClusterByDoc {
  ClusterRecord r;
};
inline bool operator<(const ClusterByDoc& x, const ClusterByDoc& y) { return x.r.doc < y.r.doc; }

// The choice of duplicate_of: the most similar edge, then exact before near, then the smaller
// partner (a total order, so the result does not depend on the order edges are offered in).
void OfferBest(NodeBest& b, uint64_t partner, double sim, uint32_t kind) {
  const bool better =
      sim > b.sim || (sim == b.sim && (kind < b.kind || (kind == b.kind && partner < b.partner)));
  if (b.sim < 0 || better) {
    b.partner = partner;
    b.sim = sim;
    b.kind = kind;
  }
}

// Scratch files of the external merge; those still there are removed when it goes out of scope.
class MergeScratch {
 public:
  MergeScratch(const Ctx& c, uint64_t sort_bytes)
      : c_(c), dir_(c.Dir("tmp")), sort_bytes_(sort_bytes) {}
  ~MergeScratch() {
    for (const std::string& p : files_) (void)c_.env->RemoveFile(p);
  }
  const Ctx& ctx() const { return c_; }
  const std::string& dir() const { return dir_; }
  uint64_t sort_bytes() const { return sort_bytes_; }
  std::string NewPath(const std::string& name) {
    std::string p = JoinPath(dir_, absl::StrCat("merge-", name, "-", seq_++, ".bin"));
    files_.push_back(p);
    return p;
  }
  void Drop(const std::string& path) {
    (void)c_.env->RemoveFile(path);
    files_.erase(std::remove(files_.begin(), files_.end(), path), files_.end());
  }

 private:
  const Ctx& c_;
  std::string dir_;
  uint64_t sort_bytes_;
  std::vector<std::string> files_;
  int seq_ = 0;
};

// Reads a scratch file of T records with one record of lookahead.
template <typename T>
class Cursor {
 public:
  static absl::StatusOr<Cursor> Open(Env* env, const std::string& path) {
    Cursor cur;
    ASSIGN_OR_RETURN(cur.reader_, FileReader::Open(env, path, Kind::kRun, sizeof(T)));
    RETURN_IF_ERROR(cur.Advance());
    return cur;
  }
  bool valid() const { return valid_; }
  const T& get() const { return rec_; }
  absl::Status Advance() {
    ASSIGN_OR_RETURN(valid_, reader_->Next(&rec_));
    return absl::OkStatus();
  }

 private:
  std::unique_ptr<FileReader> reader_;
  T rec_{};
  bool valid_ = false;
};

// A scratch file written in order (no sort).
template <typename T>
absl::StatusOr<std::unique_ptr<FileWriter>> OpenScratch(MergeScratch& s, const std::string& path) {
  return FileWriter::Open(s.ctx().env, path, s.ctx().Header(Kind::kRun, sizeof(T)),
                          /*sync=*/false);
}

// Sorts the records produce(add) adds into a new scratch file (dropping repeats if `unique`).
template <typename T, typename Produce>
absl::StatusOr<std::string> SortToFile(MergeScratch& s, const std::string& name, bool unique,
                                       Produce produce) {
  const std::string path = s.NewPath(name);
  internal::ExternalSorter<T> sorter(s.ctx().env, s.dir(),
                                     absl::StrCat(path.substr(path.rfind('/') + 1), "-sort"),
                                     s.sort_bytes());
  auto add = [&](const T& x) { return sorter.Add(x); };
  RETURN_IF_ERROR(produce(add));
  ASSIGN_OR_RETURN(auto w, OpenScratch<T>(s, path));
  bool have = false;
  T last{};
  RETURN_IF_ERROR(sorter.Finish([&](const T& x) -> absl::Status {
    if (unique && have && !(last < x)) return absl::OkStatus();
    have = true;
    last = x;
    return w->Add(x);
  }));
  RETURN_IF_ERROR(w->Finish());
  return path;
}

// Calls fn(record) for every record of a scratch file.
template <typename T, typename Fn>
absl::Status ForEachRecord(Env* env, const std::string& path, Fn fn) {
  ASSIGN_OR_RETURN(auto cur, Cursor<T>::Open(env, path));
  while (cur.valid()) {
    RETURN_IF_ERROR(fn(cur.get()));
    RETURN_IF_ERROR(cur.Advance());
  }
  return absl::OkStatus();
}

// Looks keys up, in ascending order, in a scratch file of KV sorted by k: the v of key, else key.
class Relabel {
 public:
  static absl::StatusOr<Relabel> Open(Env* env, const std::string& path) {
    Relabel r;
    ASSIGN_OR_RETURN(r.cur_, Cursor<KV>::Open(env, path));
    return r;
  }
  absl::StatusOr<uint64_t> Of(uint64_t key) {
    while (cur_.valid() && cur_.get().k < key) RETURN_IF_ERROR(cur_.Advance());
    return cur_.valid() && cur_.get().k == key ? cur_.get().v : key;
  }
  absl::Status Drain() {
    while (cur_.valid()) RETURN_IF_ERROR(cur_.Advance());
    return absl::OkStatus();
  }

 private:
  Cursor<KV> cur_;
};

// Connected components and the per-document choice in bounded memory, writing the same clusters
// file as the in-memory merge. Components: in each round every document of the edge graph that
// has a smaller neighbour hooks onto its smallest one (a forest whose roots are smaller than their
// children), pointer jumping takes every document to its tree's root (depth halves per pass), and
// the edges are relabelled to roots (dropping those inside a tree); the rounds repeat until no
// edge is left. Each round removes at least the largest document of every component, and the last
// root of a component is its smallest document (it has no smaller neighbour). The labels compose
// across rounds into F: (document, its component's smallest document) for every non-root.
absl::Status MergeExternal(Ctx& c, std::vector<std::unique_ptr<FileReader>>& readers,
                           std::vector<uint64_t>& stats, const std::string& dir,
                           std::vector<std::pair<uint64_t, uint64_t>>* hist_out) {
  Env* env = c.env;
  RETURN_IF_ERROR(env->CreateDirs(c.Dir("tmp")));
  MergeScratch s(c, std::max<uint64_t>(1 << 16, c.opt.memory_limit / 4));
  // The edges by their later document.
  ASSIGN_OR_RETURN(std::string by_b,
                   SortToFile<EdgeByB>(s, "edges-by-b", false, [&](auto& add) -> absl::Status {
                     for (auto& r : readers) {
                       EdgeRecord e;
                       while (true) {
                         ASSIGN_OR_RETURN(bool more, r->Next(&e));
                         if (!more) break;
                         stats[kInputBytes] += sizeof(e);
                         if (!(e.a < e.b)) {
                           return absl::DataLossError("dedup merge: edge with a >= b");
                         }
                         RETURN_IF_ERROR(add(EdgeByB{e}));
                       }
                     }
                     return absl::OkStatus();
                   }));
  // Per later document its best edge to an earlier one; the graph as KV{b, a}, sorted, distinct.
  const std::string earlier_path = s.NewPath("best-earlier");
  std::string graph = s.NewPath("graph");
  {
    ASSIGN_OR_RETURN(auto best_w, OpenScratch<NodeBest>(s, earlier_path));
    ASSIGN_OR_RETURN(auto graph_w, OpenScratch<KV>(s, graph));
    NodeBest cur{0, 0, -1, 0, 0};
    bool have = false;
    KV last{0, 0};
    RETURN_IF_ERROR(ForEachRecord<EdgeByB>(env, by_b, [&](const EdgeByB& x) -> absl::Status {
      if (have && x.e.b != cur.node) RETURN_IF_ERROR(best_w->Add(cur));
      if (!have || x.e.b != cur.node) cur = NodeBest{x.e.b, 0, -1, 0, 0};
      OfferBest(cur, x.e.a, x.e.similarity, x.e.kind);
      const KV g{x.e.b, x.e.a};
      if (!have || last < g) RETURN_IF_ERROR(graph_w->Add(g));
      have = true;
      last = g;
      return absl::OkStatus();
    }));
    if (have) RETURN_IF_ERROR(best_w->Add(cur));
    RETURN_IF_ERROR(best_w->Finish());
    RETURN_IF_ERROR(graph_w->Finish());
  }
  // Documents without an edge to an earlier one: the best edge to a later one.
  const std::string later_path = s.NewPath("best-later");
  {
    ASSIGN_OR_RETURN(std::string by_a,
                     SortToFile<EdgeByA>(s, "edges-by-a", false, [&](auto& add) {
                       return ForEachRecord<EdgeByB>(env, by_b, [&](const EdgeByB& x) {
                         return add(EdgeByA{x.e});
                       });
                     }));
    s.Drop(by_b);
    ASSIGN_OR_RETURN(auto earlier, Cursor<NodeBest>::Open(env, earlier_path));
    ASSIGN_OR_RETURN(auto best_w, OpenScratch<NodeBest>(s, later_path));
    NodeBest cur{0, 0, -1, 0, 0};
    bool have = false, skip = false;
    RETURN_IF_ERROR(ForEachRecord<EdgeByA>(env, by_a, [&](const EdgeByA& x) -> absl::Status {
      if (!have || x.e.a != cur.node) {
        if (have && !skip) RETURN_IF_ERROR(best_w->Add(cur));
        have = true;
        cur = NodeBest{x.e.a, 0, -1, 0, 0};
        while (earlier.valid() && earlier.get().node < x.e.a) RETURN_IF_ERROR(earlier.Advance());
        skip = earlier.valid() && earlier.get().node == x.e.a;
      }
      if (!skip) OfferBest(cur, x.e.b, x.e.similarity, x.e.kind);
      return absl::OkStatus();
    }));
    if (have && !skip) RETURN_IF_ERROR(best_w->Add(cur));
    RETURN_IF_ERROR(best_w->Finish());
    while (earlier.valid()) RETURN_IF_ERROR(earlier.Advance());
    s.Drop(by_a);
  }
  // Connected components.
  std::string labels;  // F: KV{document, label}, sorted by document; empty until the first round
  uint64_t rounds = 0;
  while (true) {
    uint64_t edges = 0;
    // Hook: every later document of an edge onto its smallest neighbour (graph is sorted by (b, a)).
    std::string parent = s.NewPath("parent");
    {
      ASSIGN_OR_RETURN(auto w, OpenScratch<KV>(s, parent));
      bool have = false;
      uint64_t last_b = 0;
      RETURN_IF_ERROR(ForEachRecord<KV>(env, graph, [&](const KV& g) -> absl::Status {
        ++edges;
        if (have && g.k == last_b) return absl::OkStatus();
        have = true;
        last_b = g.k;
        return w->Add(KV{g.k, g.v});
      }));
      RETURN_IF_ERROR(w->Finish());
    }
    if (edges == 0) {
      s.Drop(parent);
      break;
    }
    ++rounds;
    // Pointer jumping until every parent is a root.
    while (true) {
      ASSIGN_OR_RETURN(std::string by_parent,
                       SortToFile<KV>(s, "by-parent", false, [&](auto& add) {
                         return ForEachRecord<KV>(env, parent, [&](const KV& p) {
                           return add(KV{p.v, p.k});
                         });
                       }));
      bool changed = false;
      ASSIGN_OR_RETURN(std::string next,
                       SortToFile<KV>(s, "parent", false, [&](auto& add) -> absl::Status {
                         ASSIGN_OR_RETURN(Relabel up, Relabel::Open(env, parent));
                         RETURN_IF_ERROR(ForEachRecord<KV>(env, by_parent, [&](const KV& pc)
                                                                               -> absl::Status {
                           ASSIGN_OR_RETURN(uint64_t grand, up.Of(pc.k));
                           changed |= grand != pc.k;
                           return add(KV{pc.v, grand});
                         }));
                         return up.Drain();
                       }));
      s.Drop(by_parent);
      s.Drop(parent);
      parent = next;
      if (!changed) break;
    }
    // Relabel the edges to roots: first b (graph order), then a.
    ASSIGN_OR_RETURN(std::string half,
                     SortToFile<KV>(s, "half", false, [&](auto& add) -> absl::Status {
                       ASSIGN_OR_RETURN(Relabel root, Relabel::Open(env, parent));
                       RETURN_IF_ERROR(ForEachRecord<KV>(env, graph, [&](const KV& g)
                                                                         -> absl::Status {
                         ASSIGN_OR_RETURN(uint64_t rb, root.Of(g.k));
                         return add(KV{g.v, rb});
                       }));
                       return root.Drain();
                     }));
    s.Drop(graph);
    ASSIGN_OR_RETURN(graph, SortToFile<KV>(s, "graph", true, [&](auto& add) -> absl::Status {
                       ASSIGN_OR_RETURN(Relabel root, Relabel::Open(env, parent));
                       RETURN_IF_ERROR(ForEachRecord<KV>(env, half, [&](const KV& h)
                                                                        -> absl::Status {
                         ASSIGN_OR_RETURN(uint64_t ra, root.Of(h.k));
                         if (ra == h.v) return absl::OkStatus();
                         return add(KV{std::max(ra, h.v), std::min(ra, h.v)});
                       }));
                       return root.Drain();
                     }));
    s.Drop(half);
    // Compose: F' = R(F) for the documents labelled so far, and R for this round's non-roots
    // (roots of the earlier rounds, so never in F).
    std::string by_label;
    if (!labels.empty()) {
      ASSIGN_OR_RETURN(by_label, SortToFile<KV>(s, "by-label", false, [&](auto& add) {
                         return ForEachRecord<KV>(env, labels, [&](const KV& f) {
                           return add(KV{f.v, f.k});
                         });
                       }));
      s.Drop(labels);
    }
    ASSIGN_OR_RETURN(std::string next_labels,
                     SortToFile<KV>(s, "labels", false, [&](auto& add) -> absl::Status {
                       RETURN_IF_ERROR(ForEachRecord<KV>(env, parent, add));
                       if (by_label.empty()) return absl::OkStatus();
                       ASSIGN_OR_RETURN(Relabel root, Relabel::Open(env, parent));
                       RETURN_IF_ERROR(ForEachRecord<KV>(env, by_label, [&](const KV& lv)
                                                                            -> absl::Status {
                         ASSIGN_OR_RETURN(uint64_t r, root.Of(lv.k));
                         return add(KV{lv.v, r});
                       }));
                       return root.Drain();
                     }));
    if (!by_label.empty()) s.Drop(by_label);
    s.Drop(parent);
    labels = next_labels;
  }
  s.Drop(graph);
  stats[kMergeRounds] = rounds;
  if (labels.empty()) {  // no edges at all
    labels = s.NewPath("labels");
    ASSIGN_OR_RETURN(auto w, OpenScratch<KV>(s, labels));
    RETURN_IF_ERROR(w->Finish());
  }
  // Clusters: the members of each root, sizes first, then numbered in the order of the roots.
  ASSIGN_OR_RETURN(std::string by_root, SortToFile<KV>(s, "by-root", false, [&](auto& add) {
                     return ForEachRecord<KV>(env, labels, [&](const KV& f) {
                       return add(KV{f.v, f.k});
                     });
                   }));
  s.Drop(labels);
  const std::string sizes = s.NewPath("sizes");
  {
    ASSIGN_OR_RETURN(auto w, OpenScratch<KV>(s, sizes));
    KV cur{0, 0};
    RETURN_IF_ERROR(ForEachRecord<KV>(env, by_root, [&](const KV& rv) -> absl::Status {
      if (cur.v != 0 && rv.k != cur.k) RETURN_IF_ERROR(w->Add(cur));
      if (cur.v == 0 || rv.k != cur.k) cur = KV{rv.k, 1};
      ++cur.v;
      return absl::OkStatus();
    }));
    if (cur.v != 0) RETURN_IF_ERROR(w->Add(cur));
    RETURN_IF_ERROR(w->Finish());
  }
  uint64_t clusters = 0;
  std::map<uint64_t, uint64_t> hist;
  ASSIGN_OR_RETURN(
      std::string members, SortToFile<ClusterByDoc>(s, "members", false, [&](auto& add) -> absl::Status {
        ASSIGN_OR_RETURN(auto size, Cursor<KV>::Open(env, sizes));
        bool started = false;
        uint64_t root = 0;
        RETURN_IF_ERROR(ForEachRecord<KV>(env, by_root, [&](const KV& rv) -> absl::Status {
          if (!started || rv.k != root) {
            if (started) RETURN_IF_ERROR(size.Advance());
            started = true;
            root = rv.k;
            if (!size.valid() || size.get().k != rv.k) {
              return absl::InternalError("dedup merge: cluster sizes out of step");
            }
            ++clusters;
            ++hist[size.get().v];
          }
          ClusterRecord r{};
          r.doc = rv.v;
          r.kept = rv.k;
          r.cluster = clusters - 1;
          r.cluster_size = static_cast<uint32_t>(size.get().v);
          return add(ClusterByDoc{r});
        }));
        while (size.valid()) RETURN_IF_ERROR(size.Advance());
        return absl::OkStatus();
      }));
  s.Drop(by_root);
  s.Drop(sizes);
  // The removed documents with their choice.
  {
    ASSIGN_OR_RETURN(auto clusters_w,
                     FileWriter::Open(env, JoinPath(dir, TaskFileName("clusters", 0, 1)),
                                      c.Header(Kind::kClusters, sizeof(ClusterRecord))));
    ASSIGN_OR_RETURN(auto earlier, Cursor<NodeBest>::Open(env, earlier_path));
    ASSIGN_OR_RETURN(auto later, Cursor<NodeBest>::Open(env, later_path));
    RETURN_IF_ERROR(ForEachRecord<ClusterByDoc>(env, members, [&](const ClusterByDoc& m)
                                                                   -> absl::Status {
      ClusterRecord r = m.r;
      while (earlier.valid() && earlier.get().node < r.doc) RETURN_IF_ERROR(earlier.Advance());
      while (later.valid() && later.get().node < r.doc) RETURN_IF_ERROR(later.Advance());
      const NodeBest* b = nullptr;
      if (earlier.valid() && earlier.get().node == r.doc) {
        b = &earlier.get();
      } else if (later.valid() && later.get().node == r.doc) {
        b = &later.get();
      }
      if (b == nullptr) return absl::InternalError("dedup merge: a member without an edge");
      r.duplicate_of = b->partner;
      r.similarity = b->sim;
      r.kind = b->kind;
      ++stats[r.kind == static_cast<uint32_t>(PairKind::kExact) ? kRemovedExact : kRemovedNear];
      return clusters_w->Add(r);
    }));
    while (earlier.valid()) RETURN_IF_ERROR(earlier.Advance());
    while (later.valid()) RETURN_IF_ERROR(later.Advance());
    RETURN_IF_ERROR(clusters_w->Finish());
  }
  s.Drop(members);
  stats[kClusters] = clusters;
  for (const auto& [sz, n] : hist) hist_out->emplace_back(sz, n);
  return absl::OkStatus();
}

// Sorts variable-length (key, id) records by key within `memory_bytes`, spilling sorted runs
// (format::Kind::kIds, read back through FileReader) like ExternalSorter.
class IdSorter {
 public:
  IdSorter(MergeScratch& s, std::string name, uint64_t memory_bytes)
      : s_(s), name_(std::move(name)), memory_bytes_(memory_bytes) {}
  ~IdSorter() {
    for (const std::string& p : runs_) s_.Drop(p);
  }
  absl::Status Add(uint64_t key, const std::string& id) {
    if (bytes_ >= memory_bytes_) RETURN_IF_ERROR(Spill());
    buffer_.emplace_back(key, id);
    // The pair, and the string's heap block past the short-string buffer (with malloc's header).
    const std::string& kept = buffer_.back().second;
    bytes_ += sizeof(buffer_[0]) + (kept.capacity() > 15 ? kept.capacity() + 1 + 16 : 0);
    // The vector's own growth (up to twice the records), counted as it happens.
    if (buffer_.size() == buffer_.capacity()) bytes_ += sizeof(buffer_[0]) * buffer_.size();
    return absl::OkStatus();
  }
  // Writes the records in key order (equal keys in the order added) to `w`.
  absl::Status Finish(FileWriter& w) {
    std::stable_sort(buffer_.begin(), buffer_.end(),
                     [](const auto& x, const auto& y) { return x.first < y.first; });
    if (runs_.empty()) {
      for (const auto& [key, id] : buffer_) RETURN_IF_ERROR(w.AddId(key, id));
      return absl::OkStatus();
    }
    if (!buffer_.empty()) RETURN_IF_ERROR(Spill());
    std::vector<std::unique_ptr<FileReader>> readers;
    using Head = std::tuple<uint64_t, size_t, std::string>;  // key, run, id
    std::priority_queue<Head, std::vector<Head>, std::greater<Head>> heap;
    for (size_t i = 0; i < runs_.size(); ++i) {
      ASSIGN_OR_RETURN(auto r, FileReader::Open(s_.ctx().env, runs_[i], Kind::kIds, 0));
      readers.push_back(std::move(r));
      Head h{0, i, std::string()};
      ASSIGN_OR_RETURN(bool more, readers[i]->NextId(&std::get<0>(h), &std::get<2>(h)));
      if (more) heap.push(std::move(h));
    }
    while (!heap.empty()) {
      Head h = heap.top();
      heap.pop();
      RETURN_IF_ERROR(w.AddId(std::get<0>(h), std::get<2>(h)));
      const size_t run = std::get<1>(h);
      ASSIGN_OR_RETURN(bool more, readers[run]->NextId(&std::get<0>(h), &std::get<2>(h)));
      if (more) heap.push(std::move(h));
    }
    return absl::OkStatus();
  }

 private:
  absl::Status Spill() {
    std::stable_sort(buffer_.begin(), buffer_.end(),
                     [](const auto& x, const auto& y) { return x.first < y.first; });
    const std::string path = s_.NewPath(name_ + "-run");
    ASSIGN_OR_RETURN(auto w, FileWriter::Open(s_.ctx().env, path, s_.ctx().Header(Kind::kIds, 0),
                                              /*sync=*/false));
    for (const auto& [key, id] : buffer_) RETURN_IF_ERROR(w->AddId(key, id));
    RETURN_IF_ERROR(w->Finish());
    runs_.push_back(path);
    buffer_.clear();
    buffer_.shrink_to_fit();
    bytes_ = 0;
    return absl::OkStatus();
  }

  MergeScratch& s_;
  std::string name_;
  uint64_t memory_bytes_;
  uint64_t bytes_ = 0;
  std::vector<std::pair<uint64_t, std::string>> buffer_;
  std::vector<std::string> runs_;
};

// The ids filter writes into each removed record, as two files sorted by the removed document
// (so that filter streams them beside the clusters file): kept-ids (the cluster's kept document's
// id) and dup-ids (duplicate_of's id). The references are sorted by the referenced document and
// joined with the signatures stage's id files (each in key order).
absl::Status WriteRemovedIds(Ctx& c, const std::string& dir, std::vector<uint64_t>& stats) {
  Env* env = c.env;
  RETURN_IF_ERROR(env->CreateDirs(c.Dir("tmp")));
  MergeScratch s(c, std::max<uint64_t>(1 << 16, c.opt.memory_limit / 4));
  const std::string clusters_path = JoinPath(dir, TaskFileName("clusters", 0, 1));
  std::string refs[2];
  for (int which = 0; which < 2; ++which) {
    ASSIGN_OR_RETURN(refs[which], SortToFile<KV>(s, which == 0 ? "kept-refs" : "dup-refs", false,
                                                 [&](auto& add) -> absl::Status {
      ASSIGN_OR_RETURN(auto r, FileReader::Open(env, clusters_path, Kind::kClusters,
                                                sizeof(ClusterRecord)));
      ClusterRecord cr;
      while (true) {
        ASSIGN_OR_RETURN(bool more, r->Next(&cr));
        if (!more) break;
        RETURN_IF_ERROR(add(KV{which == 0 ? cr.kept : cr.duplicate_of, cr.doc}));
      }
      return absl::OkStatus();
    }));
  }
  IdSorter kept(s, "kept-ids", c.opt.memory_limit / 16), dup(s, "dup-ids", c.opt.memory_limit / 16);
  ASSIGN_OR_RETURN(auto id_readers, OpenAll(c, "sig", "ids", DedupStage::kSignatures, Kind::kIds, 0));
  for (auto& r : id_readers) {
    ASSIGN_OR_RETURN(auto kref, Cursor<KV>::Open(env, refs[0]));
    ASSIGN_OR_RETURN(auto dref, Cursor<KV>::Open(env, refs[1]));
    uint64_t key;
    std::string id;
    while (true) {
      ASSIGN_OR_RETURN(bool more, r->NextId(&key, &id));
      if (!more) break;
      stats[kInputBytes] += 12 + id.size();
      while (kref.valid() && kref.get().k < key) RETURN_IF_ERROR(kref.Advance());
      while (kref.valid() && kref.get().k == key) {
        RETURN_IF_ERROR(kept.Add(kref.get().v, id));
        RETURN_IF_ERROR(kref.Advance());
      }
      while (dref.valid() && dref.get().k < key) RETURN_IF_ERROR(dref.Advance());
      while (dref.valid() && dref.get().k == key) {
        RETURN_IF_ERROR(dup.Add(dref.get().v, id));
        RETURN_IF_ERROR(dref.Advance());
      }
    }
    while (kref.valid()) RETURN_IF_ERROR(kref.Advance());
    while (dref.valid()) RETURN_IF_ERROR(dref.Advance());
  }
  for (IdSorter* sorter : {&kept, &dup}) {
    const char* stem = sorter == &kept ? "kept-ids" : "dup-ids";
    ASSIGN_OR_RETURN(auto w, FileWriter::Open(env, JoinPath(dir, TaskFileName(stem, 0, 1)),
                                              c.Header(Kind::kIds, 0)));
    RETURN_IF_ERROR(sorter->Finish(*w));
    RETURN_IF_ERROR(w->Finish());
  }
  return absl::OkStatus();
}

// The in-memory merge: sorted edges and a union-find whose root is the smallest document.
absl::Status MergeInMemory(Ctx& c, std::vector<std::unique_ptr<FileReader>>& readers,
                           std::vector<uint64_t>& stats, const std::string& dir,
                           std::vector<std::pair<uint64_t, uint64_t>>* hist_out) {
  std::vector<EdgeRecord> edges;
  for (auto& r : readers) {
    EdgeRecord e;
    while (true) {
      ASSIGN_OR_RETURN(bool more, r->Next(&e));
      if (!more) break;
      stats[kInputBytes] += sizeof(e);
      if (!(e.a < e.b)) return absl::DataLossError("dedup merge: edge with a >= b");
      edges.push_back(e);
    }
  }
  std::sort(edges.begin(), edges.end(), [](const EdgeRecord& x, const EdgeRecord& y) {
    return x.a != y.a ? x.a < y.a : x.b < y.b;
  });
  std::vector<uint64_t> nodes;
  nodes.reserve(edges.size() * 2);
  for (const EdgeRecord& e : edges) {
    nodes.push_back(e.a);
    nodes.push_back(e.b);
  }
  std::sort(nodes.begin(), nodes.end());
  nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
  auto idx = [&](uint64_t key) {
    return static_cast<uint32_t>(std::lower_bound(nodes.begin(), nodes.end(), key) - nodes.begin());
  };
  // Union-find; the root of a set is its smallest index (the first document in input order).
  std::vector<uint32_t> parent(nodes.size());
  std::iota(parent.begin(), parent.end(), 0u);
  auto find = [&](uint32_t x) {
    uint32_t r = x;
    while (parent[r] != r) r = parent[r];
    while (parent[x] != r) {
      uint32_t n = parent[x];
      parent[x] = r;
      x = n;
    }
    return r;
  };
  // A removed document points to the partner of its most similar edge to an earlier document
  // (the edge that removes it); only when it has none (it joins the cluster through later
  // documents) to the partner of its most similar edge.
  struct Best {
    double sim = -1;
    uint32_t kind = 0;
    uint64_t partner = 0;
  };
  std::vector<Best> best(nodes.size());
  auto offer = [](Best& b, uint64_t partner, double sim, uint32_t kind) {
    bool better = sim > b.sim || (sim == b.sim && (kind < b.kind || (kind == b.kind && partner < b.partner)));
    if (b.sim < 0 || better) b = Best{sim, kind, partner};
  };
  for (const EdgeRecord& e : edges) {
    uint32_t x = idx(e.a), y = idx(e.b);
    offer(best[y], e.a, e.similarity, e.kind);
    uint32_t rx = find(x), ry = find(y);
    if (rx != ry) parent[std::max(rx, ry)] = std::min(rx, ry);
  }
  // Documents without an edge to an earlier one: their later partners.
  std::vector<bool> no_earlier(nodes.size());
  for (uint32_t i = 0; i < nodes.size(); ++i) no_earlier[i] = best[i].sim < 0;
  for (const EdgeRecord& e : edges) {
    uint32_t x = idx(e.a);
    if (no_earlier[x]) offer(best[x], e.b, e.similarity, e.kind);
  }
  std::vector<uint32_t> root(nodes.size());
  std::vector<uint32_t> size(nodes.size(), 0);
  for (uint32_t i = 0; i < nodes.size(); ++i) {
    root[i] = find(i);
    ++size[root[i]];
  }
  std::vector<uint64_t> cluster_no(nodes.size(), 0);
  uint64_t clusters = 0;
  std::map<uint64_t, uint64_t> hist;
  for (uint32_t i = 0; i < nodes.size(); ++i) {
    if (root[i] == i) {
      cluster_no[i] = clusters++;
      ++hist[size[i]];
    }
  }
  ASSIGN_OR_RETURN(auto clusters_w,
                   FileWriter::Open(c.env, JoinPath(dir, TaskFileName("clusters", 0, 1)),
                                    c.Header(Kind::kClusters, sizeof(ClusterRecord))));
  for (uint32_t i = 0; i < nodes.size(); ++i) {
    if (root[i] == i) continue;
    const Best& b = best[i];
    ClusterRecord r{nodes[i], nodes[root[i]], b.partner, b.sim, cluster_no[root[i]], b.kind,
                    size[root[i]]};
    RETURN_IF_ERROR(clusters_w->Add(r));
    if (b.kind == static_cast<uint32_t>(PairKind::kExact)) {
      ++stats[kRemovedExact];
    } else {
      ++stats[kRemovedNear];
    }
  }
  RETURN_IF_ERROR(clusters_w->Finish());
  stats[kClusters] = clusters;
  for (const auto& [sz, n] : hist) hist_out->emplace_back(sz, n);
  return absl::OkStatus();
}

absl::Status RunMerge(Ctx& c) {
  Stopwatch sw;
  std::vector<uint64_t> stats = NewStats();
  const std::string dir = c.Dir("merge");
  RETURN_IF_ERROR(c.env->CreateDirs(dir));
  ASSIGN_OR_RETURN(auto readers, OpenAll(c, "clusters", "edges", DedupStage::kClusters,
                                         Kind::kEdges, sizeof(EdgeRecord)));
  uint64_t total_edges = 0;
  for (const auto& r : readers) total_edges += r->records();
  // In memory while the edges fit half the budget, else in passes over sorted files.
  // (The in-memory structures are freed before the ids are joined.)
  std::vector<std::pair<uint64_t, uint64_t>> hist;
  if (total_edges > c.opt.memory_limit / 2 / kInMemoryMergeBytesPerEdge ||
      internal::force_external_merge_for_testing) {
    RETURN_IF_ERROR(MergeExternal(c, readers, stats, dir, &hist));
  } else {
    RETURN_IF_ERROR(MergeInMemory(c, readers, stats, dir, &hist));
  }
  RETURN_IF_ERROR(WriteRemovedIds(c, dir, stats));
  for (const auto& [s, n] : hist) {
    stats.push_back(s);
    stats.push_back(n);
  }
  return WriteStats(c, DedupStage::kMerge, std::move(stats), sw);
}

// ---------------------------------------------------------------------------------------------
// filter

std::string RemovedJson(const ClusterRecord& r, const std::string& kept_id,
                        const std::string& dup_id) {
  std::string s = "\"dedup\":{\"reason\":";
  s += r.kind == static_cast<uint32_t>(PairKind::kExact) ? "\"exact\"" : "\"near\"";
  absl::StrAppend(&s, ",\"cluster\":", r.cluster, ",\"cluster_size\":", r.cluster_size,
                  ",\"kept\":");
  AppendJsonString(&s, kept_id);
  s += ",\"duplicate_of\":";
  AppendJsonString(&s, dup_id);
  s += ",\"similarity\":";
  s += JsonDouble(r.similarity);
  s += "}";
  return s;
}

absl::Status RunFilter(Ctx& c) {
  Stopwatch sw;
  std::vector<uint64_t> stats = NewStats();
  const std::string merge_dir = c.Dir("merge");
  const std::string clusters_path = JoinPath(merge_dir, TaskFileName("clusters", 0, 1));
  const std::string kept_ids_path = JoinPath(merge_dir, TaskFileName("kept-ids", 0, 1));
  const std::string dup_ids_path = JoinPath(merge_dir, TaskFileName("dup-ids", 0, 1));
  if (!c.env->FileExists(clusters_path) || !c.env->FileExists(kept_ids_path) ||
      !c.env->FileExists(dup_ids_path)) {
    return absl::FailedPreconditionError(
        absl::StrCat("no merge output in ", merge_dir, ": run the 'merge' stage first"));
  }
  {
    ASSIGN_OR_RETURN(auto r, FileReader::Open(c.env, clusters_path, Kind::kClusters,
                                              sizeof(ClusterRecord)));
    RETURN_IF_ERROR(c.CheckFingerprint(*r, clusters_path));
  }
  // The removed documents, sorted by document: merge-joined in the consumer below, which sees this
  // task's documents in input order; records of other tasks' splits are read past (and checked).
  ASSIGN_OR_RETURN(auto removed, FileReader::Open(c.env, clusters_path, Kind::kClusters,
                                                  sizeof(ClusterRecord)));
  ClusterRecord next_removed{};
  bool have_removed = false;
  uint64_t last_removed = 0, read_removed = 0;
  auto advance_removed = [&]() -> absl::Status {
    ASSIGN_OR_RETURN(have_removed, removed->Next(&next_removed));
    if (have_removed) {
      if (read_removed++ > 0 && next_removed.doc <= last_removed) {
        return absl::DataLossError(absl::StrCat(clusters_path, ": removed documents out of order"));
      }
      last_removed = next_removed.doc;
    }
    return absl::OkStatus();
  };
  RETURN_IF_ERROR(advance_removed());
  // The ids written into the removed records, sorted by the removed document, streamed alike.
  struct IdStream {
    std::string path;
    std::unique_ptr<FileReader> reader;
    uint64_t key = 0;
    std::string id;
    bool valid = false;
    absl::Status Advance() {
      const uint64_t last = key;
      const bool first = !valid;
      ASSIGN_OR_RETURN(valid, reader->NextId(&key, &id));
      if (valid && !first && key <= last) {
        return absl::DataLossError(absl::StrCat(path, ": ids out of order"));
      }
      return absl::OkStatus();
    }
    // The id recorded for removed document `doc` ("" if none, as for a document without an id).
    absl::StatusOr<std::string> Of(uint64_t doc) {
      while (valid && key < doc) RETURN_IF_ERROR(Advance());
      return valid && key == doc ? id : std::string();
    }
  };
  IdStream id_streams[2];
  for (int i = 0; i < 2; ++i) {
    IdStream& st = id_streams[i];
    st.path = i == 0 ? kept_ids_path : dup_ids_path;
    ASSIGN_OR_RETURN(st.reader, FileReader::Open(c.env, st.path, Kind::kIds, 0));
    RETURN_IF_ERROR(c.CheckFingerprint(*st.reader, st.path));
    RETURN_IF_ERROR(st.Advance());
  }
  std::vector<std::pair<uint64_t, uint64_t>> dup_lines;
  if (c.opt.line_dedup) {
    ASSIGN_OR_RETURN(auto readers, OpenAll(c, "buckets", "duplines", DedupStage::kBuckets,
                                           Kind::kDupLines, sizeof(LineRecord)));
    for (auto& r : readers) {
      LineRecord l;
      while (true) {
        ASSIGN_OR_RETURN(bool more, r->Next(&l));
        if (!more) break;
        dup_lines.emplace_back(l.hi, l.lo);
      }
    }
    std::sort(dup_lines.begin(), dup_lines.end());
  }
  const std::string prefix =
      c.run.tasks == 1 ? std::string("dedup")
                       : absl::StrFormat("dedup-%05d-of-%05d", c.run.task, c.run.tasks);
  const std::string removed_dir = JoinPath(c.output_dir, "removed");
  RETURN_IF_ERROR(c.env->CreateDirs(c.output_dir));
  RETURN_IF_ERROR(c.env->CreateDirs(removed_dir));
  // Parts of an earlier run: this task's own, and any written with another task count.
  const std::string same_count = absl::StrFormat("-of-%05d-", c.run.tasks);
  for (const std::string& d : {c.output_dir, removed_dir}) {
    ASSIGN_OR_RETURN(std::vector<std::string> names, c.env->ListDir(d));
    for (const std::string& n : names) {
      if (n.rfind("dedup-", 0) != 0) continue;
      const bool own = n.rfind(prefix + "-", 0) == 0;
      const bool other_count = c.run.tasks == 1 || n.size() < 6 + 5 + same_count.size() ||
                               n.compare(11, same_count.size(), same_count) != 0;
      if (own || other_count) RETURN_IF_ERROR(c.env->RemoveFile(JoinPath(d, n)));
    }
  }
  ASSIGN_OR_RETURN(auto kept_w, RecordWriter::Open(c.env, c.output_dir, prefix, c.opt.output));
  ASSIGN_OR_RETURN(auto removed_w, RecordWriter::Open(c.env, removed_dir, prefix, c.opt.output));

  const std::vector<size_t> mine = TaskSplitIndices(c, c.run.task, c.run.tasks);
  uint64_t total_bytes = 0;
  for (size_t i : mine) total_bytes += c.splits[i].bytes;
  Progress progress("dedup filter", total_bytes, Progress::Unit::kBytes, !c.run.progress);
  struct Out {
    uint64_t key = 0;
    Document doc;
    std::string extra;
    int where = 0;  // 0 kept, 1 removed (duplicate), 2 rejected, 3 removed (lines)
    int reason = 0;
    uint64_t lines_removed = 0;
    // Line dedup's text, used unless the consumer finds the document removed as a duplicate.
    std::string lined_text;
    bool text_changed = false;
  };
  const size_t window = SplitWindow(c, 2);
  RETURN_IF_ERROR(OrderedParallel<std::vector<Out>>(
      c.pool.get(), mine.size(), window,
      [&](size_t i) -> absl::StatusOr<std::vector<Out>> {
        std::vector<Out> outs;
        RETURN_IF_ERROR(ForEachDoc(c, mine[i], [&](uint64_t key, const Document& doc) -> absl::Status {
          progress.Add(doc.input_bytes);
          Out o;
          o.key = key;
          o.doc = doc;
          if (!doc.error.empty()) {
            o.where = 2;
            o.extra = "\"dedup\":{\"reason\":\"rejected\",\"error\":";
            AppendJsonString(&o.extra, doc.error);
            o.extra += "}";
          } else if (!dup_lines.empty()) {
            std::string text;
            text.reserve(doc.text.size());
            uint64_t dropped = 0;
            ForEachLine(doc.text, [&](std::string_view line, bool newline) {
              if (!IsBlank(line)) {
                Hash128 h = Hash128Of(line);
                if (std::binary_search(dup_lines.begin(), dup_lines.end(),
                                       std::make_pair(h.high, h.low))) {
                  ++dropped;
                  return;
                }
              }
              text.append(line);
              if (newline) text.push_back('\n');
            });
            if (dropped > 0) {
              o.lines_removed = dropped;
              if (IsBlank(text)) {
                o.where = 3;
                o.extra = absl::StrCat("\"dedup\":{\"reason\":\"lines\",\"lines_removed\":",
                                       dropped, "}");
              } else {
                o.lined_text = std::move(text);
                o.text_changed = true;
              }
            }
          }
          outs.push_back(std::move(o));
          return absl::OkStatus();
        }));
        return outs;
      },
      [&](size_t, std::vector<Out>&& outs) -> absl::Status {
        for (Out& o : outs) {
          while (have_removed && next_removed.doc < o.key) RETURN_IF_ERROR(advance_removed());
          if (have_removed && next_removed.doc == o.key) {
            if (o.where != 2) {
              o.where = 1;
              o.lines_removed = 0;
              o.text_changed = false;
              o.reason = static_cast<int>(next_removed.kind);
              ASSIGN_OR_RETURN(std::string kept_id, id_streams[0].Of(next_removed.doc));
              ASSIGN_OR_RETURN(std::string dup_id, id_streams[1].Of(next_removed.doc));
              o.extra = RemovedJson(next_removed, kept_id, dup_id);
            }
            RETURN_IF_ERROR(advance_removed());
          }
          if (o.text_changed) o.doc.text = std::move(o.lined_text);
          ++stats[kDocsIn];
          stats[kBytesIn] += o.doc.input_bytes;
          stats[kInputBytes] += o.doc.input_bytes;
          switch (o.where) {
            case 0:
              ++stats[kDocsOut];
              stats[kBytesOut] += o.doc.text.size();
              stats[kLinesRemoved] += o.lines_removed;
              RETURN_IF_ERROR(kept_w->Append(o.doc));
              break;
            case 1:
              ++stats[kDocsRemoved];
              ++stats[o.reason == static_cast<int>(PairKind::kExact) ? kRemovedExact : kRemovedNear];
              RETURN_IF_ERROR(removed_w->Append(o.doc, o.extra));
              break;
            case 2:
              ++stats[kDocsRejected];
              RETURN_IF_ERROR(removed_w->Append(o.doc, o.extra));
              break;
            default:
              ++stats[kDocsRemoved];
              ++stats[kRemovedLines];
              stats[kLinesRemoved] += o.lines_removed;
              RETURN_IF_ERROR(removed_w->Append(o.doc, o.extra));
              break;
          }
        }
        return absl::OkStatus();
      }));
  // Read the rest, so that every task checks the whole file's checksum.
  while (have_removed) RETURN_IF_ERROR(advance_removed());
  for (IdStream& st : id_streams) {
    while (st.valid) RETURN_IF_ERROR(st.Advance());
  }
  RETURN_IF_ERROR(kept_w->Finish().status());
  RETURN_IF_ERROR(removed_w->Finish().status());
  progress.Finish();
  if (stats[kDocsIn] != stats[kDocsOut] + stats[kDocsRemoved] + stats[kDocsRejected]) {
    return absl::InternalError("dedup filter: documents in != kept + removed + rejected");
  }
  return WriteStats(c, DedupStage::kFilter, std::move(stats), sw);
}

// ---------------------------------------------------------------------------------------------
// report

void FillReportParams(const Ctx& c, DedupReport* r) {
  r->num_perm = c.opt.num_perm;
  r->bands = c.opt.near ? c.opt.bands : 0;
  r->rows = c.opt.near ? c.opt.rows : 0;
  r->threshold = c.opt.threshold;
  r->memory_limit = c.opt.memory_limit;
  r->simd_target = MinHasher::SimdTarget();
}

absl::StatusOr<DedupReport> RunReport(Ctx& c) {
  DedupReport rep;
  FillReportParams(c, &rep);
  std::vector<uint64_t> sig_docs;
  for (DedupStage st : {DedupStage::kSignatures, DedupStage::kBuckets, DedupStage::kClusters,
                        DedupStage::kMerge, DedupStage::kFilter}) {
    ASSIGN_OR_RETURN(auto all, ReadStats(c, st));
    StageTiming t;
    t.stage = DedupStageName(st);
    t.tasks = static_cast<int>(all.size());
    std::vector<uint64_t> sum(kNumSlots, 0);
    for (const auto& v : all) {
      const double secs = static_cast<double>(v[kWallUs]) / 1e6;
      t.seconds = std::max(t.seconds, secs);
      t.cpu_seconds += secs;
      t.input_bytes += v[kInputBytes];
      t.peak_rss_bytes = std::max(t.peak_rss_bytes, v[kPeakRss]);
      for (size_t i = 0; i < kNumSlots; ++i) sum[i] += v[i];
    }
    rep.peak_rss_bytes = std::max(rep.peak_rss_bytes, t.peak_rss_bytes);
    rep.stages.push_back(t);
    switch (st) {
      case DedupStage::kSignatures:
        sig_docs = sum;
        break;
      case DedupStage::kBuckets:
        rep.duplicated_lines = sum[kDupLines];
        break;
      case DedupStage::kClusters:
        rep.candidate_pairs = sum[kCandidatePairs];
        rep.exact_pairs = sum[kExactPairs];
        rep.verified_pairs = sum[kVerifiedPairs];
        rep.verify_passes = sum[kVerifyPasses];
        rep.spilled_set_bytes = sum[kSpilledSetBytes];
        break;
      case DedupStage::kMerge:
        rep.clusters = sum[kClusters];
        rep.merge_rounds = sum[kMergeRounds];
        for (const auto& v : all) {
          for (size_t i = kNumSlots; i + 1 < v.size(); i += 2) rep.cluster_sizes[v[i]] += v[i + 1];
        }
        break;
      case DedupStage::kFilter:
        rep.counts.docs_in = sum[kDocsIn];
        rep.counts.docs_out = sum[kDocsOut];
        rep.counts.docs_removed = sum[kDocsRemoved];
        rep.counts.docs_rejected = sum[kDocsRejected];
        rep.counts.bytes_in = sum[kBytesIn];
        rep.counts.bytes_out = sum[kBytesOut];
        rep.removed_exact = sum[kRemovedExact];
        rep.removed_near = sum[kRemovedNear];
        rep.removed_lines = sum[kRemovedLines];
        rep.lines_removed = sum[kLinesRemoved];
        break;
      default:
        break;
    }
  }
  if (!rep.counts.Balanced()) {
    return absl::InternalError(absl::StrCat(
        "dedup: document count mismatch: in ", rep.counts.docs_in, " != kept ", rep.counts.docs_out,
        " + removed ", rep.counts.docs_removed, " + rejected ", rep.counts.docs_rejected));
  }
  if (sig_docs[kDocsIn] != rep.counts.docs_in) {
    return absl::InternalError(absl::StrCat("dedup: the signatures stage read ", sig_docs[kDocsIn],
                                            " documents but the filter stage ", rep.counts.docs_in,
                                            " (did the input change between stages?)"));
  }
  RETURN_IF_ERROR(WriteFileAtomic(c.env, JoinPath(c.output_dir, "dedup_report.json"),
                                  rep.ToJson() + "\n"));
  return rep;
}

// Removes what the stages write in `work` (and `work` itself when that leaves it empty); anything
// else a user put there is left alone.
absl::Status ClearWork(Env* env, const std::string& work) {
  if (!env->IsDirectory(work)) return absl::OkStatus();
  for (const char* sub : {"sig", "buckets", "clusters", "merge", "stats", "tmp"}) {
    RETURN_IF_ERROR(env->RemoveAll(JoinPath(work, sub)));
  }
  ASSIGN_OR_RETURN(std::vector<std::string> left, env->ListDir(work));
  if (left.empty()) RETURN_IF_ERROR(env->RemoveAll(work));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<DedupReport> RunDedupStage(Env* env, DedupStage stage,
                                          const std::vector<std::string>& inputs,
                                          const std::string& output_dir,
                                          const DedupOptions& options, const RunOptions& run) {
  if (!StageIsParallel(stage) && run.tasks != 1) {
    return absl::InvalidArgumentError(absl::StrCat("dedup stage '", DedupStageName(stage),
                                                   "' runs as one task (--tasks 1), got --tasks ",
                                                   run.tasks));
  }
  ASSIGN_OR_RETURN(Ctx c, MakeCtx(env, inputs, output_dir, options, run));
  RETURN_IF_ERROR(env->CreateDirs(c.work));
  switch (stage) {
    case DedupStage::kSignatures:
      RETURN_IF_ERROR(RunSignatures(c));
      break;
    case DedupStage::kBuckets:
      RETURN_IF_ERROR(RunBuckets(c));
      break;
    case DedupStage::kClusters:
      RETURN_IF_ERROR(RunClusters(c));
      break;
    case DedupStage::kMerge:
      RETURN_IF_ERROR(RunMerge(c));
      break;
    case DedupStage::kFilter:
      RETURN_IF_ERROR(RunFilter(c));
      break;
    case DedupStage::kReport:
      return RunReport(c);
  }
  DedupReport rep;
  FillReportParams(c, &rep);
  return rep;
}

absl::StatusOr<DedupReport> RunDedup(Env* env, const std::vector<std::string>& inputs,
                                     const std::string& output_dir, const DedupOptions& options,
                                     const RunOptions& run) {
  if (run.tasks != 1 || run.task != 0) {
    return absl::InvalidArgumentError(
        "RunDedup runs the whole dedup on one machine; use RunDedupStage for --task/--tasks");
  }
  RETURN_IF_ERROR(options.Validate());
  const std::string work =
      options.work_dir.empty() ? JoinPath(output_dir, ".dedup-work") : options.work_dir;
  RETURN_IF_ERROR(ClearWork(env, work));
  DedupReport rep;
  for (DedupStage st : {DedupStage::kSignatures, DedupStage::kBuckets, DedupStage::kClusters,
                        DedupStage::kMerge, DedupStage::kFilter, DedupStage::kReport}) {
    ASSIGN_OR_RETURN(rep, RunDedupStage(env, st, inputs, output_dir, options, run));
  }
  if (!options.keep_work) RETURN_IF_ERROR(ClearWork(env, work));
  return rep;
}

}  // namespace grist::dedup
