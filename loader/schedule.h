// The loader's order and batch arithmetic, and its resumable state.
//
// The global stream: position q (0, 1, 2, ...) holds sample Perm(seed, q / N)(q % N) of the split's
// N samples, where Perm is the FeistelPermutation keyed by EpochKey(seed, epoch). Epochs follow one
// another without a gap, so every sample appears exactly once in each window [e*N, (e+1)*N), and the
// order depends on (seed, epoch) alone.
//
// A training step consumes G = global_batch_size consecutive stream positions [p, p + G). Rank r of
// D data-parallel ranks takes the contiguous slice [p + r*G/D, p + (r+1)*G/D), delivered as
// A = G / (D*M) micro batches of M = micro_batch_size samples. Tensor- or pipeline-parallel ranks of
// one data-parallel group pass the same dp_rank and so get identical batches.
//
// With `epochs` E > 0 the stream ends at E*N and a step runs only when all G of its positions exist
// (the last E*N mod G positions are dropped); E = 0 never ends.
//
// The state is the stream position p of the current step and the micro batch index m within it.
// Loading a state saved at a step boundary (m == 0) works with any G, M, D (elastic resume continues
// the same global order); a state saved mid-step needs the same G, M and D.
#ifndef GRIST_LOADER_SCHEDULE_H_
#define GRIST_LOADER_SCHEDULE_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace grist::loader {

struct ScheduleOptions {
  uint64_t num_samples = 0;  // N
  int64_t micro_batch_size = 0;
  int64_t global_batch_size = 0;
  int64_t dp_rank = 0;
  int64_t dp_size = 1;
  uint64_t seed = 0;
  int64_t epochs = 1;  // 0: unlimited
};

// Where a loader stands: the next micro batch it returns is micro batch `micro_index` of the step
// that starts at stream position `consumed_samples`.
struct Position {
  uint64_t consumed_samples = 0;
  int64_t micro_index = 0;
  friend bool operator==(const Position&, const Position&) = default;
};

class Schedule {
 public:
  // InvalidArgument (naming the values) for a zero or negative size, a global batch that
  // micro_batch_size * dp_size does not divide, a rank outside [0, dp_size), an empty split,
  // negative epochs, or a run (epochs > 0) shorter than one global batch.
  static absl::StatusOr<Schedule> Create(const ScheduleOptions& options);

  const ScheduleOptions& options() const { return o_; }
  // Micro batches per step on each rank (A).
  int64_t micro_batches_per_step() const { return accum_; }
  // Samples per step on each rank (G / D).
  int64_t rank_batch_size() const { return o_.global_batch_size / o_.dp_size; }
  // Stream positions that exist: E*N, or UINT64_MAX when unlimited.
  uint64_t stream_end() const;

  // The split-global index of the sample at stream position q.
  uint64_t SampleAt(uint64_t q) const;
  // The stream position of sample `j` of the micro batch at `pos` for this rank (j < M).
  uint64_t StreamPosition(const Position& pos, int64_t j) const;
  // Whether the micro batch at `pos` exists (its step fits before stream_end()).
  bool HasBatch(const Position& pos) const;
  // The position after `pos`.
  Position Advance(const Position& pos) const;
  // Micro batches this rank still returns from `pos` (INT64_MAX when unlimited).
  int64_t RemainingBatches(const Position& pos) const;

 private:
  explicit Schedule(const ScheduleOptions& o);
  ScheduleOptions o_;
  int64_t accum_ = 1;
};

// The serializable state (`state_dict()` in Python). `release_id` ties it to one release.
struct LoaderState {
  static constexpr const char* kFormat = "grist-loader-state";
  static constexpr int kVersion = 1;
  std::string release_id;
  std::string split;
  uint64_t seed = 0;
  Position position;
  int64_t global_batch_size = 0;
  int64_t micro_batch_size = 0;
  int64_t dp_size = 1;
  uint64_t num_samples = 0;  // informational: epoch = consumed_samples / num_samples

  // One-line JSON object with every field above plus "format", "version" and "epoch".
  std::string ToJson() const;
  // InvalidArgument naming the field for malformed JSON, a missing or mistyped field, or a wrong
  // format/version.
  static absl::StatusOr<LoaderState> FromJson(const std::string& json);
};

// Checks that `state` may be loaded into a loader of `release_id`/`split` with `schedule`, and
// returns the position to continue from. FailedPrecondition for another release, split or seed,
// or for a mid-step state whose global batch, micro batch or dp_size differ.
absl::StatusOr<Position> CheckResume(const LoaderState& state, const std::string& release_id,
                                     const std::string& split, const Schedule& schedule);

}  // namespace grist::loader

#endif  // GRIST_LOADER_SCHEDULE_H_
