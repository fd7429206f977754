// Deterministic generated text for the tokenizer's differential tests and fuzzer: words, digits,
// punctuation, characters from many scripts (combining marks, CJK, emoji, full-width forms,
// U+2581 and U+FFFD themselves), control characters, long runs of spaces and, when `invalid`,
// malformed UTF-8 (stray continuation bytes, truncated sequences, overlong forms, surrogates).
#ifndef GRIST_TESTS_TOKENIZE_GEN_TEXT_H_
#define GRIST_TESTS_TOKENIZE_GEN_TEXT_H_

#include <cstdint>
#include <string>

#include "common/rng.h"

namespace grist::testing {

inline void AppendUtf8(std::string* out, uint32_t cp) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

// About `bytes` bytes of text.
inline std::string GenText(Rng* rng, size_t bytes, bool invalid) {
  static const char* const kWords[] = {
      "the", "of", "and", "to", "in", "a", "is", "that", "for", "it", "as", "was", "with",
      "be", "by", "on", "not", "he", "I", "this", "are", "or", "his", "from", "at", "which",
      "news", "report", "said", "government", "year", "people", "Wikipedia", "city", "new",
      "<sep>", "@@", "qz", "caf\xc3\xa9", "na\xc3\xafve", "\xef\xac\x81le", "Stra\xc3\x9f\x65",
      "\xe2\x96\x81word", "x\xe2\x96\x81y", "\xef\xbd\x86\xef\xbd\x95\xef\xbd\x8c\xef\xbd\x8c"};
  static const uint32_t kRanges[][2] = {
      {0x20, 0x7E},     {0xA0, 0xFF},     {0x100, 0x17F},   {0x300, 0x36F},  {0x391, 0x3C9},
      {0x410, 0x44F},   {0x5D0, 0x5EA},   {0x620, 0x64A},   {0x900, 0x97F},  {0xE00, 0xE5B},
      {0x2000, 0x206F}, {0x2580, 0x2582}, {0x3000, 0x303F}, {0x3040, 0x30FF}, {0x4E00, 0x4E80},
      {0xAC00, 0xAC40}, {0xFF01, 0xFF5E}, {0xFFF0, 0xFFFD}, {0x1F600, 0x1F64F}, {0x10000, 0x1007F}};
  std::string out;
  while (out.size() < bytes) {
    const uint64_t r = rng->Uniform(100);
    if (r < 45) {
      out += kWords[rng->Uniform(sizeof(kWords) / sizeof(kWords[0]))];
      out.push_back(' ');
    } else if (r < 55) {
      for (uint64_t n = 1 + rng->Uniform(6); n > 0; --n) out.push_back(char('0' + rng->Uniform(10)));
      out.push_back(rng->Uniform(2) ? ' ' : ',');
    } else if (r < 75) {
      const auto& g = kRanges[rng->Uniform(sizeof(kRanges) / sizeof(kRanges[0]))];
      for (uint64_t n = 1 + rng->Uniform(5); n > 0; --n) {
        AppendUtf8(&out, static_cast<uint32_t>(g[0] + rng->Uniform(g[1] - g[0] + 1)));
      }
      if (rng->Uniform(2)) out.push_back(' ');
    } else if (r < 82) {
      static const char kPunct[] = ".,;:!?()[]{}\"'-/\\*&%$#";
      out.push_back(kPunct[rng->Uniform(sizeof(kPunct) - 1)]);
    } else if (r < 88) {
      static const char kCtl[] = {'\t', '\n', '\r', '\x01', '\x1b', '\x7f', '\x0b', '\x0c', '\0'};
      out.push_back(kCtl[rng->Uniform(sizeof(kCtl))]);
    } else if (r < 93) {
      out.append(1 + rng->Uniform(rng->Uniform(4) == 0 ? 40 : 4), ' ');
    } else if (r < 97 || !invalid) {
      out += rng->Uniform(2) ? "\xe2\x96\x81" : "\xe3\x80\x80";  // U+2581, ideographic space
    } else {
      static const char* const kBad[] = {"\x80", "\xbf", "\xc3", "\xe2\x96", "\xc0\x80",
                                         "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xff", "\xf0\x9f"};
      out += kBad[rng->Uniform(sizeof(kBad) / sizeof(kBad[0]))];
    }
  }
  return out;
}

}  // namespace grist::testing

#endif  // GRIST_TESTS_TOKENIZE_GEN_TEXT_H_
