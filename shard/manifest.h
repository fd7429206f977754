// manifest.json of a release (docs/formats/release.md): the in-memory form, its byte-reproducible
// JSON, the validating parser, and Release, the reader of a published release folder.
//
//   ASSIGN_OR_RETURN(auto release, Release::Open(env, "out/v1.0"));
//   for (const ShardInfo& s : release->split("train").shards) { ... }
//   ASSIGN_OR_RETURN(const ShardReader* r, release->OpenShard("train", 0));
//   SampleView v = r->sample(k);
#ifndef GRIST_SHARD_MANIFEST_H_
#define GRIST_SHARD_MANIFEST_H_

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "shard/shard.h"
#include "shard/shard_format.h"

namespace grist::shard {

struct TokenizerInfo {
  FileInfo file;  // path "tokenizer.model"
  uint64_t vocab_size = 0;
  int32_t bos_id = -1;
  int32_t eos_id = -1;
  int32_t pad_id = -1;   // the id padding positions hold (the tokenizer's pad, else eos)
  std::string model_type;  // "bpe", "unigram", ...
};

// A split's documents as one Megatron-native token file (documents/<split>.bin/.idx, MMIDIDX, one
// sequence per document, each ending with the tokenizer's EOS as Megatron's EOD).
struct DocumentsFileInfo {
  std::string name;         // "documents/train" (the files are name + ".bin" / ".idx")
  uint64_t sequences = 0;   // documents with at least one token
  uint64_t tokens = 0;      // every token of the file
  uint64_t eod_appended = 0;  // sequences whose EOD was appended (the document did not end in EOS)
  FileInfo bin, idx;
};

struct SplitInfo {
  uint64_t samples = 0;
  uint64_t tokens = 0;          // samples * sample_tokens
  uint64_t padding_tokens = 0;
  uint64_t documents = 0;       // documents whose tokens are in this split
  std::vector<ShardInfo> shards;
  // Absent for a split without document tokens, and in releases of grist before it was added.
  std::optional<DocumentsFileInfo> documents_file;
};

struct Manifest {
  int format_version = kReleaseFormatVersion;
  std::string release_version;  // "1.0"
  std::string release_id;       // ComputeReleaseId(); filled by the writer
  std::string grist_version;
  // The resolved config as canonical one-line JSON (Config::ResolvedJson(0)); embedded verbatim.
  std::string config_json = "{}";
  Hash128 config_xxh3_128;      // of config_json
  std::vector<FileInfo> inputs; // paths as given in the config (not release-relative)
  TokenizerInfo tokenizer;
  uint32_t seq_len = 0;
  uint32_t sample_tokens = 0;   // seq_len + 1
  TokenDtype token_dtype = TokenDtype::kUint16;
  uint64_t seed = 0;
  std::string packing;          // "concat" or "bestfit"
  // "train" and "validation" (either may have zero samples and no shards).
  std::map<std::string, SplitInfo, std::less<>> splits;
  // Per-stage accounting as a JSON object ({"clean": {...}, "dedup": {...}, ...}); embedded verbatim.
  std::string counts_json = "{}";

  // The split, or nullptr when absent.
  const SplitInfo* split(std::string_view name) const;
};

// XXH3-128 over config_json and each shard file's digest (train then validation, shards in order,
// .bin .idx .seg), then each documents file's (train then validation, .bin .idx), as 32-char
// lowercase hex.
std::string ComputeReleaseId(const Manifest& m);

// The manifest as pretty-printed JSON, fields in the documented order. Deterministic.
std::string ManifestToJson(const Manifest& m);

// Parses and validates a manifest: format and version, every required field with its type, safe
// relative paths for every release file (a '..' or absolute shard path is InvalidArgument naming
// it), sample_tokens == seq_len + 1, split sums, first_sample continuity, and config_xxh3_128 and
// release_id against their contents. `source` names the file in errors.
absl::StatusOr<Manifest> ParseManifest(std::string_view json, const std::string& source);

// Writes `dir`/manifest.json crash-safely (WriteFileAtomic: temporary, sync, rename, dir sync).
absl::Status WriteManifest(Env* env, const std::string& dir, const Manifest& m);

struct ReleaseOpenOptions {
  // Hash every shard file on open (ShardReadOptions::verify_checksums).
  bool verify_checksums = false;
};

// A published release folder, opened read-only. Open() reads and validates manifest.json (a folder
// without one is NotFound: "not a release"); shards are opened (and validated) on first use and
// stay mapped until the Release is destroyed. Thread-safe.
class Release {
 public:
  static absl::StatusOr<std::unique_ptr<Release>> Open(Env* env, std::string dir,
                                                       ReleaseOpenOptions options = {});
  ~Release();

  const Manifest& manifest() const { return manifest_; }
  const std::string& dir() const { return dir_; }
  // The split's shards (empty when the split has none or does not exist).
  const std::vector<ShardInfo>& shards(std::string_view split) const;
  // The opened shard i of `split` (validated on first call; the error is returned on every call).
  absl::StatusOr<const ShardReader*> OpenShard(std::string_view split, size_t i);
  // Path of the release's tokenizer model.
  std::string TokenizerPath() const;

 private:
  Release() = default;
  Env* env_ = nullptr;
  std::string dir_;
  ReleaseOpenOptions options_;
  Manifest manifest_;
  std::mutex mu_;
  std::map<std::pair<std::string, size_t>, std::unique_ptr<ShardReader>> open_;  // guarded by mu_
};

}  // namespace grist::shard

#endif  // GRIST_SHARD_MANIFEST_H_
