// Record readers: the documents of one input split, in file order. Part of the record I/O of
// common/records.h (read that overview first: formats, identity, error policy).
#ifndef GRIST_COMMON_RECORD_READER_H_
#define GRIST_COMMON_RECORD_READER_H_

#include <cstdint>
#include <memory>
#include <string_view>

#include "absl/status/statusor.h"
#include "common/document.h"
#include "common/input_plan.h"

namespace grist {

class Env;
class SplitDecoders;

// Streams the records of one split. Not thread-safe; one reader per split.
class RecordReader {
 public:
  virtual ~RecordReader() = default;
  // Returns true with *doc filled, false at the end of the split, or an error for a file-level
  // problem (unreadable, truncated or corrupt compressed stream), naming the file and line.
  virtual absl::StatusOr<bool> Next(Document* doc) = 0;
  // Passes over the next record as Next would return it, without parsing it where the format
  // allows (JSON Lines: the line is found, not parsed): true with *input_bytes set to what Next
  // would give as doc->input_bytes, false at the end of the split, or Next's file-level error.
  // Records skipped and read count alike, so ordinals stay the same.
  virtual absl::StatusOr<bool> Skip(uint64_t* input_bytes);
  // A record's line, as NextLineOrDoc gives it.
  struct Line {
    std::string_view bytes;    // without its newline; valid until the reader's next call
    uint64_t input_bytes = 0;  // what Next would give as doc->input_bytes
    uint64_t text_bytes = 0;   // the size of the text Next would give
  };
  // Reads the next record as Next would. Where its line is exactly SerializeRecord of the document
  // Next would return (docs/formats/documents.md: text, meta and provenance as grist writes them,
  // in that order, and no other member), returns true with *as_line set and *line filled, without
  // building the document; else true with *doc filled as Next fills it and *as_line false. False
  // at the end of the split; Next's file-level errors. (Only JSON Lines readers give lines.)
  virtual absl::StatusOr<bool> NextLineOrDoc(Line* line, Document* doc, bool* as_line);
  // Bytes of the input consumed so far (compressed bytes for compressed files).
  virtual uint64_t bytes_consumed() const = 0;

 private:
  Document skip_doc_;  // Skip's record, for the readers that parse it anyway
};

// Opens a reader of `split` of `file` (a split PlanSplits made for it). INVALID_ARGUMENT for a bad
// txt_mode or a split of a file that cannot be split; a file that cannot be opened as the Env says.
// A stream split is read through `decoders` when given (common/split_decoders.h: one decode of the
// file shared by the pass's readers), else by decoding the file privately up to the split; the
// records are the same. Opening a stream split blocks until its first bytes are decoded.
absl::StatusOr<std::unique_ptr<RecordReader>> OpenRecordReader(Env* env, const InputFile& file,
                                                               const InputSplit& split,
                                                               const InputOptions& options,
                                                               SplitDecoders* decoders = nullptr);

// Decodes a whole compressed input (gzip or zstd, as OpenRecordReader would) on the calling
// thread and discards what it decodes; returns the decoded byte count. A compressed file without
// a frame index is decoded by one thread however many read its records, so this time is a floor
// under any stage that reads it (benchmarks report it). INVALID_ARGUMENT for an uncompressed
// format; a damaged stream is the reader's error.
absl::StatusOr<uint64_t> DecodeWholeFile(Env* env, const InputFile& file);

}  // namespace grist

#endif  // GRIST_COMMON_RECORD_READER_H_
