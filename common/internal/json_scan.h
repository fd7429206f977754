// The scans AppendJsonString (common/json_writer.h) uses to find the bytes of a valid UTF-8
// string that need escaping: bytes below 0x20, 0x7f, '"' and '\\' (bytes from 0x80 are plain, the
// UTF-8 being valid). Both are compiled where they can be so that tests check each against the
// byte-by-byte definition, whichever one the build uses. Internal to common/.
#ifndef GRIST_COMMON_INTERNAL_JSON_SCAN_H_
#define GRIST_COMMON_INTERNAL_JSON_SCAN_H_

#include <cstddef>

namespace grist::internal {

// The first byte at or after `i` of `p[0, n)` that needs escaping, or n: 8 bytes at a time (a
// word test that may flag a plain word, then byte by byte). The scan of builds without SSE2.
size_t NextSpecialByWords(const unsigned char* p, size_t i, size_t n);

#if defined(__SSE2__)
// The same, 16 bytes at a time with SSE2 compares.
size_t NextSpecialBy16(const unsigned char* p, size_t i, size_t n);
#endif

}  // namespace grist::internal

#endif  // GRIST_COMMON_INTERNAL_JSON_SCAN_H_
