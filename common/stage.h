// What every offline pipeline stage (clean, dedup, tokenize encode, pack/shard) shares: how it is
// run (threads, task slice, progress), and the document accounting it reports.
//
// Stage entry points follow one shape, so `grist build` and the Slurm scripts can drive them:
//
//   absl::StatusOr<XReport> RunX(Env* env, const std::vector<std::string>& inputs,
//                                const std::string& output_dir, const XOptions& options,
//                                const RunOptions& run);
//
// where XOptions has `static absl::StatusOr<XOptions> FromConfig(const Config&)` reading its own
// section ("clean.*", "dedup.*", ...), and the report has `std::string ToJson() const`.
#ifndef GRIST_COMMON_STAGE_H_
#define GRIST_COMMON_STAGE_H_

#include <cstdint>
#include <string>

namespace grist {

struct RunOptions {
  int threads = 0;      // 0 = all CPUs
  int task = 0;         // this task's index in [0, tasks)
  int tasks = 1;        // number of task slices the inputs are cut into
  bool progress = true; // show the progress display (see common/progress.h)
};

// Document accounting of one stage: in == out + rejected + removed, always; a stage checks this
// itself before reporting success.
struct DocCounts {
  uint64_t docs_in = 0;
  uint64_t docs_out = 0;
  uint64_t docs_rejected = 0;  // failed a check (bad record, quality filter), kept with reasons
  uint64_t docs_removed = 0;   // removed as duplicates, kept with the duplicate's id
  uint64_t bytes_in = 0;
  uint64_t bytes_out = 0;
  bool Balanced() const { return docs_in == docs_out + docs_rejected + docs_removed; }
};

}  // namespace grist

#endif  // GRIST_COMMON_STAGE_H_
