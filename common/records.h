// Document records: reading corpora in every supported input format, and writing grist's own
// document record format (.jsonl.zst parts). The record format is specified in
// docs/formats/documents.md.
//
// Input formats, chosen by file name:
//   *.jsonl, *.json, *.ndjson          JSON Lines, one object per line
//   *.jsonl.gz, *.json.gz, *.gz        the same, gzip-compressed (concatenated members allowed)
//   *.jsonl.zst, *.json.zst, *.zst     the same, zstd-compressed (concatenated frames allowed)
//   *.txt (and any other name)         plain text: the whole file is one document, or (txt_mode
//                                      "blocks") each blank-line-separated block is one document
//   *.txt.gz, *.txt.zst (any other     plain text, compressed
//     name ending .gz / .zst)
//   a directory                        walked recursively in bytewise name order; every regular file
//                                      in it is an input by the rules above (so a folder of
//                                      one-document files such as the 20newsgroups posts works),
//                                      except in a stage output folder (below)
//   a grist stage's output folder      one holding a stage report (IsStageReportName): its kept
//                                      document parts only (top-level *.jsonl.zst); rejects/,
//                                      removed/ and reports are read only when named themselves
//
// Order: inputs are taken in the order given, directories expanded in sorted order; records in file
// order. Every consumer that needs a deterministic output order processes InputSplits in parallel and
// emits their results in split order (OrderedEmitter below), so output never depends on the thread
// count.
//
// Identity: each Document carries its provenance (source path as given + 1-based line, or for a
// block/whole-file document the line it starts on). id() = "<source>:<line>" is unique within a run
// and stable across stages: grist's own output records carry provenance in a "grist" object, and a
// reader that meets one keeps it instead of the current file and line.
//
// Bad input never crashes and is never dropped silently: a malformed line, a missing text field or a
// non-string text yields a Document whose `error` says what is wrong (with the file and line); the
// caller rejects it with that reason. A file that cannot be read or a truncated compressed stream is
// a Status error from Next() naming the file and the last good line; the caller stops or skips the
// rest of that file by policy.
#ifndef GRIST_COMMON_RECORDS_H_
#define GRIST_COMMON_RECORDS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace grist {

class Env;
class RandomAccessFile;
class ThreadPool;

struct Document {
  std::string text;
  // The record's other fields as one JSON object text ("{}" when none), passed through unchanged
  // (grist's own "grist" provenance object excluded).
  std::string metadata = "{}";
  std::string source;  // input path as given (or from the record's provenance)
  uint64_t line = 0;   // 1-based line where the record starts
  // Empty for a good record; else why it could not be read ("malformed JSON: ...", "missing text
  // field 'text'", "text field 'text' is not a string"). `text` then holds the raw line (truncated
  // to 64 KiB) so a reject file can show it.
  std::string error;
  // Size of the record in its input (bytes of the line or block), for throughput accounting.
  uint64_t input_bytes = 0;
  // JSON input must be UTF-8: invalid sequences in a JSONL line are replaced with U+FFFD so the line
  // can be parsed, and counted here; the cleaner's UTF-8 policy decides (repair or reject). Plain
  // text inputs pass their bytes through unchanged (count 0) and the cleaner validates them.
  uint32_t invalid_utf8 = 0;

  std::string id() const;
};

enum class InputFormat { kJsonl, kJsonlGzip, kJsonlZstd, kText, kTextGzip, kTextZstd };

struct InputOptions {
  std::string text_field = "text";
  // "file": a plain-text file is one document. "blocks": blank-line-separated blocks are documents.
  std::string txt_mode = "file";
  // Lines (JSONL) or documents (text) longer than this are rejected with an error rather than held
  // in memory. 0 = no limit.
  uint64_t max_record_bytes = 256ull << 20;
};

struct InputFile {
  std::string path;
  uint64_t size = 0;
  InputFormat format = InputFormat::kJsonl;
};

