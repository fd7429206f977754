// Checkpoint folders: the manifest, crash-consistent publishing, finding the newest published
// checkpoint, retention, and a one-call asynchronous save for a single process.
//
// Durability guarantee: a checkpoint folder is published when its manifest.json exists. The
// manifest is written last (temporary name, fsync, rename, fsync of the folder, fsync of its
// parent) after every rank file is durable, so a published checkpoint is complete on stable
// storage; a crash at any point leaves either the previous checkpoints (all intact: a save never
// touches another folder) or the new one fully published. Folders without a manifest are torn
// saves: readers ignore them and the next save into the same folder clears them.
//
// Multi-rank: each rank writes rank-NNNNN.safetensors with its own FileWriter; one process
// (rank 0) publishes the manifest once all ranks' FileResults are gathered (the Python layer
// gathers them with torch.distributed).
//
// Thread safety: free functions are thread-safe for distinct folders. SaveHandle: one thread.
#ifndef GRIST_CKPTIO_CHECKPOINT_H_
#define GRIST_CKPTIO_CHECKPOINT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ckptio/checkpoint_format.h"
#include "ckptio/safetensors.h"
#include "ckptio/writer.h"
#include "common/env.h"
#include "common/hash.h"

namespace grist::ckptio {

struct ManifestFile {
  int rank = 0;
  std::string name;         // a plain file name inside the folder
  uint64_t size = 0;
  uint64_t data_len = 0;
  uint64_t tensors = 0;
  Hash128 data_hash;
  uint64_t header_hash = 0;
};

// Version 2: where each shard of a global tensor lives (docs/formats/checkpoint.md, "tensors").
// A sharded tensor's shards partition it exactly (no overlap, no hole); each shard's bytes are the
// row-major box [offsets, offsets + lengths) of the global tensor, at data-region bytes
// [begin, end) of the file of rank `rank`.
struct ShardEntry {
  int rank = 0;
  std::vector<int64_t> offsets;
  std::vector<int64_t> lengths;
  uint64_t begin = 0;
  uint64_t end = 0;
};

struct TensorEntry {
  std::string name;
  bool bytes = false;           // an opaque byte string (DCP's BytesIO items): one shard, no dtype
  DType dtype = DType::kU8;
  std::vector<int64_t> shape;   // the global shape
  std::vector<ShardEntry> shards;
};

struct Manifest {
  // 1: per-rank files only; 2: with the `tensors` index. Writers that fill `tensors` set 2; the
  // default keeps a manifest without an index honest (version 1 readers' per-rank semantics).
  int version = kManifestVersionOldest;
  int64_t step = 0;
  int world_size = 1;
  std::string created_by;   // "grist <version>"
  Metadata metadata;        // user string map (e.g. JSON of a loader's state)
  std::vector<ManifestFile> files;  // sorted by rank
  std::vector<TensorEntry> tensors; // version 2: the global tensor index
  // Version 2, optional: JSON of the saved object's nesting (python/grist/ckpt.py's grammar,
  // docs/formats/checkpoint.md); kept as minified text, empty when absent.
  std::string structure;
};

// The global index of a version-2 manifest as JSON (the "tensors" member's value) and back.
// ParseTensorIndex validates it against `m.files` and `m.world_size`: known dtypes, shards inside
// the global shape that partition it exactly, byte ranges matching the shard sizes, inside their
// file's data region and not overlapping each other. DataLoss naming `what` otherwise.
std::string TensorIndexJson(const std::vector<TensorEntry>& tensors);
absl::StatusOr<std::vector<TensorEntry>> ParseTensorIndex(std::string_view json, const Manifest& m,
                                                          const std::string& what);

// "rank-00007.safetensors".
std::string RankFileName(int rank);
ManifestFile ToManifestFile(const FileResult& r, int rank);

// The manifest's text, ending with its own checksum (docs/formats/checkpoint.md).
std::string ManifestJson(const Manifest& m);
// Parses and validates manifest text: checksum, format/version, ranks 0..world_size-1 each once,
// plain file names (no path separators, not "." or ".."). DataLoss naming `what` otherwise.
absl::StatusOr<Manifest> ParseManifest(std::string_view text, const std::string& what);
absl::StatusOr<Manifest> ReadManifest(Env* env, const std::string& dir);

// One FileResult as a JSON object and back (to gather results across processes).
std::string FileRecordJson(const ManifestFile& f);
absl::StatusOr<ManifestFile> ParseFileRecord(std::string_view json);

// Creates `dir` for a new checkpoint. AlreadyExists when `dir` is already published; a torn
// folder (no manifest) is emptied.
absl::Status PrepareCheckpointDir(Env* env, const std::string& dir);
// Publishes `dir`: every file in `m.files` must already be durable. Writes manifest.json last and
// syncs the folder and its parent.
absl::Status PublishCheckpoint(Env* env, const std::string& dir, const Manifest& m);

struct PublishedCheckpoint {
  std::string path;
  int64_t step = 0;
};
// Published checkpoints directly under `root` (valid manifest), oldest first (step, then name).
absl::StatusOr<std::vector<PublishedCheckpoint>> ListCheckpoints(Env* env, const std::string& root);
// The newest published checkpoint under `root`; NotFound when there is none. With `verify`, each
// candidate is fully read and checksummed, newest first, and the first that verifies is returned.
absl::StatusOr<std::string> LatestCheckpoint(Env* env, const std::string& root, bool verify);
// Keeps the newest `keep_last` published checkpoints under `root` (0: keep all). Crash-safe: the
// removed checkpoints are first renamed to hidden names (`.deleting.<name>`, never listed) and
// `root` fsynced, then deleted, then `root` fsynced again; leftovers of a pass that was killed
// are swept first.
absl::Status ApplyRetention(Env* env, const std::string& root, int keep_last);
// Deletes the `.deleting.*` folders a killed retention pass left under `root` (and fsyncs it).
// Also run by PrepareCheckpointDir (on the new folder's parent) and LatestCheckpoint (best effort).
absl::Status SweepRetentionLeftovers(Env* env, const std::string& root);

// Trailing decimal digits of the folder name ("step-000120" -> 120); -1 when none.
int64_t StepFromName(const std::string& dir);

struct SaveOptions {
  int64_t step = -1;        // -1: StepFromName(dir), else 0
  Metadata metadata;        // stored in the manifest
  int keep_last = 0;        // retention under the parent of dir after publishing
  // true: FileWriter::Save (the caller may modify its tensors once SaveCheckpoint returns).
  // false: FileWriter::SaveInPlace: aligned tensors are written from the caller's memory, which
  // must stay unchanged and alive until Wait() returns.
  bool snapshot = true;
};

// An asynchronous single-process save (one rank file). Wait() returns once the checkpoint is
// published and retention applied.
class SaveHandle {
 public:
  ~SaveHandle();
  absl::Status Wait();
  bool Done() const;
  // Seconds the caller of SaveCheckpoint was blocked (snapshot into staging).
  double blocked_seconds() const { return blocked_seconds_; }
  // The rank file's result (valid after Wait() returned OK).
  const FileResult& file() const { return file_; }

 private:
  friend absl::StatusOr<std::unique_ptr<SaveHandle>> SaveCheckpoint(
      FileWriter*, const std::string&, const std::vector<HostTensor>&, Metadata, const SaveOptions&);
  SaveHandle() = default;
  std::thread thread_;
  std::shared_ptr<struct SaveShared> shared_;
  double blocked_seconds_ = 0;
  FileResult file_;
  bool joined_ = false;
};

// Snapshots `tensors` into `writer`'s staging arena and returns; the file is written, the folder
// published and retention applied in the background. The caller may modify its tensors once this
// returns. `file_metadata` goes into the safetensors header.
absl::StatusOr<std::unique_ptr<SaveHandle>> SaveCheckpoint(FileWriter* writer, const std::string& dir,
                                                           const std::vector<HostTensor>& tensors,
                                                           Metadata file_metadata,
                                                           const SaveOptions& options);

}  // namespace grist::ckptio

#endif  // GRIST_CKPTIO_CHECKPOINT_H_
