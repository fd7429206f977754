// Input for the pipeline benches (pack, build): the first documents of a corpus written to one
// plain JSON Lines file, so that every bench and its peer read the same text and --quick can cut it
// small.
#ifndef GRIST_BENCH_CORPUS_SAMPLE_H_
#define GRIST_BENCH_CORPUS_SAMPLE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace grist::bench {

// The first of `candidates` that exists, or "".
std::string FirstExistingPath(const std::vector<std::string>& candidates);

// The default corpus of the pipeline benches: ../shared/corpus/wikinews-en, else the embedded demo
// corpus .demo/corpus (scripts/make_demo_corpus.sh). NotFound saying how to get one otherwise.
absl::StatusOr<std::string> DefaultCorpus();

struct CorpusSample {
  std::string path;  // the JSON Lines file written
  uint64_t documents = 0;
  uint64_t text_bytes = 0;  // bytes of document text
  uint64_t file_bytes = 0;  // bytes of the JSONL file
};

// Writes the readable, non-empty documents of `inputs` (files or folders, any format
// common/records.h reads), in input order, as {"text": ...} lines to `path` until `max_bytes` of
// text are written.
absl::StatusOr<CorpusSample> WriteCorpusSample(const std::vector<std::string>& inputs,
                                               const std::string& path, uint64_t max_bytes);

// Trains a BPE tokenizer of `vocab_size` pieces on `jsonl` (seed 1, the first 200,000 sentences
// sampled) into `model_path`: the model a bench uses when the shared corpus's is absent.
absl::Status TrainBenchTokenizer(const std::string& jsonl, const std::string& model_path,
                                 int vocab_size);

// A scratch folder: `given`, else $TMPDIR (or /tmp)/grist-bench-<name>; created.
absl::StatusOr<std::string> ScratchDir(const std::string& given, const std::string& name);

}  // namespace grist::bench

#endif  // GRIST_BENCH_CORPUS_SAMPLE_H_
