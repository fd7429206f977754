// DedupOptions, DedupReport and the stage names (dedup/dedup.h).

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
#include "absl/strings/str_join.h"
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
#include "dedup/internal/stage_context.h"

namespace grist::dedup {

// ---------------------------------------------------------------------------------------------
// Options

namespace {

// The spellings of ExactNormalize in configs, flags and the stage fingerprint.
const std::vector<std::pair<std::string, ExactNormalize>>& ExactNormalizeNames() {
  static const auto* names = new std::vector<std::pair<std::string, ExactNormalize>>{
      {"none", ExactNormalize::kNone},
      {"whitespace", ExactNormalize::kWhitespace},
      {"lower", ExactNormalize::kLower}};
  return *names;
}

OptionTable<DedupOptions>* BuildTable() {
  auto* t = new OptionTable<DedupOptions>("dedup.");
  t->Bool("dedup.exact", GRIST_OPTION_FIELD(exact), "Exact (XXH3-128) dedup");
  t->Enum("dedup.exact_normalize", GRIST_OPTION_FIELD(exact_normalize),
          "Text normalization before the exact hash", ExactNormalizeNames());
  t->Bool("dedup.near", GRIST_OPTION_FIELD(near), "Near-duplicate (MinHash LSH) dedup");
  t->Enum("dedup.shingle", GRIST_OPTION_FIELD(shingle.kind), "Shingle unit",
          std::vector<std::pair<std::string, ShingleKind>>{{"word", ShingleKind::kWord},
                                                           {"char", ShingleKind::kChar}});
  t->Int("dedup.ngram", GRIST_OPTION_FIELD(shingle.n), "Words (or bytes) per shingle", {1});
  t->Int("dedup.num_perm", GRIST_OPTION_FIELD(num_perm), "MinHash permutations", {1});
  t->Int("dedup.bands", GRIST_OPTION_FIELD(bands),
         "LSH bands (0 with rows 0: chosen from the threshold)", {0});
  t->Int("dedup.rows", GRIST_OPTION_FIELD(rows), "LSH rows per band", {0});
  t->Double("dedup.threshold", GRIST_OPTION_FIELD(threshold),
            "Jaccard threshold; given without bands/rows it also picks bands x rows", {0, 1});
  t->Bool("dedup.verify", GRIST_OPTION_FIELD(verify),
          "Verify candidate pairs by true Jaccard (off: faster, less precise)");
  t->Uint("dedup.seed", GRIST_OPTION_FIELD(seed), "Seed of the MinHash permutations");
  t->Bool("dedup.line_dedup", GRIST_OPTION_FIELD(line_dedup),
          "Also remove every line that occurs in more than one document");
  t->IntAccess(
       "dedup.memory_limit_mb",
       [](const DedupOptions& o) { return static_cast<int64_t>(o.memory_limit >> 20); },
       [](DedupOptions& o, int64_t mb) { o.memory_limit = static_cast<uint64_t>(mb) << 20; },
       "Memory budget per task in MB: sort buffers and the verification cache",
       {1, static_cast<double>(int64_t{1} << 40)})
      .Flags({"memory-limit"});
  t->String("dedup.work_dir", GRIST_OPTION_FIELD(work_dir),
            "Intermediate files, shared by all tasks (empty: DIR/.dedup-work)");
  t->Bool("dedup.keep_work", GRIST_OPTION_FIELD(keep_work),
          "Keep the intermediate files after a full run");
  t->String("dedup.text_field", GRIST_OPTION_FIELD(input.text_field), "JSON field holding the text");
  t->Enum("dedup.txt_mode", GRIST_OPTION_FIELD(input.txt_mode),
          "Plain-text files: one document per file, or per blank-line block",
          std::vector<std::pair<std::string, std::string>>{{"file", "file"}, {"blocks", "blocks"}});
  return t;
}

}  // namespace

namespace internal {

const char* ExactNormalizeName(ExactNormalize m) {
  for (const auto& [name, mode] : ExactNormalizeNames()) {
    if (mode == m) return name.c_str();
  }
  return "?";
}

}  // namespace internal

std::string NormalizeForExact(std::string_view text, ExactNormalize mode) {
  if (mode == ExactNormalize::kNone) return std::string(text);
  std::string out;
  out.reserve(text.size());
  bool pending_space = false;
  for (unsigned char c : text) {
    if (internal::IsAsciiSpace(c)) {
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

const OptionTable<DedupOptions>& DedupOptions::Table() {
  static const OptionTable<DedupOptions>* table = BuildTable();
  return *table;
}

absl::StatusOr<DedupOptions> DedupOptions::FromConfig(const Config& config) {
  DedupOptions o;
  // A threshold without bands or rows selects bands x rows automatically.
  if (config.Has("dedup.threshold") && !config.Has("dedup.bands") && !config.Has("dedup.rows")) {
    o.bands = o.rows = 0;
  }
  RETURN_IF_ERROR(Table().Read(config, &o));
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

std::string DedupReport::CountsJson() const {
  JsonWriter w(0);
  w.BeginObject().Field("docs_in", counts.docs_in).Field("docs_out", counts.docs_out);
  w.Field("docs_rejected", counts.docs_rejected).Field("docs_removed", counts.docs_removed);
  w.Field("removed_exact", removed_exact).Field("removed_near", removed_near);
  w.Field("removed_lines", removed_lines).Field("clusters", clusters);
  w.Field("bands", static_cast<int64_t>(bands)).Field("rows", static_cast<int64_t>(rows));
  w.Field("threshold", threshold).EndObject();
  return w.Take();
}

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
  w.Field("sets_from_input", sets_from_input);
  w.Field("trial_splits", trial_splits).Field("trial_candidate_splits", trial_candidate_splits);
  w.Field("shingles_kept", shingles_kept).Field("splits_kept", splits_kept);
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

std::vector<std::string> DedupStageNames() {
  std::vector<std::string> out;
  for (DedupStage s : kDedupStages) out.push_back(DedupStageName(s));
  return out;
}

absl::StatusOr<DedupStage> ParseDedupStage(const std::string& name) {
  for (DedupStage s : kDedupStages) {
    if (name == DedupStageName(s)) return s;
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown dedup stage '", name, "' (expected ",
                                                 absl::StrJoin(DedupStageNames(), ", "), ")"));
}

bool StageIsParallel(DedupStage stage) {
  return stage != DedupStage::kMerge && stage != DedupStage::kReport;
}

}  // namespace grist::dedup
