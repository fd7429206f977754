// The record writer: documents out as grist document parts (.jsonl.zst with a frame index), the
// format of docs/formats/documents.md. Part of the record I/O of common/records.h.
#ifndef GRIST_COMMON_RECORD_WRITER_H_
#define GRIST_COMMON_RECORD_WRITER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/document.h"

namespace grist {

class Env;

struct OutputOptions {
  // A new part starts once the current one holds this many uncompressed bytes.
  uint64_t part_bytes = 256ull << 20;
  // A part is a sequence of independent zstd frames of about this many uncompressed bytes (ending
  // at record boundaries), listed in a frame index at the end of the part, so readers can split a
  // part for parallel work (docs/formats/documents.md). A frame is the smallest split of the stage
  // that reads the part: 512 KiB rather than 1 MiB halves the last wave's wait at 16 threads (the
  // build's filter 0.024 s against 0.031 on the H100 host, docs/results/2026-12-05-gpu/) for 5% of
  // zstd's speed at level 1; below 256 KiB zstd takes its small-input parameters (14% slower).
  uint64_t frame_bytes = 512ull << 10;
  // Parts are intermediate files between stages, written once and read once or twice: level 1
  // compresses about 1.7x faster than level 3 (the zstd of the parts was a quarter of `grist clean`'s
  // CPU time at level 3) for parts about 13% larger (docs/clean.md, "Performance").
  int zstd_level = 1;
  // Threads that compress frames (each frame on its own, in the background), whose frames a thread
  // of the writer's own writes in file order; 1 compresses and writes on the caller's thread. The
  // stages set it to their thread count; a thread starts only when a frame waits and no started
  // one is free, so a writer whose frames mostly pass through whole starts few. The bytes written never depend on it. Held at most: one
  // frame per thread compressing, the one being filled, and frames appended whole (AppendFrame)
  // waiting to be written, up to threads x frame_bytes of their bytes.
  int compress_threads = 1;
};

struct PartInfo {
  std::string path;
  uint64_t records = 0;
  uint64_t bytes = 0;  // compressed size on disk
};

// Records serialized ahead of a RecordWriter, e.g. by worker threads while one thread writes them:
// the lines Append would write, one after another in one buffer. Clear() keeps the capacity, so a
// batch reused from split to split allocates nothing once grown. Not thread-safe.
class RecordBatch {
 public:
  void Add(const Document& doc, std::string_view extra_json = {});
  void Clear() {
    bytes_.clear();
    ends_.clear();
  }
  size_t size() const { return ends_.size(); }
  bool empty() const { return ends_.empty(); }
  // The lines, each ending in '\n', and where each ends in bytes() (the offset after its '\n').
  std::string_view bytes() const { return bytes_; }
  const std::vector<uint64_t>& ends() const { return ends_; }

 private:
  std::string bytes_;
  std::vector<uint64_t> ends_;
};

// A zstd data frame known to hold exactly some record lines, as only CheckDataFrame makes one:
// what RecordWriter::AppendFrame takes. Movable; a default one is empty and cannot be appended.
class CheckedFrame {
 public:
  CheckedFrame() = default;
  std::string_view bytes() const { return bytes_; }
  uint64_t records() const { return records_; }
  uint64_t content_bytes() const { return content_bytes_; }
  // Moves the frame's bytes out (the writer's); the frame is then empty.
  std::string TakeBytes() {
    records_ = content_bytes_ = 0;
    return std::move(bytes_);
  }

 private:
  friend absl::StatusOr<CheckedFrame> CheckDataFrame(std::string frame, std::string_view content);
  std::string bytes_;
  uint64_t records_ = 0, content_bytes_ = 0;
};

// Checks that `frame` is one whole zstd frame with its content checksum that decodes to exactly
// `content`, whole record lines each ending in '\n' (the frame's size, its stated content size and
// its checksum against `content`: RFC 8878), and returns it as a CheckedFrame; INVALID_ARGUMENT
// naming what differs otherwise (a caller then appends the records instead). Thread-safe: workers
// check their frames, the single writer only appends them.
absl::StatusOr<CheckedFrame> CheckDataFrame(std::string frame, std::string_view content);

// Writes documents as grist document records into `dir`/`prefix`-NNNNN.jsonl.zst parts. Each part
// is written under a temporary name, synced and renamed when complete; Finish() syncs the directory.
// Durability: a part is complete on disk once renamed; a writer destroyed before Finish() removes its
// unfinished temporary part. Errors are those of the Env (and INTERNAL for a zstd failure), naming
// the file. Not thread-safe.
class RecordWriter {
 public:
  // INVALID_ARGUMENT for an empty prefix or one holding '/'. Creates `dir` if needed.
  static absl::StatusOr<std::unique_ptr<RecordWriter>> Open(Env* env, std::string dir,
                                                            std::string prefix,
                                                            OutputOptions options = {});
  virtual ~RecordWriter() = default;
  // `extra_json` holds extra members (without braces, e.g. "\"reasons\":[\"too_short\"]") added to
  // the record; empty for none.
  virtual absl::Status Append(const Document& doc, std::string_view extra_json = {}) = 0;
  // Appends one record already serialized by SerializeRecord (no trailing newline). Lets worker
  // threads do the JSON escaping, so the single writer only compresses; the bytes written are the
  // same as Append's.
  virtual absl::Status AppendSerialized(std::string_view record) = 0;
  // Appends the records of `batch` in order: the same bytes as Append of each, compressed in runs
  // up to the next frame end rather than record by record.
  virtual absl::Status AppendBatch(const RecordBatch& batch) = 0;
  // Appends a data frame compressed elsewhere, byte for byte (dedup's filter passes through the
  // frames of an input part whose records it keeps unchanged), checked by CheckDataFrame. Ends the
  // frame being filled first, so the part's bytes depend on where such frames come as well as on
  // the records.
  virtual absl::Status AppendFrame(CheckedFrame frame) = 0;
  // Completes the last part and returns all parts written. No Append after Finish.
  virtual absl::StatusOr<std::vector<PartInfo>> Finish() = 0;
  virtual uint64_t records() const = 0;
};

// Finishes `writers` at once, each on its own thread: their last frames, syncs and renames
// overlap instead of queueing behind each other (a stage's kept and rejected parts: at 16 threads
// the sequential syncs were about a tenth of `grist clean`'s time). Returns each writer's parts, in
// the order given, or the first error in that order; every writer is finished either way.
absl::StatusOr<std::vector<std::vector<PartInfo>>> FinishAll(
    const std::vector<RecordWriter*>& writers);


// Serializes one record line (without the trailing newline), as RecordWriter writes it. Thread-safe.
std::string SerializeRecord(const Document& doc, std::string_view extra_json = {});
// The same, appended to *out.
void AppendRecord(std::string* out, const Document& doc, std::string_view extra_json = {});

}  // namespace grist

#endif  // GRIST_COMMON_RECORD_WRITER_H_
