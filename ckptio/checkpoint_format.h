// On-disk constants of a grist checkpoint. The grammar is docs/formats/checkpoint.md.
//
// A checkpoint is a folder: one safetensors file per rank (`rank-NNNNN.safetensors`) and
// `manifest.json`, written last. Each safetensors file is a plain safetensors file (any reader
// loads it) whose JSON header is padded with spaces so the tensor data starts kDataAlign-aligned,
// and whose `__metadata__` carries grist's checksums under keys starting with kReservedPrefix.
#ifndef GRIST_CKPTIO_CHECKPOINT_FORMAT_H_
#define GRIST_CKPTIO_CHECKPOINT_FORMAT_H_

#include <cstdint>
#include <string_view>

namespace grist::ckptio {

// Data of every file starts at a multiple of this (or of the O_DIRECT alignment when larger).
inline constexpr uint64_t kDataAlign = 4096;
// Headers longer than this are rejected as hostile (safetensors' own limit).
inline constexpr uint64_t kMaxHeaderBytes = 100ull * 1000 * 1000;
// Default size of a checksum block of the data region.
inline constexpr uint64_t kDefaultChecksumBlock = 1ull << 20;

inline constexpr std::string_view kManifestName = "manifest.json";
inline constexpr std::string_view kManifestFormat = "grist.checkpoint";
// Manifests this grist writes (2: with the global tensor index) and the oldest it still reads.
inline constexpr int kManifestVersionCurrent = 2;
inline constexpr int kManifestVersionOldest = 1;
// The manifest's own checksum: XXH3-64 of every byte before the last occurrence of this key.
inline constexpr std::string_view kManifestChecksumKey = "\"manifest_xxh3\"";

// `__metadata__` keys reserved for grist (user metadata may not start with the prefix).
inline constexpr std::string_view kReservedPrefix = "grist.";
inline constexpr std::string_view kMetaFormatVersion = "grist.format";  // "1"
inline constexpr std::string_view kMetaBlockSize = "grist.block_size";  // decimal bytes
// 16 lowercase hex digits of XXH3-64 per checksum block of the data region, concatenated.
inline constexpr std::string_view kMetaBlockHashes = "grist.block_xxh3";
// XXH3-128 (32 hex digits) of the block digests, each as 8 little-endian bytes, in order.
inline constexpr std::string_view kMetaDataHash = "grist.data_xxh3";

}  // namespace grist::ckptio

#endif  // GRIST_CKPTIO_CHECKPOINT_FORMAT_H_
