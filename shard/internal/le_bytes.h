// Little-endian fixed-width fields of shard/'s on-disk formats (MMIDIDX, .seg; grammars in
// docs/formats/). grist's formats are little-endian and these helpers do no swapping, so a
// big-endian host fails to compile rather than reading wrong values. Private to grist::shard.
#ifndef GRIST_SHARD_INTERNAL_LE_BYTES_H_
#define GRIST_SHARD_INTERNAL_LE_BYTES_H_

#include <bit>
#include <cstring>
#include <string>

static_assert(std::endian::native == std::endian::little,
              "grist's on-disk formats are little-endian; big-endian hosts need byte swapping");

namespace grist::shard::internal {

// Appends v's bytes to *out.
template <typename T>
void Put(std::string* out, T v) {
  out->append(reinterpret_cast<const char*>(&v), sizeof(v));
}

// Reads a T from p (any alignment).
template <typename T>
T Get(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

}  // namespace grist::shard::internal

#endif  // GRIST_SHARD_INTERNAL_LE_BYTES_H_
