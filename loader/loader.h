// The training data loader: a deterministic, resumable, data-parallel order over a release split
// (loader/schedule.h), filled into a ring of host buffers by prefetch worker threads and, on CUDA,
// copied to the GPU on the loader's own stream.
//
//   LoaderOptions o;  o.path = "release/"; o.micro_batch_size = 8; o.global_batch_size = 64;
//   ASSIGN_OR_RETURN(auto loader, Loader::Open(o));
//   while (true) {
//     auto batch = loader->Next();           // OutOfRange after the last batch
//     if (absl::IsOutOfRange(batch.status())) break;
//     ...  (*batch)->tensor("input_ids") ...
//   }
//   LoaderState s = loader->state();          // resume later with LoadState(s)
//
// Batch contents (docs/formats/release.md, "What the loader derives"), for M = micro_batch_size and
// S = seq_len: input_ids, labels, position_ids [M, S] (int64, or int32 on request); loss_mask
// [M, S] float32; cu_seqlens [k] int32 (cumulative segment lengths over the flattened M*S input
// positions, k <= M*S + 1); sample_index [M] int64 (split-global sample numbers).
//
// Memory and lifetime: a batch's tensors live in one buffer of the loader's pool; the buffer returns
// to the pool when the last std::shared_ptr<Batch> is released, which may happen on any thread and
// after the Loader is destroyed. The pool holds `prefetch` buffers in flight plus those the consumer
// still holds (it grows rather than deadlock when the consumer keeps batches).
//
// CUDA (device == kCuda): buffers are pinned (cudaHostAlloc) and mirrored by device buffers. A worker
// fills the pinned buffer, waits on the device buffer's release event, copies it on the loader's
// stream and records the copy event. Batch::WaitOn(stream) makes the consumer's stream wait on that
// event; when the batch is released, an event recorded on that stream guards the device buffer's
// reuse, and a pinned buffer is refilled only after its copy event has completed (the FFCV pattern).
//
// Errors: option errors at Open; I/O or data errors of a worker are returned by the Next() call that
// would have returned that batch, and by every later call (the loader stays failed).
//
// Thread safety: Next, state, LoadState are for one consumer thread. Batch is immutable and may be
// shared and released on any thread.
#ifndef GRIST_LOADER_LOADER_H_
#define GRIST_LOADER_LOADER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "loader/schedule.h"
#include "loader/source.h"

namespace grist::loader {

enum class Device { kCpu, kCuda };
enum class DType { kInt32, kInt64, kFloat32 };

// Field selection bits (LoaderOptions::fields).
enum Field : uint32_t {
  kInputIds = 1u << 0,
  kLabels = 1u << 1,
  kPositionIds = 1u << 2,
  kCuSeqlens = 1u << 3,
  kLossMask = 1u << 4,
  kSampleIndex = 1u << 5,
  kAllFields = (1u << 6) - 1,  // the default set ("all")
  // Blends: which release each row came from ([M] int64, the index in the blend). Part of a
  // blend's default fields; never of a single release's.
  kReleaseIndex = 1u << 6,
  kValidFields = (1u << 7) - 1,
};
// "input_ids", "labels", ... for one Field bit; nullptr for others.
const char* FieldName(uint32_t field);
// Parses a comma-separated list of field names; InvalidArgument naming an unknown one.
absl::StatusOr<uint32_t> ParseFields(const std::string& names);

// One release of a blend: its folder and weight.
struct BlendEntry {
  double weight = 1.0;
  std::string path;
};

struct LoaderOptions {
  std::string path;              // release folder (Loader::Open)
  // Two or more: a weighted blend of these releases (same split of each), `path` is ignored
  // (loader/schedule.h). They must have the same seq_len, token dtype and tokenizer.
  std::vector<BlendEntry> blend;
  // Loading a state saved with another global_batch_size (at a step boundary) continues the
  // global order; false makes that a FailedPrecondition naming global_batch_size.
  bool elastic = true;
  std::string split = "train";
  int64_t micro_batch_size = 0;
  int64_t global_batch_size = 0;
  int64_t dp_rank = 0;
  int64_t dp_size = 1;
  bool has_seed = false;         // false: the release's seed (manifest "seed")
  uint64_t seed = 0;
  int64_t epochs = 1;            // 0: unlimited
  int prefetch = 4;              // batches filled ahead of the consumer (>= 1)
  int num_workers = 0;           // fill threads; 0: min(4, CPUs)
  Device device = Device::kCpu;
  int cuda_device = 0;
  // When device is kCuda but no usable GPU exists: true falls back to CPU buffers (same order,
  // same values; device_note() says why), false fails Open with Unavailable.
  bool cuda_fallback = true;
  bool int32_ids = false;        // input_ids/labels/position_ids as int32 instead of int64
  uint32_t fields = kAllFields;
  bool verify_checksums = false; // hash every shard file against the manifest at Open
};

struct TensorInfo {
  const char* name;
  DType dtype;
  int ndim;
  int64_t shape[2];
  void* data;  // host pointer (CPU) or device pointer (CUDA)
  size_t bytes;
};

class Pool;

class Batch {
 public:
  ~Batch();
  Batch(const Batch&) = delete;
  Batch& operator=(const Batch&) = delete;

  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  // The named tensor, or nullptr when the field was not requested.
  const TensorInfo* tensor(const char* name) const;
  bool on_cuda() const { return on_cuda_; }
  int cuda_device() const { return cuda_device_; }
  // The position this batch was taken from (state() before the Next() that returned it).
  const Position& position() const { return position_; }
  // Host copy of the tensors (always valid: for CUDA this is the pinned staging buffer, valid until
  // release). Same layout as tensors().
  const void* host_data(const TensorInfo& t) const;
  // CUDA: `stream` (a cudaStream_t; 0 = the legacy default stream) waits for the copy, and the
  // device buffer's reuse will wait for work queued on `stream` up to the release. Call before
  // using the tensors on the GPU. No-op for CPU batches.
  absl::Status WaitOn(uintptr_t stream) const;

