// The safetensors layer of a grist checkpoint file: dtypes, planning a file's layout (header
// length, 4096-aligned data start, tensor offsets), rendering the header with grist's checksums, and
// parsing a header from untrusted bytes. Grammar: docs/formats/checkpoint.md.
//
// Thread safety: free functions, no shared state.
#ifndef GRIST_CKPTIO_SAFETENSORS_H_
#define GRIST_CKPTIO_SAFETENSORS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "common/hash.h"

namespace grist::ckptio {

enum class DType : int {
  kBool = 0, kU8, kI8, kF8E5M2, kF8E4M3, kI16, kU16, kF16, kBF16, kI32, kU32, kF32, kI64, kU64,
  kF64,
};
inline constexpr int kNumDTypes = 15;

// "F32", "BF16", ... as the safetensors spec spells them.
std::string_view DTypeName(DType d);
size_t DTypeSize(DType d);
std::optional<DType> DTypeFromName(std::string_view name);

// One tensor as it appears in a file. `begin`/`end` are relative to the data start.
struct TensorInfo {
  std::string name;
  DType dtype = DType::kU8;
  std::vector<int64_t> shape;
  uint64_t begin = 0;
  uint64_t end = 0;
  uint64_t nbytes() const { return end - begin; }
};

// Ordered string map stored as `__metadata__` (order kept as given; keys unique).
using Metadata = std::vector<std::pair<std::string, std::string>>;

// A planned file: the header occupies [0, data_start); tensor i occupies
// [data_start + tensors[i].begin, data_start + tensors[i].end); file_size = data_start + data_len.
struct FileLayout {
  std::vector<TensorInfo> tensors;
  Metadata user_metadata;
  uint64_t data_start = 0;
  uint64_t data_len = 0;
  uint64_t file_size = 0;
  uint64_t checksum_block = 0;
  uint64_t num_blocks() const {
    return checksum_block == 0 ? 0 : (data_len + checksum_block - 1) / checksum_block;
  }
};

struct TensorSpec {
  std::string name;
  DType dtype = DType::kU8;
  std::vector<int64_t> shape;
};

// Lays tensors out in the given order, contiguous with no holes, data starting at a multiple of
// `align` (a power of two >= 8). InvalidArgument for an empty or duplicate name, a negative
// dimension, a size overflow, or user metadata using the reserved "grist." prefix.
absl::StatusOr<FileLayout> PlanFile(const std::vector<TensorSpec>& specs, Metadata user_metadata,
                                    uint64_t checksum_block, uint64_t align);

// Renders bytes [0, data_start): the 8-byte little-endian header length, the JSON header with
// `__metadata__` (user metadata plus grist's checksums) and space padding. `block_hashes` has
// layout.num_blocks() entries.
std::string RenderHeader(const FileLayout& layout, const std::vector<uint64_t>& block_hashes);

// XXH3-128 over the block digests (8 little-endian bytes each): the file's data checksum.
Hash128 DataHashOf(const std::vector<uint64_t>& block_hashes);

// A parsed header. `block_hashes`/`data_hash` are present only for files grist wrote.
struct ParsedHeader {
  std::vector<TensorInfo> tensors;  // in data order
  Metadata metadata;                // every `__metadata__` entry, grist's included
  uint64_t data_start = 0;
  uint64_t checksum_block = 0;
  std::vector<uint64_t> block_hashes;
  std::optional<Hash128> data_hash;
};

// Parses the header of a safetensors file of `file_size` bytes whose first bytes are `prefix`
// (at least 8 bytes; the whole header when the length says it fits). Rejects with DataLoss, naming
// `what`: a header length beyond the file or kMaxHeaderBytes, malformed JSON, unknown dtype, a
// negative or overflowing shape, offsets that disagree with the shape, overlap, holes, or data
// not ending at the end of the file, malformed grist checksum metadata.
// If `prefix` is shorter than the header, returns OutOfRange with the needed byte count in the
// message (use HeaderBytesNeeded first).
absl::StatusOr<ParsedHeader> ParseHeader(std::string_view prefix, uint64_t file_size,
                                         const std::string& what);
// 8 + the header length from the first 8 bytes, validated against the file size and the limit.
absl::StatusOr<uint64_t> HeaderBytesNeeded(std::string_view first8, uint64_t file_size,
                                           const std::string& what);

}  // namespace grist::ckptio

#endif  // GRIST_CKPTIO_SAFETENSORS_H_
