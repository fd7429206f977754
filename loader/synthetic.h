// A deterministic synthetic release for the loader's tests, benchmarks and examples, written with
// shard/'s writer (so it is a real, published release folder). Documents of random length are packed
// into samples with random padding; tokens are drawn from grist's Rng. Same options, same bytes.
#ifndef GRIST_LOADER_SYNTHETIC_H_
#define GRIST_LOADER_SYNTHETIC_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"

namespace grist {
class Env;
}

namespace grist::loader {

struct SyntheticReleaseOptions {
  uint64_t samples = 1024;        // train samples
  uint64_t validation_samples = 0;
  uint32_t seq_len = 128;         // sample_tokens = seq_len + 1
  uint64_t samples_per_shard = 256;
  uint32_t vocab_size = 32000;    // > 65536 gives int32 tokens
  uint32_t mean_document_tokens = 100;
  double padding_probability = 0.25;  // chance that a sample ends with padding
  uint64_t seed = 1234;           // data generator seed, also the manifest's "seed"
};

// Writes a complete release to `dir` (created; must not hold a manifest.json already).
absl::Status WriteSyntheticRelease(Env* env, const std::string& dir,
                                   const SyntheticReleaseOptions& options);

}  // namespace grist::loader

#endif  // GRIST_LOADER_SYNTHETIC_H_
