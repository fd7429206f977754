// Little-endian integer fields of grist's own binary formats in common/ (the frame index of a
// document part). Header-only; no state.
#ifndef GRIST_COMMON_INTERNAL_LE_H_
#define GRIST_COMMON_INTERNAL_LE_H_

#include <cstdint>
#include <string>

namespace grist::internal {

// Appends the low `bytes` bytes of `v`, least significant first.
inline void PutLe(std::string* out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}
// Reads `bytes` bytes at `p` as a little-endian unsigned integer.
inline uint64_t GetLe(const char* p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

}  // namespace grist::internal

#endif  // GRIST_COMMON_INTERNAL_LE_H_
