// Input listing and split planning: which files a stage reads, in which order, and how they are cut
// into units of parallel work. Part of the record I/O of common/records.h (read that overview
// first). Every function here is deterministic: the same inputs (and task count) give the same
// result on every machine and for every thread count.
#ifndef GRIST_COMMON_INPUT_PLAN_H_
#define GRIST_COMMON_INPUT_PLAN_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/document.h"
#include "common/hash.h"

namespace grist {

class Config;
class Env;
class ThreadPool;

// Expands `paths` (files and directories) into input files, in the documented order. An empty list,
// a missing path or an unreadable directory is an error naming the path. Hidden files (".name") in
// directories are skipped. A path that begins with kHfDatasetPrefix names a Hugging Face dataset
// (one input of format kHfDataset, size 0; nothing on disk is checked here: the reader loads it).
absl::StatusOr<std::vector<InputFile>> ListInputs(Env* env, const std::vector<std::string>& paths);

// Hugging Face datasets as inputs. The input spec of a dataset is kHfDatasetPrefix + "NAME[:split]":
// NAME is a Hub name or a local folder (one written by save_to_disk, or of data files), split defaults
// to "train" (python/grist/hf.py, records mode, loads it). `grist clean --hf-dataset SPEC` and the
// key inputs.hf_datasets of `grist build` add such inputs after the paths.
inline constexpr std::string_view kHfDatasetPrefix = "hf-dataset:";
// kHfDatasetPrefix + spec; an empty spec, or a NAME that is empty, is an error.
absl::StatusOr<std::string> HfDatasetInput(std::string_view spec);
// The inputs a release config names, in order: inputs.paths (files and folders), then
// inputs.hf_datasets (each through HfDatasetInput). Either key may be absent; naming no input at
// all, or a key of the wrong type, is an error naming the config and key.
absl::StatusOr<std::vector<std::string>> ConfigInputs(const Config& config);
// The content hash of an input for a manifest: XXH3-128 of the file's bytes; for a dataset, of the
// JSON Lines its reader streams (every row, docs/hf.md), read once more for this.
absl::StatusOr<Hash128> HashInput(Env* env, const InputFile& file);
// InvalidArgument when `output` (with anything a command writes beside it, such as a build's
// `<output>.work`) lies inside one of the folders among `inputs`, or is one: a later run over the
// same inputs would read what this one wrote as input. Paths are compared absolute, with "." and
// ".." and the symbolic links of their existing part resolved. `inputs_from` names where the
// inputs came from, for the message (e.g. "inputs.paths", "--input").
absl::Status CheckOutputOutsideInputs(Env* env, const std::vector<std::string>& inputs,
                                      const std::string& output, std::string_view inputs_from);
// Whether a file name is a stage report that marks its folder as a grist stage output:
// "clean-report-*.json" (grist clean, one per task) or "dedup_report.json" (grist dedup).
bool IsStageReportName(std::string_view name);

// A unit of parallel work: a whole file, or a part of it. Splits of one file are consecutive.
//   - uncompressed JSONL: a byte range whose bounds the reader moves to line starts;
//   - a grist part with a frame index: a range of whole frames;
//   - a stream split (stream_stride > 0) of a compressed file without a frame index (JSONL, or
//     text in blocks mode): [begin, end) are compressed offsets, a multiple of stream_stride apart;
//     the split holds the records that start in what those compressed bytes decode to
//     (common/internal/stream_cutter.h has the exact rule). Reading one costs decoding the file up
//     to it; SplitDecoders (common/split_decoders.h) shares one decode among a pass's readers.
struct InputSplit {
  size_t file_index = 0;
  uint64_t begin = 0;
  uint64_t end = UINT64_MAX;  // exclusive; UINT64_MAX = to end of file
  uint64_t bytes = 0;         // estimated size, for balancing and progress
  uint64_t newlines_before = 0;  // '\n' bytes in [0, begin) of the file (set by PlanSplits)
  uint64_t stream_stride = 0;    // > 0: a stream split, the file cut every stream_stride bytes
};

// The largest compressed stride of stream splits: a split then decodes to a few MiB, so the
// decoded splits a SplitDecoders holds ahead of its readers stay small.
inline constexpr uint64_t kMaxStreamSplitBytes = 1ull << 20;

// Cuts files into splits of about `target_bytes`: uncompressed JSONL larger than that at byte
// ranges, indexed grist parts at frame boundaries, compressed JSONL without a frame index (and
// compressed text when input.txt_mode is "blocks") into stream splits of min(target_bytes,
// kMaxStreamSplitBytes) compressed bytes; everything else is one split per file. For byte-range
// splits it counts, in parallel on `pool` (may be null), the newlines before each split so that
// line numbers stay absolute.
absl::StatusOr<std::vector<InputSplit>> PlanSplits(Env* env, const std::vector<InputFile>& files,
                                                   uint64_t target_bytes,
                                                   ThreadPool* pool = nullptr,
                                                   const InputOptions& input = InputOptions());
// The split size to plan with: `max_split_bytes`, or less, so that each task's slice holds about
// kSplitsPerTask splits (its threads then stay busy to the end: a thread idles at most one split's
// time), but not below kMinBalancedSplitBytes unless `max_split_bytes` itself is smaller. It depends
// on the inputs and the task count only, never on the thread count, so every task of an array plans
// the same splits. Split sizes never change a stage's output, which is emitted in input order.
inline constexpr uint64_t kSplitsPerTask = 256;
inline constexpr uint64_t kMinBalancedSplitBytes = 64ull << 10;
uint64_t BalancedSplitBytes(const std::vector<InputFile>& files, uint64_t max_split_bytes, int tasks);
// The splits task `task` of `tasks` processes: a contiguous run balanced by bytes. Deterministic.
std::vector<InputSplit> SelectTaskSplits(const std::vector<InputSplit>& splits, int task, int tasks);

}  // namespace grist

#endif  // GRIST_COMMON_INPUT_PLAN_H_
