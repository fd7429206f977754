// Document records: reading corpora in every supported input format, and writing grist's own
// document record format (.jsonl.zst parts). The record format is specified in
// docs/formats/documents.md. This header is the overview and includes the parts, one per seam:
//   common/document.h          Document, InputFile, InputOptions, the formats
//   common/input_plan.h        input listing (ListInputs) and split planning (PlanSplits, tasks)
//   common/record_reader.h     the record readers (OpenRecordReader)
//   common/record_writer.h     the record writer (RecordWriter, SerializeRecord)
//   common/split_decoders.h    one decode of a large compressed input shared by all threads
//   common/documents_format.h  the part format's constants and its frame index
// Internal (common/internal/): the byte sources (file ranges, gzip and zstd decoders), the line
// reader and the stream cutter (the splits of compressed inputs without a frame index).
//
// Input formats, chosen by file name:
//   *.jsonl, *.json, *.ndjson          JSON Lines, one object per line
//   *.jsonl.gz, *.json.gz, *.gz        the same, gzip-compressed (concatenated members allowed)
//   *.jsonl.zst, *.json.zst, *.zst     the same, zstd-compressed (concatenated frames allowed)
//   *.txt (and any other name)         plain text: the whole file is one document, or (txt_mode
//                                      "blocks") each blank-line-separated block is one document
//   *.txt.gz, *.txt.zst (any other     plain text, compressed
//     name ending .gz / .zst)
//   *.parquet                          a Parquet file: one record per row, the text in the text
//                                      column, every other column a metadata member; read by
//                                      python/grist/hf.py (pyarrow) as a child process
//                                      (common/internal/python_records.h); line = 1-based row
//   hf-dataset:NAME[:split]            a Hugging Face dataset (Hub name or local folder, split
//                                      default "train"), read the same way through `datasets`
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
// emits their results in split order (OrderedParallel, common/ordered.h), so output never depends on
// the thread count. A large compressed file without a frame index is cut into stream splits, read
// through one shared decoder per file (SplitDecoders); its records are those of one whole read.
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

#include "common/document.h"          // IWYU pragma: export
#include "common/documents_format.h"  // IWYU pragma: export
#include "common/input_plan.h"        // IWYU pragma: export
#include "common/record_reader.h"     // IWYU pragma: export
#include "common/record_writer.h"     // IWYU pragma: export
#include "common/split_decoders.h"    // IWYU pragma: export

#endif  // GRIST_COMMON_RECORDS_H_
