#include "dedup/dedup.h"

#include <memory>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "common/env.h"
#include "common/status_macros.h"
#include "common/sysinfo.h"
#include "dedup/internal/stage_context.h"

namespace grist::dedup {

using internal::ClearWork;
using internal::Ctx;
using internal::FillReportParams;
using internal::MakeCtx;

namespace {

// Gives the pages malloc holds free back to the system between stages when the process holds
// more than half the budget: each stage's buffers are freed when it ends, but glibc keeps what
// its per-thread arenas freed below their tops, so the next stage's peak RSS would count the last
// one's leftovers on top of its own (the filter of four copies of a compressed corpus at
// --memory-limit 64: 46-51 MB alone, up to 67 MB after the other stages in one process). Not
// below half: the next stage would touch fresh pages again (on the dev VM a trim after every
// stage cost a one-thread dedup of the peer sample 6% of its CPU time).
void ReleaseFreeMemory(uint64_t budget) {
#if defined(__GLIBC__)
  if (CurrentRssBytes() > budget / 2) ::malloc_trim(0);
#endif
}

// Runs `stage` on a context made for it (or for the whole chain, which is the same context).
absl::StatusOr<DedupReport> RunStageOn(Ctx& c, DedupStage stage) {
  RETURN_IF_ERROR(c.env->CreateDirs(c.work));
  switch (stage) {
    case DedupStage::kSignatures:
      RETURN_IF_ERROR(internal::RunSignatures(c));
      break;
    case DedupStage::kBuckets:
      RETURN_IF_ERROR(internal::RunBuckets(c));
      break;
    case DedupStage::kClusters:
      RETURN_IF_ERROR(internal::RunClusters(c));
      break;
    case DedupStage::kMerge:
      RETURN_IF_ERROR(internal::RunMerge(c));
      break;
    case DedupStage::kFilter:
      RETURN_IF_ERROR(internal::RunFilter(c));
      break;
    case DedupStage::kReport:
      return internal::RunReport(c);
  }
  DedupReport rep;
  FillReportParams(c, &rep);
  return rep;
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
  return RunStageOn(c, stage);
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
  // One context for the whole chain: the inputs are listed, split and (plain JSONL) scanned for
  // line numbers once, not once per stage, and one thread pool serves every stage.
  ASSIGN_OR_RETURN(Ctx c, MakeCtx(env, inputs, output_dir, options, run));
  c.sync_work = options.keep_work;  // else the work is cleared at both ends: scratch
  // The candidates' shingles for verification from memory rather than a second read of the
  // input, in an eighth of the budget (the buckets stage drops them when its records need it).
  if (c.opt.keep_shingles != DedupOptions::KeepShingles::kNever && c.opt.near && c.opt.verify) {
    c.shingle_cache = std::make_unique<internal::ShingleCache>(c.splits.size(),
                                                               c.opt.memory_limit / 8);
  }
  DedupReport rep;
  for (DedupStage st : {DedupStage::kSignatures, DedupStage::kBuckets, DedupStage::kClusters,
                        DedupStage::kMerge, DedupStage::kFilter, DedupStage::kReport}) {
    ASSIGN_OR_RETURN(rep, RunStageOn(c, st));
    ReleaseFreeMemory(c.opt.memory_limit);
  }
  if (!options.keep_work) RETURN_IF_ERROR(ClearWork(env, work));
  return rep;
}

}  // namespace grist::dedup
