// The `clean` stage: reads documents (common/records.h), cleans and filters them (clean/cleaner.h),
// writes kept documents and every rejected one, and reports what happened.
//
// Output layout (for task I of N; PREFIX = "part-IIIII-of-NNNNN", common/task_parts.h):
//   DIR/PREFIX-00000.jsonl.zst ...          kept documents, cleaned, as grist document records
//   DIR/rejects/PREFIX-00000.jsonl.zst ...  rejected documents with "reasons":[...] (and "error"
//                                           for records that could not be read)
//   DIR/clean-report-IIIII-of-NNNNN.json    the report (CleanReport::ToJson)
// so the N tasks of a Slurm array write disjoint files into one DIR. Parts of the same prefix left
// by an earlier run are removed first; other files in DIR are left alone.
//
// Guarantees:
//   - Deterministic: outputs are byte-identical for any RunOptions::threads (splits are processed in
//     parallel and emitted in split order; the split plan depends only on the inputs and options).
//   - Nothing lost: docs_in == docs_out + docs_rejected, checked before returning (Internal error
//     otherwise), and the part files hold exactly those counts.
//   - Bad records (malformed JSON, missing/non-string text field, over-long line) are rejected with
//     reason "bad_record" and the reader's message. File-level errors (unreadable file, truncated or
//     corrupt .gz/.zst) follow CleanOptions::on_file_error: kStop returns the error (naming the file
//     and last good line); kSkip records it in the report and goes on with the next split.
//   - Memory: about (2 x threads) splits' documents are held at once (a split is a byte range of a
//     JSONL file of ~split_bytes, or one whole compressed/text file).
#ifndef GRIST_CLEAN_RUN_CLEAN_H_
#define GRIST_CLEAN_RUN_CLEAN_H_

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "clean/cleaner.h"
#include "common/records.h"
#include "common/stage.h"

namespace grist {
class Env;
}

namespace grist::clean {

struct FileError {
  std::string file;
  uint64_t last_good_line = 0;  // last record line read before the error (0: none)
  std::string error;
};

struct CleanReport {
  DocCounts counts;              // bytes_in: text bytes read; bytes_out: text bytes kept (cleaned)
  uint64_t bytes_rejected = 0;   // text bytes of the rejected documents (as read)
  uint64_t record_bytes = 0;     // bytes of the input records (lines/blocks), for throughput
  uint64_t bad_records = 0;
  // Documents rejected by each filter (index as kFilterNames; a document failing several filters
  // counts in each), and by the first failing filter (these sum to the filter rejections).
  std::array<uint64_t, kNumFilters> filter_rejected{};
  std::array<uint64_t, kNumFilters> first_filter_rejected{};
  std::map<std::string, uint64_t> reasons;  // reason -> documents
  NormalizeCounters normalize;
  std::vector<FileError> file_errors;
  std::vector<PartInfo> kept_parts;
  std::vector<PartInfo> reject_parts;
  int threads = 0;
  int task = 0;
  int tasks = 1;
  uint64_t files = 0;
  uint64_t splits = 0;
  double seconds = 0;
  uint64_t peak_rss_bytes = 0;
  std::string options_json;  // the effective options, for reproducibility

  double MbPerSecond() const { return seconds > 0 ? record_bytes / 1e6 / seconds : 0; }
  std::string ToJson() const;
  // The reproducible counts alone (no timings, no paths), compact: what a release manifest records
  // for the clean stage (docs/formats/release.md, counts.clean).
  std::string CountsJson() const;
  // A short human-readable summary (a few lines) for the terminal.
  std::string Summary() const;
};

// The stems of a task's outputs (common/task_parts.h): its parts "part-IIIII-of-NNNNN-*" and its
// report "clean-report-IIIII-of-NNNNN.json".
inline constexpr char kPartStem[] = "part";
inline constexpr char kReportStem[] = "clean-report";
inline constexpr char kReportSuffix[] = ".json";
// The file-name prefix of task `task` of `tasks` ("part-00000-of-00001").
std::string TaskPrefix(int task, int tasks);
// The report's file name of task `task` of `tasks` ("clean-report-00000-of-00001.json").
std::string TaskReportName(int task, int tasks);
// The effective options as a JSON object (every threshold), for reports and manifests.
std::string OptionsJson(const CleanOptions& options);

absl::StatusOr<CleanReport> RunClean(Env* env, const std::vector<std::string>& inputs,
                                     const std::string& output_dir, const CleanOptions& options,
                                     const RunOptions& run);
// The same over inputs already listed (ListInputs of the input paths): what `grist build` cleans,
// the files as its records and the manifest name them, without listing them again.
absl::StatusOr<CleanReport> RunCleanFiles(Env* env, const std::vector<InputFile>& files,
                                          const std::string& output_dir,
                                          const CleanOptions& options, const RunOptions& run);

}  // namespace grist::clean

#endif  // GRIST_CLEAN_RUN_CLEAN_H_
