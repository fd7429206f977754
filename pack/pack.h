// Packing tokenized documents into training samples of exactly seq_len + 1 tokens.
//
// Strategies:
//   concat   concatenate documents in order and cut every sample_tokens tokens (Megatron's
//            concatenate-and-chunk; the EOS that tokenize appends separates documents). A document
//            that crosses a cut continues at the start of the next sample ("documents_split"). The
//            final partial sample is padded, so no token is lost.
//   bestfit  best-fit-decreasing bin packing (Ding et al. 2024, "Fewer Truncations Improve
//            Language Modeling"): a document longer than sample_tokens is split into full samples
//            plus a remainder; the remainders and short documents of a window of documents are
//            sorted by length (longest first, ties in input order) and each goes into the open
//            sample with the least room that still fits it, else into a new sample; samples are
//            padded at the end and emitted in creation order. The window (`bestfit_window_tokens`)
//            bounds memory; it is the unit the algorithm sees, so the result depends on it but not
//            on threads or tasks. The window's documents are copied, or, given by a caller that
//            owns them (Add with an owner), kept where they are until the window is packed.
//
// Each sample comes with its segments (shard/shard_format.h words): document pieces in order, then
// at most one padding segment; padding positions hold `pad_id`.
//
// Thread safety: none; one Packer per output stream.
#ifndef GRIST_PACK_PACK_H_
#define GRIST_PACK_PACK_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/option_table.h"

namespace grist {
class Config;
}

namespace grist::pack {

struct PackOptions {
  int64_t seq_len = 2048;
  std::string strategy = "bestfit";  // "concat" | "bestfit"
  int32_t pad_id = 0;
  uint64_t bestfit_window_tokens = 16ull << 20;
  // The options of section [pack], each declared once (pack/pack.cc): FromConfig, the flags of
  // `grist pack` and their help with the defaults above all come from it (common/option_table.h).
  // pad_id is not among them: the caller sets it from the tokenizer.
  static const OptionTable<PackOptions>& Table();
  // Reads the keys of Table(): "pack.seq_len" (required; 1 <= seq_len < kMaxSampleTokens),
  // "pack.strategy", "pack.bestfit_window_tokens" (> 0). InvalidArgument naming the config and key.
  static absl::StatusOr<PackOptions> FromConfig(const Config& config);
  absl::Status Validate() const;
  uint32_t sample_tokens() const { return static_cast<uint32_t>(seq_len + 1); }
};

struct PackedSample {
  std::vector<int32_t> tokens;     // sample_tokens ids
  std::vector<uint32_t> segments;  // segment words
  uint64_t padding = 0;
};

struct PackStats {
  uint64_t documents = 0;
  uint64_t tokens_in = 0;
  uint64_t tokens_out = 0;        // document tokens in samples (= tokens_in: nothing is dropped)
  uint64_t samples = 0;
  uint64_t padding_tokens = 0;
  uint64_t documents_split = 0;   // documents whose tokens span more than one sample
  uint64_t truncated_documents = 0;  // documents that lost tokens (always 0: both strategies pad)
  uint64_t empty_documents = 0;   // zero-token documents (nothing to pack)
  double padding_fraction() const {
    return samples == 0 ? 0.0 : static_cast<double>(padding_tokens) /
                                    static_cast<double>(samples * sample_tokens_);
  }
  uint64_t sample_tokens_ = 0;
  std::string ToJson() const;
  void Merge(const PackStats& o);
};

class Packer {
 public:
  // Called with each sample in order. The sink may swap the sample's buffers with others of its
  // own (to keep them without a copy): the packer resets them before it reuses them.
  using Sink = std::function<absl::Status(PackedSample&)>;
  // Options must Validate().
  Packer(PackOptions options, Sink sink);
  Packer(const Packer&) = delete;
  Packer& operator=(const Packer&) = delete;
  // Adds the next document. Without `owner`, what the packer keeps of it is copied. With one, the
  // document's tokens must stay valid and unchanged while `owner` is held, and `owner_tokens` is
  // what `owner` holds in all: bestfit then holds `owner` instead of copying, until the window is
  // packed, as long as the owners it holds come to at most twice bestfit_window_tokens (a buffer
  // of long documents with a short one among them would otherwise stay for that one); past that
  // it copies. The samples are the same either way.
  absl::Status Add(std::span<const int32_t> document, std::shared_ptr<const void> owner,
                   uint64_t owner_tokens);
  // Adds the next document, copying what the packer keeps of it.
  absl::Status Add(std::span<const int32_t> document) { return Add(document, nullptr, 0); }
  // Emits what is buffered (the last partial sample, the last bestfit window).
  absl::Status Finish();
  const PackStats& stats() const { return stats_; }

 private:
  absl::Status Emit(PackedSample& s);
  absl::Status FlushWindow();
  PackOptions o_;
  Sink sink_;
  PackStats stats_;
  uint32_t st_;
  // concat
  PackedSample cur_;
  // bestfit: the window's documents (start, length), wherever they are: in a caller's buffer held
  // by owners_ (each owner once per run of documents it holds), or copied into chunks_. The chunks
  // (never reallocated, so copies stay where they are) and the vectors keep their capacity from
  // window to window, as does the sample being assembled.
  std::vector<std::pair<const int32_t*, uint32_t>> window_docs_;
  uint64_t window_tokens_ = 0;
  std::vector<std::shared_ptr<const void>> owners_;
  uint64_t owned_tokens_ = 0;  // the owner_tokens of owners_
  std::vector<std::unique_ptr<int32_t[]>> chunks_;
  size_t chunk_ = 0, chunk_used_ = 0;  // the chunk being filled, its tokens used
  PackedSample out_;
  // FlushWindow's scratch: documents in placement order, per sample its first and last document.
  std::vector<uint32_t> order_, next_;
  std::vector<std::pair<uint32_t, uint32_t>> bins_;
};

}  // namespace grist::pack

#endif  // GRIST_PACK_PACK_H_
