// Constants of the release folder format. The grammar is docs/formats/release.md; keep both in step.
#ifndef GRIST_SHARD_SHARD_FORMAT_H_
#define GRIST_SHARD_SHARD_FORMAT_H_

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "shard/mmidx_format.h"

namespace grist::shard {

// ---- Release folder ----
inline constexpr std::string_view kManifestName = "manifest.json";
inline constexpr std::string_view kTokenizerName = "tokenizer.model";
inline constexpr std::string_view kShardsDir = "shards";
// Megatron document files, one MMIDIDX pair per split: documents/<split>.{bin,idx}.
inline constexpr std::string_view kDocumentsDir = "documents";
inline constexpr std::string_view kReportsDir = "reports";
inline constexpr std::string_view kReleaseFormat = "grist-release";
inline constexpr int kReleaseFormatVersion = 1;
inline constexpr std::string_view kTrainSplit = "train";
inline constexpr std::string_view kValidationSplit = "validation";

// .bin/.idx: Megatron-LM MMIDIDX, constants in shard/mmidx_format.h (one definition for all of
// grist).

// ---- .seg (grist segment sidecar, version 1) ----
inline constexpr char kSegMagic[8] = {'G', 'R', 'I', 'S', 'T', 'S', 'E', 'G'};
inline constexpr uint32_t kSegVersion = 1;
// magic + version + sample_tokens + 2 reserved u32 + sample_count + segment_count.
inline constexpr size_t kSegHeaderSize = 8 + 4 + 4 + 4 + 4 + 8 + 8;
inline constexpr size_t kSegFooterSize = 8;
// A segment word: bit 31 marks padding; bits 0..30 are the length in tokens.
inline constexpr uint32_t kSegPadBit = 1u << 31;
inline constexpr uint32_t kSegLengthMask = kSegPadBit - 1;

inline constexpr uint32_t SegmentWord(uint32_t length, bool padding) {
  return (length & kSegLengthMask) | (padding ? kSegPadBit : 0u);
}
inline constexpr uint32_t SegmentLength(uint32_t word) { return word & kSegLengthMask; }
inline constexpr bool SegmentIsPadding(uint32_t word) { return (word & kSegPadBit) != 0; }

// Largest sample the format accepts (sequence lengths are i32 in .idx; segment lengths 31 bits).
inline constexpr uint32_t kMaxSampleTokens = 1u << 30;

}  // namespace grist::shard

#endif  // GRIST_SHARD_SHARD_FORMAT_H_
