// Compressors for test inputs, written as the zstd and gzip command-line tools write files: one
// zstd frame at level 3 without a frame index; one gzip member at level 6.
#ifndef GRIST_TESTS_COMPRESS_UTIL_H_
#define GRIST_TESTS_COMPRESS_UTIL_H_

#include <zlib.h>
#include <zstd.h>

#include <string>

namespace grist::testing {

inline std::string Zstd(const std::string& s) {
  std::string out(ZSTD_compressBound(s.size()), '\0');
  out.resize(ZSTD_compress(out.data(), out.size(), s.data(), s.size(), 3));
  return out;
}

inline std::string Gzip(const std::string& s) {
  z_stream z{};
  deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
  std::string out(deflateBound(&z, s.size()) + 64, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(s.data()));
  z.avail_in = static_cast<uInt>(s.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

}  // namespace grist::testing

#endif  // GRIST_TESTS_COMPRESS_UTIL_H_
