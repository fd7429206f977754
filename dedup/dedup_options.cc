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

absl::StatusOr<ExactNormalize> ParseExactNormalize(const std::string& s) {
  if (s == "none") return ExactNormalize::kNone;
  if (s == "whitespace") return ExactNormalize::kWhitespace;
  if (s == "lower") return ExactNormalize::kLower;
  return absl::InvalidArgumentError(absl::StrCat(
      "dedup.exact_normalize: expected none, whitespace or lower, got '", s, "'"));
}

}  // namespace

namespace internal {

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

}  // namespace grist::dedup