 private:
  friend class Loader;
  friend class Pool;
  friend class BatchFactory;
  Batch() = default;
  std::shared_ptr<Pool> pool_;
  int slot_ = -1;
  std::vector<TensorInfo> tensors_;
  Position position_;
  bool on_cuda_ = false;
  int cuda_device_ = -1;
  mutable uintptr_t consumer_stream_ = 0;
  mutable bool waited_ = false;
};

class Loader {
 public:
  // Opens the release at options.path (its manifest and the split's shards).
  static absl::StatusOr<std::unique_ptr<Loader>> Open(const LoaderOptions& options);
  // A loader over any source (options.path is ignored).
  static absl::StatusOr<std::unique_ptr<Loader>> Create(std::shared_ptr<const SampleSource> source,
                                                        uint64_t default_seed,
                                                        const LoaderOptions& options);
  // A blend over any sources (options.path and options.blend's paths are ignored; the weights
  // are `weights`). InvalidArgument naming both sources when their seq_len, token dtype or
  // tokenizer differ.
  static absl::StatusOr<std::unique_ptr<Loader>> CreateBlend(
      std::vector<std::shared_ptr<const SampleSource>> sources, std::vector<double> weights,
      uint64_t default_seed, const LoaderOptions& options);
  ~Loader();
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  // The next micro batch for this rank; OutOfRange after the last one (epochs > 0).
  absl::StatusOr<std::shared_ptr<const Batch>> Next();
  // The state to resume from: the next Next() returns the batch at state().position.
  LoaderState state() const;
  // Continues from `state` (CheckResume's / CheckBlendResume's rules); in-flight batches are
  // discarded. A blend's state may carry other weights (at a step boundary): the loader keeps its
  // own weights from there on, each release continuing after its last draw.
  absl::Status LoadState(const LoaderState& state);
  // Blends: new weights from the current position on, which must be a step boundary
  // (FailedPrecondition otherwise); no release repeats or skips a sample.
  absl::Status SetWeights(const std::vector<double>& weights);
  // Micro batches of the whole run on this rank (from position 0); INT64_MAX when unlimited.
  int64_t size() const;
  // Micro batches left from the current position.
  int64_t remaining() const;

  bool on_cuda() const;
  // Why a CUDA request runs on the CPU (empty otherwise).
  const std::string& device_note() const { return device_note_; }
  const Schedule& schedule() const { return schedule_; }
  // The (first) source; a blend's sources are sources().
  const SampleSource& source() const { return *sources_[0]; }
  const std::vector<std::shared_ptr<const SampleSource>>& sources() const { return sources_; }
  // The id the state carries: the release's id, or for a blend "blend:" + ids joined by "+".
  std::string release_id() const;
  int num_workers() const { return static_cast<int>(workers_.size()); }
  // Bytes of one batch's tensors (the size of one host-to-device copy).
  size_t batch_bytes() const;

  struct Shared;

 private:
  Loader(std::vector<std::shared_ptr<const SampleSource>> sources, Schedule schedule,
         LoaderOptions options);
  std::vector<ComponentState> Components() const;
  // Replaces the schedule (workers stopped meanwhile) and continues at `pos`.
  void Restart(Schedule schedule, const Position& pos);
  absl::Status Start();
  void StopWorkers();
  void StartWorkers();
  void WorkerLoop();

  std::vector<std::shared_ptr<const SampleSource>> sources_;
  Schedule schedule_;
  LoaderOptions options_;
  std::string device_note_;
  std::shared_ptr<Pool> pool_;
  std::unique_ptr<Shared> shared_;
  std::vector<std::thread> workers_;
};

}  // namespace grist::loader

#endif  // GRIST_LOADER_LOADER_H_
