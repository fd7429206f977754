// The dedup pipeline's report stage (see dedup/dedup.h for the stage contract).

#include "dedup/internal/stage_context.h"

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

namespace grist::dedup::internal {

namespace {

// ---------------------------------------------------------------------------------------------
// report

}  // namespace

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
        rep.trial_splits = sum[kTrialSplits];
        rep.trial_candidate_splits = sum[kTrialCandidateSplits];
        rep.shingles_kept = sum[kShinglesKept];
        rep.splits_kept = sum[kSplitsKept];
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
        rep.sets_from_input = sum[kSetsFromInput];
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

}  // namespace grist::dedup::internal
