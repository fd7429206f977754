// Connected components of the duplicate graph for the merge stage (dedup/merge_stage.cc): every
// edge file of the clusters stage in, the clusters file (one record per removed document, naming
// its cluster's kept document, the smallest of the component) and the removed documents' kept and
// duplicate_of ids out, in `dir`. Two algorithms with byte-identical output: union-find in memory,
// or rounds of min-neighbour linking and pointer jumping over sorted, checksummed scratch files in
// work/tmp within the memory budget. Private to grist::dedup.
#ifndef GRIST_DEDUP_INTERNAL_COMPONENTS_H_
#define GRIST_DEDUP_INTERNAL_COMPONENTS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "dedup/internal/stage_context.h"

namespace grist::dedup::internal {

// What the in-memory merge holds per edge at most: the edge (32 bytes), its two documents' keys
// (16), and per document the union-find parent, best edge, root, size and cluster number (2 x 44),
// with slack for the vectors' growth. The merge runs in memory while the edges fit half the budget.
constexpr uint64_t kInMemoryMergeBytesPerEdge = 160;

// Both write dir/clusters, add their counters to `stats` and the (cluster size, count) histogram to
// *hist_out; `readers` are the clusters stage's edge files (consumed).
absl::Status MergeInMemory(Ctx& c, std::vector<std::unique_ptr<FileReader>>& readers,
                           std::vector<uint64_t>& stats, const std::string& dir,
                           std::vector<std::pair<uint64_t, uint64_t>>* hist_out);
absl::Status MergeExternal(Ctx& c, std::vector<std::unique_ptr<FileReader>>& readers,
                           std::vector<uint64_t>& stats, const std::string& dir,
                           std::vector<std::pair<uint64_t, uint64_t>>* hist_out);

// Writes the kept-ids and dup-ids files that the filter stage joins with dir/clusters.
absl::Status WriteRemovedIds(Ctx& c, const std::string& dir, std::vector<uint64_t>& stats);

}  // namespace grist::dedup::internal

#endif  // GRIST_DEDUP_INTERNAL_COMPONENTS_H_
