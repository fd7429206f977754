// The dedup pipeline's merge stage (see dedup/dedup.h for the stage contract).

#include "dedup/internal/components.h"
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

}  // namespace

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
      c.opt.force_external_merge) {
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

}  // namespace grist::dedup::internal
