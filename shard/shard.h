// Shards of a release: the writer and the validating reader of one shard's .bin/.idx/.seg triple
// (docs/formats/release.md; constants in shard/shard_format.h).
//
// A shard holds whole packed samples of exactly `sample_tokens` (= seq_len + 1) tokens. Each sample
// also has its segments: the pieces of documents that tile it, then at most one padding segment
// (segment words as in shard_format.h: SegmentWord(length, padding)).
//
//   ASSIGN_OR_RETURN(auto w, ShardWriter::Open(env, release_dir, "shards/train-00000", 2049,
//                                              TokenDtype::kUint16));
//   RETURN_IF_ERROR(w->Append(tokens, segments));        // per sample
//   ASSIGN_OR_RETURN(ShardInfo info, w->Finish());        // files durable, checksums in `info`
//
//   ASSIGN_OR_RETURN(auto r, ShardReader::Open(env, release_dir, info, 2049, TokenDtype::kUint16));
//   SampleView s = r->sample(k);                          // tokens pointer + segments
#ifndef GRIST_SHARD_SHARD_H_
#define GRIST_SHARD_SHARD_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/hash.h"
#include "shard/mmidx_format.h"

namespace grist {
class Env;
}

namespace grist::shard {

// "uint16" / "int32".
std::string_view TokenDtypeName(TokenDtype dtype);
absl::StatusOr<TokenDtype> ParseTokenDtype(std::string_view name);
// uint16 when every id < vocab_size fits (vocab_size <= 65536), else int32.
inline TokenDtype DtypeForVocab(uint64_t vocab_size) {
  return vocab_size <= 65536 ? TokenDtype::kUint16 : TokenDtype::kInt32;
}

// One file of a release, as the manifest records it.
struct FileInfo {
  std::string path;  // relative to the release folder, '/'-separated
  uint64_t bytes = 0;
  Hash128 xxh3_128;
};

// One shard as the manifest records it.
struct ShardInfo {
  std::string name;           // "shards/train-00000" (the files are name + ".bin"/".idx"/".seg")
  uint64_t samples = 0;
  uint64_t tokens = 0;        // samples * sample_tokens (every position, padding included)
  uint64_t padding_tokens = 0;
  uint64_t first_sample = 0;  // split-global index of the shard's first sample
  FileInfo bin, idx, seg;
};

// Writes one shard. Each file goes to "<path>.tmp", is synced and renamed into place by Finish(),
// which then syncs the shard directory; until then nothing under the final names exists, so a crash
// leaves no half-written shard that a reader would accept. The .bin is streamed; the segment table
// is held in memory (4 bytes per segment + 8 per sample), which the size bound on shards keeps
// small. Not thread-safe.
class ShardWriter {
 public:
  // `name` is relative to `release_dir` (e.g. "shards/train-00000"); its directory must exist.
  // InvalidArgument for sample_tokens of 0 or above kMaxSampleTokens, or a name that is not a safe
  // relative path.
  static absl::StatusOr<std::unique_ptr<ShardWriter>> Open(Env* env, std::string release_dir,
                                                           std::string name,
                                                           uint32_t sample_tokens,
                                                           TokenDtype dtype);
  ~ShardWriter();

  // Appends one sample. `tokens` must hold sample_tokens ids (each in the dtype's range) and
  // `segments` must tile them (lengths sum to sample_tokens, no zero lengths, padding only last):
  // InvalidArgument otherwise, and nothing is written. I/O errors are returned as they come.
  absl::Status Append(std::span<const int32_t> tokens, std::span<const uint32_t> segments);

  // Writes .idx and .seg, syncs and renames all three files, syncs the directory. Returns the
  // shard's description with sizes and XXH3-128 of each file. first_sample is left 0 (the caller
  // numbers shards within a split). No Append after Finish.
  absl::StatusOr<ShardInfo> Finish();

  uint64_t samples() const { return samples_; }
  // Bytes of the three files once finished (so far).
  uint64_t bytes() const;

 private:
  ShardWriter() = default;
  struct Impl;
  std::unique_ptr<Impl> impl_;
  uint64_t samples_ = 0;
};

// One sample of a shard, pointing into the reader's mapping (valid while the reader lives).
struct SampleView {
  const void* tokens = nullptr;  // sample_tokens ids of `dtype`, little-endian
  TokenDtype dtype = TokenDtype::kUint16;
  uint32_t sample_tokens = 0;
  std::span<const uint32_t> segments;  // segment words (shard_format.h)

  int32_t token(size_t i) const {
    return dtype == TokenDtype::kUint16 ? static_cast<const uint16_t*>(tokens)[i]
                                        : static_cast<const int32_t*>(tokens)[i];
  }
};

struct ShardReadOptions {
  // Also hash every file and compare with the manifest's XXH3-128 (reads each file once).
  bool verify_checksums = false;
};

// Reads one shard through a read-only memory mapping (POSIX Env) or an in-memory copy (other Envs).
// Open() validates before mapping: every file's size equals the manifest's and the size the headers
// imply, the .idx matches the MMIDIDX layout for fixed samples, and the .seg passes every check of
// docs/formats/release.md including its footer checksum. So a truncated or corrupted shard is a
// DataLoss error naming the file (never SIGBUS). Thread-safe for concurrent sample() calls.
class ShardReader {
 public:
  static absl::StatusOr<std::unique_ptr<ShardReader>> Open(Env* env, const std::string& release_dir,
                                                           const ShardInfo& info,
                                                           uint32_t sample_tokens,
                                                           TokenDtype dtype,
                                                           ShardReadOptions options = {});
  ~ShardReader();

  uint64_t samples() const { return samples_; }
  uint32_t sample_tokens() const { return sample_tokens_; }
  TokenDtype dtype() const { return dtype_; }
  // Sample k of this shard, 0 <= k < samples() (CHECKed).
  SampleView sample(uint64_t k) const;

 private:
  ShardReader() = default;
  struct Impl;
  std::unique_ptr<Impl> impl_;
  uint64_t samples_ = 0;
  uint32_t sample_tokens_ = 0;
  TokenDtype dtype_ = TokenDtype::kUint16;
};

// Path rules of the manifest: relative, '/'-separated, no empty, "." or ".." component, no leading
// '/', no backslash or NUL. InvalidArgument naming the path otherwise.
absl::Status CheckRelativePath(std::string_view path);

}  // namespace grist::shard

#endif  // GRIST_SHARD_SHARD_H_
