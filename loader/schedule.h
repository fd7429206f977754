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
//
// Blends (K >= 2 components, each a release split with N_k samples and weight w_k): every step of
// G positions holds n_k = LargestRemainder(w_k / sum(w) * G) draws of component k (so its share of
// every global batch is within 1/G of its weight), interleaved inside the step by the error-greedy
// rule (position j goes to the component with the largest n_k*(j+1) - G*a_k, a_k its draws so far
// in the step; ties to the lower k). Component k has its own stream: its c-th draw is sample
// Perm(seed_k, c / N_k)(c % N_k), so each component has its own epochs. The schedule starts at a
// segment base (stream position P, each component's draws C_k before P); after t more steps
// component k has drawn C_k + t*n_k. A state stores p and every C_k(p), so a resume (or a weight
// change) at a step boundary starts a new segment there and no component repeats or skips a
// sample. One component is the single-release case above (C_0 = P, n_0 = G, seed_0 = seed).
#ifndef GRIST_LOADER_SCHEDULE_H_
#define GRIST_LOADER_SCHEDULE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace grist::loader {

// One release of a blend.
struct BlendComponent {
  uint64_t num_samples = 0;  // N_k
  double weight = 1.0;       // >= 0; the weights of a blend need not sum to 1
};

struct ScheduleOptions {
  uint64_t num_samples = 0;  // N (ignored when `blend` is set)
  // Empty: one release of num_samples. Two or more: a weighted blend.
  std::vector<BlendComponent> blend;
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

// Where the schedule's counting starts: stream position `start` (a step boundary) and the draws
// each component made before it (one entry per component).
struct Segment {
  uint64_t start = 0;
  std::vector<uint64_t> consumed;
  friend bool operator==(const Segment&, const Segment&) = default;
};

// Component `component`'s sample `index` (split-global within that release).
struct Draw {
  uint32_t component = 0;
  uint64_t index = 0;
};

class Schedule {
 public:
  // InvalidArgument (naming the values) for a zero or negative size, a global batch that
  // micro_batch_size * dp_size does not divide, a rank outside [0, dp_size), an empty split,
  // negative epochs, a run (epochs > 0) shorter than one global batch, or a blend with a negative,
  // non-finite or all-zero weight, or an empty component.
  static absl::StatusOr<Schedule> Create(const ScheduleOptions& options);
  // The same schedule counted from `segment` (from a loaded state); InvalidArgument when it has
  // the wrong number of components.
  absl::StatusOr<Schedule> WithSegment(Segment segment) const;

  const ScheduleOptions& options() const { return o_; }
  const Segment& segment() const { return seg_; }
  int num_components() const { return static_cast<int>(n_.size()); }
  bool is_blend() const { return !o_.blend.empty(); }
  // n_k: draws of component k in every step (they sum to G).
  const std::vector<uint64_t>& draws_per_step() const { return n_; }
  // Samples of component k (N_k).
  uint64_t component_samples(int k) const { return samples_[static_cast<size_t>(k)]; }
  // The seed of component k's order (the schedule's seed for a single release).
  uint64_t component_seed(int k) const;
  // Draws of every component before the step boundary `p` (>= segment().start).
  std::vector<uint64_t> ConsumedAt(uint64_t p) const;
  // The draw at stream position q (>= segment().start).
  Draw DrawAt(uint64_t q) const;
  // Micro batches per step on each rank (A).
  int64_t micro_batches_per_step() const { return accum_; }
  // Samples per step on each rank (G / D).
  int64_t rank_batch_size() const { return o_.global_batch_size / o_.dp_size; }
  // Stream positions that exist: E*N, or UINT64_MAX when unlimited.
  uint64_t stream_end() const;

  // The split-global index of the sample at stream position q (its component: DrawAt).
  uint64_t SampleAt(uint64_t q) const { return DrawAt(q).index; }
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
  // Full steps that fit from the step boundary p.
  uint64_t StepsFrom(uint64_t p) const;
  ScheduleOptions o_;
  int64_t accum_ = 1;
  Segment seg_;
  std::vector<uint64_t> samples_;  // N_k
  std::vector<uint64_t> n_;        // draws per step
  // Blends: position j of a step goes to component pat_comp_[j] as its pat_rank_[j]-th draw.
  std::vector<uint32_t> pat_comp_;
  std::vector<uint32_t> pat_rank_;
};

// n_k = the largest-remainder apportionment of `total` by `weights` (ties to the lower index).
std::vector<uint64_t> Apportion(const std::vector<double>& weights, uint64_t total);

// One component of a blend's state.
struct ComponentState {
  std::string release_id;
  std::string split;
  double weight = 1.0;
  uint64_t consumed = 0;     // draws before the state's step (C_k(p))
  uint64_t num_samples = 0;  // informational: epoch = consumed / num_samples
  friend bool operator==(const ComponentState&, const ComponentState&) = default;
};

// The serializable state (`state_dict()` in Python). `release_id` ties it to one release; a blend's
// state has release_id "blend:" + the components' ids joined by "+" and lists its components.
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
  std::vector<ComponentState> blend;  // empty for one release

  // One-line JSON object with every field above plus "format", "version" and "epoch" ("blend" only
  // for blends, each entry with its own "epoch").
  std::string ToJson() const;
  // InvalidArgument naming the field for malformed JSON, a missing or mistyped field, or a wrong
  // format/version.
  static absl::StatusOr<LoaderState> FromJson(const std::string& json);
};

// Checks that `state` may be loaded into a loader of `release_id`/`split` with `schedule`, and
// returns the position to continue from. FailedPrecondition (naming the field) for another
// release, split or seed, for a mid-step state whose global batch, micro batch or dp_size differ,
// and, when not `elastic`, for another global batch.
absl::StatusOr<Position> CheckResume(const LoaderState& state, const std::string& release_id,
                                     const std::string& split, const Schedule& schedule,
                                     bool elastic = true);

// CheckResume for a blend (or a single release: `components` of one entry, whose release_id and
// split the state's top-level fields carry) and the segment to continue from. Components are
// matched by position: another release or split at entry k is FailedPrecondition naming
// "blend[k].release_id"/"blend[k].split"; other weights are allowed at a step boundary (a new
// segment), FailedPrecondition naming "weight" mid-step.
struct ResumePoint {
  Position position;
  Segment segment;
};
absl::StatusOr<ResumePoint> CheckBlendResume(const LoaderState& state,
                                             const std::vector<ComponentState>& components,
                                             const Schedule& schedule, bool elastic);

}  // namespace grist::loader

#endif  // GRIST_LOADER_SCHEDULE_H_