// Expands `paths` (files and directories) into input files, in the documented order. An empty list,
// a missing path or an unreadable directory is an error naming the path. Hidden files (".name") in
// directories are skipped.
absl::StatusOr<std::vector<InputFile>> ListInputs(Env* env, const std::vector<std::string>& paths);
InputFormat FormatOf(const std::string& path);
// Whether a file name is a stage report that marks its folder as a grist stage output:
// "clean-report-*.json" (grist clean, one per task) or "dedup_report.json" (grist dedup).
bool IsStageReportName(std::string_view name);

// A unit of parallel work: a whole file, or (uncompressed JSONL only) a byte range of it whose
// bounds are moved to line starts by the reader. Splits of one file are consecutive.
struct InputSplit {
  size_t file_index = 0;
  uint64_t begin = 0;
  uint64_t end = UINT64_MAX;  // exclusive; UINT64_MAX = to end of file
  uint64_t bytes = 0;         // estimated size, for balancing and progress
  uint64_t newlines_before = 0;  // '\n' bytes in [0, begin) of the file (set by PlanSplits)
};

// Cuts files into splits of about `target_bytes` (uncompressed JSONL larger than that is split at
// byte ranges; everything else is one split per file). For byte-range splits it counts, in parallel
// on `pool` (may be null), the newlines before each split so that line numbers stay absolute.
absl::StatusOr<std::vector<InputSplit>> PlanSplits(Env* env, const std::vector<InputFile>& files,
                                                   uint64_t target_bytes,
                                                   ThreadPool* pool = nullptr);
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

// Streams the records of one split. Not thread-safe; one reader per split.
class RecordReader {
 public:
  virtual ~RecordReader() = default;
  // Returns true with *doc filled, false at the end of the split, or an error for a file-level
  // problem (unreadable, truncated or corrupt compressed stream), naming the file and line.
  virtual absl::StatusOr<bool> Next(Document* doc) = 0;
  // Bytes of the input consumed so far (compressed bytes for compressed files).
  virtual uint64_t bytes_consumed() const = 0;
};

absl::StatusOr<std::unique_ptr<RecordReader>> OpenRecordReader(Env* env, const InputFile& file,
                                                               const InputSplit& split,
                                                               const InputOptions& options);

struct OutputOptions {
  // A new part starts once the current one holds this many uncompressed bytes.
  uint64_t part_bytes = 256ull << 20;
  // A part is a sequence of independent zstd frames of about this many uncompressed bytes (ending
  // at record boundaries), listed in a frame index at the end of the part, so readers can split a
  // part for parallel work (docs/formats/documents.md).
  uint64_t frame_bytes = 1ull << 20;
  int zstd_level = 3;
};

// One zstd frame of a part, from the part's frame index.
struct ZstdFrame {
  uint64_t offset = 0;   // byte offset of the frame in the file
  uint64_t bytes = 0;    // compressed bytes
  uint64_t records = 0;  // lines (records) in the frame
};
// The frame index at the end of a part written by RecordWriter, validated against the file (size,
// checksum, frames tiling the file up to the index). nullopt when the file has none or it does not
// validate (the file is then read whole, as any zstd file).
absl::StatusOr<std::optional<std::vector<ZstdFrame>>> ReadZstdFrameIndex(const RandomAccessFile& file);

struct PartInfo {
  std::string path;
  uint64_t records = 0;
  uint64_t bytes = 0;  // compressed size on disk
};

// Writes documents as grist document records into `dir`/`prefix`-NNNNN.jsonl.zst parts. Each part
// is written under a temporary name, synced and renamed when complete; Finish() syncs the directory.
// Not thread-safe.
class RecordWriter {
 public:
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
  // Completes the last part and returns all parts written. No Append after Finish.
  virtual absl::StatusOr<std::vector<PartInfo>> Finish() = 0;
  virtual uint64_t records() const = 0;
};

// Serializes one record line (without the trailing newline), as RecordWriter writes it.
std::string SerializeRecord(const Document& doc, std::string_view extra_json = {});

}  // namespace grist

#endif  // GRIST_COMMON_RECORDS_H_
