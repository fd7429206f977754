// Constants of Megatron-LM's indexed dataset index (MMIDIDX, version 1), the one definition every
// grist reader and writer of .bin/.idx files uses (tokenize encode output, release shards, release
// document files). The grammar is docs/formats/mmidx.md; keep both in step.
#ifndef GRIST_SHARD_MMIDX_FORMAT_H_
#define GRIST_SHARD_MMIDX_FORMAT_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace grist::shard {

// Token dtype of every grist token file (and of the loader's samples).
enum class TokenDtype { kUint16, kInt32 };
inline constexpr size_t TokenDtypeSize(TokenDtype dtype) {
  return dtype == TokenDtype::kUint16 ? 2 : 4;
}

// The bytes of `ids` in `dtype` (little-endian, as every grist token file holds them), in one pass
// that also checks them: returns the index of the first id that does not fit the dtype (negative,
// or above 65,535 for uint16), or ids.size() when all fit. uint16 ids are narrowed into *buf
// (resized; its contents are unspecified when one does not fit); int32 ids are their own bytes
// (*bytes views `ids`, *buf untouched). *bytes is set only when all fit.
inline size_t TokenBytes(TokenDtype dtype, std::span<const int32_t> ids, std::string* buf,
                         std::string_view* bytes) {
  const size_t n = ids.size();
  uint32_t bad = 0;
  if (dtype == TokenDtype::kUint16) {
    buf->resize(n * 2);
    auto* out = reinterpret_cast<uint16_t*>(buf->data());
    for (size_t i = 0; i < n; ++i) {  // no early exit: the loop vectorizes
      const auto v = static_cast<uint32_t>(ids[i]);
      bad |= v >> 16;
      out[i] = static_cast<uint16_t>(v);
    }
    if (bad == 0) *bytes = *buf;
  } else {
    for (size_t i = 0; i < n; ++i) bad |= static_cast<uint32_t>(ids[i]) >> 31;
    if (bad == 0) *bytes = std::string_view(reinterpret_cast<const char*>(ids.data()), n * 4);
  }
  if (bad == 0) return n;
  const int64_t hi = dtype == TokenDtype::kUint16 ? 65535 : INT32_MAX;
  size_t i = 0;
  while (i < n && ids[i] >= 0 && ids[i] <= hi) ++i;
  return i;
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
