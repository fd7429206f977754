// Constants of Megatron-LM's indexed dataset index (MMIDIDX, version 1), the one definition every
// grist reader and writer of .bin/.idx files uses (tokenize encode output, release shards, release
// document files). The grammar is docs/formats/mmidx.md; keep both in step.
#ifndef GRIST_SHARD_MMIDX_FORMAT_H_
#define GRIST_SHARD_MMIDX_FORMAT_H_

#include <cstddef>
#include <cstdint>

namespace grist::shard {

// Token dtype of every grist token file (and of the loader's samples).
enum class TokenDtype { kUint16, kInt32 };
inline constexpr size_t TokenDtypeSize(TokenDtype dtype) {
  return dtype == TokenDtype::kUint16 ? 2 : 4;
}

inline constexpr char kIdxMagic[9] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', '\0', '\0'};
inline constexpr size_t kIdxMagicSize = 9;
inline constexpr uint64_t kIdxVersion = 1;
// Field offsets of the header: magic, version (u64), dtype code (u8), sequence_count (u64),
// document_count (u64).
inline constexpr size_t kIdxVersionOffset = 9;
inline constexpr size_t kIdxDtypeOffset = 17;
inline constexpr size_t kIdxSequenceCountOffset = 18;
inline constexpr size_t kIdxDocumentCountOffset = 26;
inline constexpr size_t kIdxHeaderSize = 34;
// Megatron's DType codes (megatron/core/datasets/indexed_dataset.py, DType).
inline constexpr uint8_t kDtypeCodeInt32 = 4;
inline constexpr uint8_t kDtypeCodeUint16 = 8;

inline constexpr uint8_t IdxDtypeCode(TokenDtype dtype) {
  return dtype == TokenDtype::kUint16 ? kDtypeCodeUint16 : kDtypeCodeInt32;
}
// Size of an index of n sequences and d document indices.
inline constexpr uint64_t IdxSize(uint64_t n, uint64_t d) {
  return kIdxHeaderSize + n * 4 + n * 8 + d * 8;
}

}  // namespace grist::shard

#endif  // GRIST_SHARD_MMIDX_FORMAT_H_
