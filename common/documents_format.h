// Constants of grist's document part format and the reader of a part's frame index. The grammar is
// docs/formats/documents.md ("Files"); RecordWriter (common/record_writer.h) writes it.
#ifndef GRIST_COMMON_DOCUMENTS_FORMAT_H_
#define GRIST_COMMON_DOCUMENTS_FORMAT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace grist {

class RandomAccessFile;

namespace documents_format {
// The frame index of a part (docs/formats/documents.md, index-frame): a zstd skippable frame at
// the end of the part,
//   magic u32 | size u32 | entry* | count u32 | xxh3-64 u64 of (entries, count) | "GRISTIDX"
//   entry = compressed-bytes u64 | records u64          (all little-endian)
inline constexpr uint32_t kIndexFrameMagic = 0x184D2A5B;  // one of zstd's skippable-frame magics
inline constexpr char kIndexTag[8] = {'G', 'R', 'I', 'S', 'T', 'I', 'D', 'X'};
inline constexpr uint64_t kIndexEntryBytes = 16;  // compressed-bytes u64, records u64
inline constexpr uint64_t kIndexTailBytes = 20;   // count u32, checksum u64, tag

// The index frame for `entries` (kIndexEntryBytes each, as the grammar's entry*), ready to append.
std::string IndexFrame(const std::string& entries);
}  // namespace documents_format

// One zstd frame of a part, from the part's frame index.
struct ZstdFrame {
  uint64_t offset = 0;   // byte offset of the frame in the file
  uint64_t bytes = 0;    // compressed bytes
  uint64_t records = 0;  // lines (records) in the frame
};
// The frame index at the end of a part written by RecordWriter, validated against the file (size,
// checksum, frames tiling the file up to the index). nullopt when the file has none or it does not
// validate (the file is then read whole, as any zstd file). An error only when the file cannot be
// read.
absl::StatusOr<std::optional<std::vector<ZstdFrame>>> ReadZstdFrameIndex(const RandomAccessFile& file);

}  // namespace grist

#endif  // GRIST_COMMON_DOCUMENTS_FORMAT_H_
