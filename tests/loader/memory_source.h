// An in-memory SampleSource for the loader's tests: deterministic tokens and segments per sample.
#ifndef GRIST_TESTS_LOADER_MEMORY_SOURCE_H_
#define GRIST_TESTS_LOADER_MEMORY_SOURCE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/rng.h"
#include "loader/source.h"

namespace grist::loader::testing {

class MemorySource : public SampleSource {
 public:
  // `n` samples of `sample_tokens` uint16 tokens; token j of sample k is (k * 131 + j) % 65521.
  // Segments: random document pieces, and padding at the end of every third sample.
  MemorySource(uint64_t n, uint32_t sample_tokens, std::string release_id = "rel-A")
      : n_(n), st_(sample_tokens), release_id_(std::move(release_id)), split_("train") {
    tokens_.resize(n * sample_tokens);
    offsets_.push_back(0);
    Rng rng(7);
    for (uint64_t k = 0; k < n; ++k) {
      for (uint32_t j = 0; j < sample_tokens; ++j) {
        tokens_[k * sample_tokens + j] = static_cast<uint16_t>((k * 131 + j) % 65521);
      }
      uint32_t left = sample_tokens;
      uint32_t pad = (k % 3 == 2) ? 1 + static_cast<uint32_t>(rng.Uniform(sample_tokens / 2)) : 0;
      left -= pad;
      while (left > 0) {
        uint32_t len = 1 + static_cast<uint32_t>(rng.Uniform(left));
        segments_.push_back(len);
        left -= len;
      }
      if (pad) segments_.push_back(pad | kSegmentPaddingBit);
      offsets_.push_back(segments_.size());
    }
  }
  uint64_t num_samples() const override { return n_; }
  uint32_t sample_tokens() const override { return st_; }
  TokenDtype token_dtype() const override { return TokenDtype::kUint16; }
  const std::string& release_id() const override { return release_id_; }
  const std::string& split() const override { return split_; }
  absl::Status GetSample(uint64_t index, SampleView* out) const override {
    out->tokens = tokens_.data() + index * st_;
    out->segments = segments_.data() + offsets_[index];
    out->num_segments = offsets_[index + 1] - offsets_[index];
    return absl::OkStatus();
  }
  std::string Describe(uint64_t index) const override { return absl::StrCat("mem sample ", index); }

  std::vector<uint32_t>& mutable_segments() { return segments_; }
  const uint16_t* tokens(uint64_t k) const { return tokens_.data() + k * st_; }
  std::vector<uint32_t> segments(uint64_t k) const {
    return {segments_.begin() + static_cast<long>(offsets_[k]),
            segments_.begin() + static_cast<long>(offsets_[k + 1])};
  }

 private:
  uint64_t n_;
  uint32_t st_;
  std::string release_id_, split_;
  std::vector<uint16_t> tokens_;
  std::vector<uint32_t> segments_;
  std::vector<uint64_t> offsets_;
};

}  // namespace grist::loader::testing

#endif  // GRIST_TESTS_LOADER_MEMORY_SOURCE_H_
