// `grist tokenize encode`: documents -> token ids, in parallel, one Megatron sequence per document.
//
// Output in `output_dir`, per task: tokens-TTTTT-of-NNNNN.bin/.idx (MMIDIDX; uint16 when the
// vocabulary has at most 65,536 pieces, else int32) and tokens-TTTTT-of-NNNNN.json (the task's
// EncodeReport). Documents keep their input order (splits processed in parallel, emitted in order),
// so the concatenation of tasks 0..N-1 is the same sequence whatever N and the thread count are;
// ListTokenParts() returns the parts in that order for the next stage.
#ifndef GRIST_TOKENIZE_ENCODE_H_
#define GRIST_TOKENIZE_ENCODE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/option_table.h"
#include "common/stage.h"
#include "tokenize/tokenizer.h"

namespace grist::tokenize {

struct EncodeStageOptions {
  std::string model_path;
  EncodeOptions encode;
  // The largest input split (the unit of parallel work). Smaller splits are used when the input
  // is small: see BalancedSplitBytes (common/records.h).
  uint64_t split_bytes = 8ull << 20;
  // Every option of section "tokenize.*" (key, flag of `grist tokenize encode`, default: the
  // initializers here and in EncodeOptions, help, range), declared once in encode.cc.
  static const OptionTable<EncodeStageOptions>& Table();
  // Reads the keys of Table(): tokenize.engine, add_bos, add_eos, piece_bytes, split_bytes.
  static absl::StatusOr<EncodeStageOptions> FromConfig(const Config& config);
};


struct EncodeReport {
  DocCounts counts;              // rejected: unreadable records and documents with empty text
  uint64_t tokens = 0;
  uint64_t rejected_malformed = 0;
  uint64_t rejected_empty = 0;
  uint64_t max_document_tokens = 0;
  double seconds = 0;
  // Where `seconds` went: `start` until the encoding began, in which the model loaded (SentencePiece's
  // parse and grist's encoder's tables: `model`) on one thread while the inputs were listed and
  // planned (`plan`) on another; `encode`, encoding and writing in input order; `finish`, syncing
  // and publishing the dataset.
  struct Phases {
    double start = 0, model = 0, plan = 0, encode = 0, finish = 0;
  } phase_seconds;
  std::string output_prefix;
  // Which encoder ran: "grist", or "sentencepiece" with the reason when grist's was not used
  // (not part of ToJson: both give the same ids).
  std::string engine;
  // The counts as JSON (reproducible: what the manifest records); with_seconds adds the run time
  // (the per-task file tokens-I-of-N.json, from which a merge learns the slowest task).
  std::string ToJson(bool with_seconds = false) const;
};

// Encodes `inputs` with the model at options.model_path, loaded on a thread of its own while the
// inputs are planned. `model`, when not null, is that model already loaded (`grist build` loads
// its tokenizer once for the stages that use it): it is used as is, options.model_path is not
// read, and phase_seconds.model is then the wait for its encoder's tables (built at most once,
// maybe by another thread already). The caller keeps it alive until RunEncode returns.
absl::StatusOr<EncodeReport> RunEncode(Env* env, const std::vector<std::string>& inputs,
                                       const std::string& output_dir,
                                       const EncodeStageOptions& options, const RunOptions& run,
                                       const Tokenizer* model = nullptr);

// The stem of a task's outputs: tokens-TTTTT-of-NNNNN.{bin,idx,json} (common/task_parts.h).
inline constexpr char kTokenPartStem[] = "tokens";

// The dataset prefixes of a complete encode output (all N tasks of one run), in task order.
// FailedPrecondition naming the missing part when a task has not finished, or when parts of
// different task counts are mixed; NotFound when there is none.
absl::StatusOr<std::vector<std::string>> ListTokenParts(Env* env, const std::string& dir);

}  // namespace grist::tokenize

#endif  // GRIST_TOKENIZE_ENCODE_H_
