// The Python tokenize peers of `grist bench tokenize` (bench/python/bench_tokenize_peers.py): HF
// `tokenizers` with the same SentencePiece model converted (a peer only when its ids equal
// SentencePiece's on every line) and Megatron's text to .bin/.idx path (megatron-core's
// IndexedDatasetBuilder with the same tokenizer). Kept out of bench_tokenize.cc, which calls
// AddTokenizePeerFigures once.
#ifndef GRIST_BENCH_TOKENIZE_PEERS_H_
#define GRIST_BENCH_TOKENIZE_PEERS_H_

#include <string>

#include "absl/status/status.h"
#include "bench/harness.h"

namespace grist::bench {

// Adds, beside grist's figures `ours_per_core` (MB per CPU-second) and `ours_wall` (MB/s with
// `threads` threads): HF tokenizers per core and encode_batch on `threads` threads, and Megatron's
// preprocessing per core, on `text_file` (one line per document) with `model`. A missing or
// failing peer is recorded as unavailable with the reason; only a broken report is an error.
absl::Status AddTokenizePeerFigures(Report* report, const Options& options, const std::string& model,
                                    const std::string& text_file, int threads,
                                    const Stats& ours_per_core, const Stats& ours_wall);

}  // namespace grist::bench

#endif  // GRIST_BENCH_TOKENIZE_PEERS_H_
