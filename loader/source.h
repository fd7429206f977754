// Where the loader's samples come from: a split of a release (OpenReleaseSplit), or any other
// implementation (tests use an in-memory one). A sample is `sample_tokens` tokens plus the segments
// that tile them (docs/formats/release.md, `.seg`).
//
// Thread safety: GetSample may be called concurrently from many threads; the views it returns stay
// valid for the source's lifetime.
#ifndef GRIST_LOADER_SOURCE_H_
#define GRIST_LOADER_SOURCE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "shard/shard_format.h"

namespace grist::loader {

// The token dtype and the `.seg` segment encoding are the release format's (shard/shard_format.h).
using shard::TokenDtype;
// Segment words: bit 31 marks padding, bits 0..30 are the length.
inline constexpr uint32_t kSegmentPaddingBit = shard::kSegPadBit;
inline constexpr uint32_t kSegmentLengthMask = shard::kSegLengthMask;

struct SampleView {
  const void* tokens = nullptr;        // sample_tokens values of token_dtype()
  const uint32_t* segments = nullptr;  // num_segments encoded segments
  uint64_t num_segments = 0;
};

class SampleSource {
 public:
  virtual ~SampleSource() = default;
  virtual uint64_t num_samples() const = 0;
  // seq_len + 1.
  virtual uint32_t sample_tokens() const = 0;
  virtual TokenDtype token_dtype() const = 0;
  // The release's identity (manifest release_id); a loaded state must carry the same.
  virtual const std::string& release_id() const = 0;
  virtual const std::string& split() const = 0;
  // Sample `index` (< num_samples()) of the split. The segments are not validated here; the loader
  // checks them (DataLoss naming the sample on a violation).
  virtual absl::Status GetSample(uint64_t index, SampleView* out) const = 0;
  // Where sample `index` lives, for error messages (e.g. "shards/train-00003 sample 17").
  virtual std::string Describe(uint64_t index) const = 0;
  // The source as a whole in messages (a release's folder); default: its release id.
  virtual std::string Location() const { return release_id(); }
  // What identifies the tokenizer its tokens come from (a release: the tokenizer file's digest
  // and vocabulary size); empty when unknown. Blended sources must agree.
  virtual std::string TokenizerId() const { return ""; }
};

}  // namespace grist::loader

#endif  // GRIST_LOADER_SOURCE_H_
