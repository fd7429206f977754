// Normalization of the `clean` stage, one pass over the bytes: UTF-8 repair (maximal subparts),
// byte order mark, control characters, line endings, whitespace, and Unicode NFC/NFKC of the lines
// that may need it. Private to clean/ (Cleaner::Normalize is the public entry).
#ifndef GRIST_CLEAN_INTERNAL_NORMALIZER_H_
#define GRIST_CLEAN_INTERNAL_NORMALIZER_H_

#include <string>
#include <string_view>

#include "clean/cleaner.h"

namespace grist::clean::internal {

// Writes the normalized `raw` to *out (cleared first) and adds what changed to *counters. Returns
// false when `raw` held invalid UTF-8; *out then holds the repaired text (U+FFFD per maximal
// invalid subpart) whatever the policy: the caller applies CleanOptions::utf8.
bool NormalizeText(const CleanOptions& options, std::string_view raw, std::string* out,
                   NormalizeCounters* counters);

}  // namespace grist::clean::internal

#endif  // GRIST_CLEAN_INTERNAL_NORMALIZER_H_
