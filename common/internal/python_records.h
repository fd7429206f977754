// The byte source of the inputs grist reads through Python: Parquet files (pyarrow) and Hugging Face
// datasets (`datasets`). Internal to common/ (the record readers and HashInput); not a public
// interface. Debian 12 has no Arrow C++ package, so these inputs are read by the project's own
// Python reader, python/grist/hf.py in its records mode, run as a child process:
//
//   PYTHON -c <run hf.py as __main__> HF_PY --records parquet|hf-dataset SOURCE --text-field FIELD
//
// which writes every row of SOURCE to its standard output as one JSON object per line, row N on line
// N (1-based, file order), so the JSONL reader over this source names a bad row by source and row.
//
// PYTHON: $GRIST_PYTHON, else python3 beside the running executable (a virtual environment's bin/,
// where `pip install .` puts `grist`), else python3 on PATH. HF_PY: python/grist/hf.py beside the
// executable (the build tree: build/grist, build/python/grist/hf.py), else grist/hf.py in the
// site-packages of the environment the executable is installed in, else `-m grist.hf` (the package
// on PYTHONPATH).
//
// The child reads the real file system, not the Env (an in-memory Env's files are invisible to it).
// Its standard error goes to an unlinked temporary file, read back only when it fails.
//
// Errors (every message names SOURCE): the interpreter cannot be started, or the child exits
// non-zero (a missing pyarrow / datasets module, a missing text column, an unreadable file: its last
// line of standard error, e.g. "grist.hf: data.parquet: no column 'text' (columns: id, body)") is
// FAILED_PRECONDITION, returned by the Read that meets the end of its output (every row written
// before the failure is read first). A source destroyed before its end kills the child (SIGKILL) and
// reaps it. One thread at a time, like every ByteSource.
#ifndef GRIST_COMMON_INTERNAL_PYTHON_RECORDS_H_
#define GRIST_COMMON_INTERNAL_PYTHON_RECORDS_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/document.h"
#include "common/internal/byte_sources.h"

namespace grist::internal {

// Whether `format` is read through the Python child (kParquet, kHfDataset).
bool IsPythonFormat(InputFormat format);

// Starts the child for `file` (format kParquet or kHfDataset; for a dataset, file.path is the input
// spec "hf-dataset:NAME[:split]") and returns its standard output. `text_field` is the column the
// child requires.
absl::StatusOr<std::unique_ptr<ByteSource>> OpenPythonRecords(const InputFile& file,
                                                              const std::string& text_field);

}  // namespace grist::internal

#endif  // GRIST_COMMON_INTERNAL_PYTHON_RECORDS_H_
