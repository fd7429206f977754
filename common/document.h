// The document record as every stage sees it, and the description of one input file. Part of the
// record I/O of common/records.h (read that overview first).
#ifndef GRIST_COMMON_DOCUMENT_H_
#define GRIST_COMMON_DOCUMENT_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/env.h"

namespace grist {

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

  // "<source>:<line>": unique within a run and stable across stages.
  std::string id() const { return absl::StrCat(source, ":", line); }
};

// kParquet (a *.parquet file) and kHfDataset (a Hugging Face dataset named by an input spec
// "hf-dataset:NAME[:split]", common/input_plan.h) are read through the project's Python reader, one
// row per record (common/records.h).
enum class InputFormat { kJsonl, kJsonlGzip, kJsonlZstd, kText, kTextGzip, kTextZstd, kParquet, kHfDataset };

// The format of an input by its name (the table in common/records.h).
InputFormat FormatOf(const std::string& path);

inline bool IsJsonFormat(InputFormat f) {
  return f == InputFormat::kJsonl || f == InputFormat::kJsonlGzip || f == InputFormat::kJsonlZstd;
}
inline bool IsCompressedFormat(InputFormat f) {
  return f == InputFormat::kJsonlGzip || f == InputFormat::kJsonlZstd ||
         f == InputFormat::kTextGzip || f == InputFormat::kTextZstd;
}

struct InputOptions {
  std::string text_field = "text";
  // "file": a plain-text file is one document. "blocks": blank-line-separated blocks are documents.
  std::string txt_mode = "file";
  // Lines (JSONL) or documents (text) longer than this are rejected with an error rather than held
  // in memory. 0 = no limit.
  uint64_t max_record_bytes = 256ull << 20;
};

struct InputFile {
  std::string path;  // a file, or for kHfDataset the input spec "hf-dataset:NAME[:split]"
  uint64_t size = 0;  // 0 for a dataset
  InputFormat format = InputFormat::kJsonl;
  // The file's stat when ListInputs listed it (none for a dataset, or where the Env has no stat),
  // and the clock (CLOCK_REALTIME, ns) just before: what a build compares the file with later and
  // checks a remembered checksum against, without a stat of its own (each one a metadata request
  // to the servers of a shared file system, per input and per task of an array).
  std::optional<FileStat> stat;
  int64_t listed_ns = 0;
};

}  // namespace grist

#endif  // GRIST_COMMON_DOCUMENT_H_
