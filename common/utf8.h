// UTF-8 validity, the one definition grist's readers and writers share (RFC 3629): a sequence is
// valid when its lead byte announces 1-4 bytes, every following byte is a continuation byte
// (10xxxxxx), and the code point is the shortest encoding of a scalar value: no overlong form,
// no surrogate (U+D800-U+DFFF), nothing above U+10FFFF. RepairUtf8 is the record readers' and the
// JSON writer's repair: each byte that does not start a valid sequence becomes U+FFFD (the
// cleaner's normalizer repairs by maximal subparts instead: clean/internal/normalizer.h).
//
// Header-only: the JSON writer and the tokenizer's normalizer call it per character.
// Thread safety: pure functions.
#ifndef GRIST_COMMON_UTF8_H_
#define GRIST_COMMON_UTF8_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace grist {

// The length (1-4) of the valid UTF-8 sequence at p[0], of the `avail` > 0 bytes there, or 0 when
// the bytes there are not one.
inline int Utf8SequenceLength(const unsigned char* p, size_t avail) {
  const unsigned char c = p[0];
  if (c < 0x80) return 1;
  int len = 0;
  uint32_t cp = 0;
  if ((c & 0xE0) == 0xC0) {
    len = 2, cp = c & 0x1F;
  } else if ((c & 0xF0) == 0xE0) {
    len = 3, cp = c & 0x0F;
  } else if ((c & 0xF8) == 0xF0) {
    len = 4, cp = c & 0x07;
  } else {
    return 0;
  }
  if (static_cast<size_t>(len) > avail) return 0;
  for (int k = 1; k < len; ++k) {
    if ((p[k] & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (p[k] & 0x3F);
  }
  static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return len;
}

inline size_t Utf8SequenceLength(const char* p, size_t avail) {
  return static_cast<size_t>(Utf8SequenceLength(reinterpret_cast<const unsigned char*>(p), avail));
}

// Whether all of `s` is valid UTF-8.
inline bool IsValidUtf8(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  for (size_t i = 0; i < s.size();) {
    const int n = Utf8SequenceLength(p + i, s.size() - i);
    if (n == 0) return false;
    i += static_cast<size_t>(n);
  }
  return true;
}

inline constexpr std::string_view kReplacementCharacter = "\xEF\xBF\xBD";  // U+FFFD

// `in` into `out` (replaced), each byte that does not start a valid sequence replaced by U+FFFD;
// returns how many were replaced.
inline uint32_t RepairUtf8(std::string_view in, std::string* out) {
  out->clear();
  out->reserve(in.size() + 16);
  uint32_t bad = 0;
  const auto* p = reinterpret_cast<const unsigned char*>(in.data());
  for (size_t i = 0; i < in.size();) {
    const int n = Utf8SequenceLength(p + i, in.size() - i);
    if (n > 0) {
      out->append(in.data() + i, static_cast<size_t>(n));
      i += static_cast<size_t>(n);
    } else {
      out->append(kReplacementCharacter);
      ++bad;
      ++i;
    }
  }
  return bad;
}

}  // namespace grist

#endif  // GRIST_COMMON_UTF8_H_
