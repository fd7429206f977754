#include "clean/internal/text_stats.h"

#include <utf8proc.h>

#include <algorithm>
#include <cstring>

#include "common/hash.h"

namespace grist::clean::internal {
namespace {

enum CharClass : uint8_t { kWs = 0, kAlpha, kDigit, kPunct, kOther, kHigh };

struct AsciiTable {
  uint8_t cls[256];
  constexpr AsciiTable() : cls() {
    for (int i = 0; i < 256; ++i) {
      uint8_t c = kOther;
      if (i >= 0x80) {
        c = kHigh;
      } else if (i == ' ' || i == '\t' || i == '\r' || i == 0x0B || i == 0x0C || i == '\n') {
        c = kWs;
      } else if ((i >= 'a' && i <= 'z') || (i >= 'A' && i <= 'Z')) {
        c = kAlpha;
      } else if (i >= '0' && i <= '9') {
        c = kDigit;
      } else if (i >= 0x21 && i <= 0x7E) {
        c = kPunct;
      }
      cls[i] = c;
    }
  }
};
constexpr AsciiTable kAscii;

// Decodes the code point at p (valid UTF-8 expected; an invalid byte decodes as itself, length 1).
inline size_t Decode(const uint8_t* p, const uint8_t* end, int32_t* cp) {
  utf8proc_int32_t c;
  utf8proc_ssize_t n = utf8proc_iterate(p, end - p, &c);
  if (n <= 0) {
    *cp = 0xFFFD;
    return 1;
  }
  *cp = c;
  return static_cast<size_t>(n);
}

// Class of a non-ASCII code point: kWs (Z*), kPunct (P*, S*), kAlpha (L*), kDigit (other word
// characters: numbers, marks, format, private use...).
inline uint8_t ClassOf(int32_t cp) {
  switch (utf8proc_category(cp)) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
      return kAlpha;
    case UTF8PROC_CATEGORY_PC:
    case UTF8PROC_CATEGORY_PD:
    case UTF8PROC_CATEGORY_PS:
    case UTF8PROC_CATEGORY_PE:
    case UTF8PROC_CATEGORY_PI:
    case UTF8PROC_CATEGORY_PF:
    case UTF8PROC_CATEGORY_PO:
    case UTF8PROC_CATEGORY_SM:
    case UTF8PROC_CATEGORY_SC:
    case UTF8PROC_CATEGORY_SK:
    case UTF8PROC_CATEGORY_SO:
      return kPunct;
    case UTF8PROC_CATEGORY_ZS:
    case UTF8PROC_CATEGORY_ZL:
    case UTF8PROC_CATEGORY_ZP:
      return kWs;
    default:
      return kDigit;
  }
}

struct Char {
  uint8_t cls;
  int32_t cp;
  size_t len;
};

inline Char At(const uint8_t* p, const uint8_t* end) {
  uint8_t c = kAscii.cls[*p];
  if (c != kHigh) return Char{c == kOther ? static_cast<uint8_t>(kDigit) : c, *p, 1};
  int32_t cp;
  size_t n = Decode(p, end, &cp);
  return Char{ClassOf(cp), cp, n};
}

// Hash of a token: short tokens (almost all) are loaded into two words and mixed inline; longer ones
// go to XXH3. Only equality within one document matters.
inline uint64_t TokenHash(const uint8_t* p, size_t n) {
  if (n > 16) return Hash64(reinterpret_cast<const char*>(p), n);
  uint64_t a = 0, b = 0;
  if (n >= 8) {
    std::memcpy(&a, p, 8);
    std::memcpy(&b, p + n - 8, 8);  // overlaps when n < 16; n is mixed in below
  } else if (n >= 4) {
    uint32_t x, y;
    std::memcpy(&x, p, 4);
    std::memcpy(&y, p + n - 4, 4);
    a = x;
    b = y;
  } else {
    a = p[0] | (static_cast<uint64_t>(p[n / 2]) << 8) | (static_cast<uint64_t>(p[n - 1]) << 16);
  }
  unsigned __int128 m = static_cast<unsigned __int128>(a ^ 0x9E3779B97F4A7C15ull ^ (n << 56)) *
                        (b ^ 0xD6E8FEB86659FD93ull);
  uint64_t h = static_cast<uint64_t>(m) ^ static_cast<uint64_t>(m >> 64);
  return h * 0xBF58476D1CE4E5B9ull ^ (h >> 31);
}

inline bool IsWordClass(uint8_t c) { return c == kAlpha || c == kDigit; }

struct StopMatcher {
  const std::vector<std::string>* words;
  uint64_t length_mask = 0;  // bit i: some stop word has i bytes (i < 64)
  explicit StopMatcher(const std::vector<std::string>& w) : words(&w) {
    for (const auto& s : w) {
      if (s.size() < 64) length_mask |= 1ull << s.size();
    }
  }
  bool Match(std::string_view t) const {
    if (t.size() >= 64 || !(length_mask >> t.size() & 1)) return false;
    for (const auto& s : *words) {
      if (s == t) return true;
    }
    return false;
  }
};

void AnalyzeLine(const uint8_t* base, LineInfo* line, const StopMatcher& stop,
                 std::vector<WordInfo>* words) {
  const uint8_t* p = base + line->begin;
  const uint8_t* end = base + line->end;
  line->word_begin = static_cast<uint32_t>(words->size());
  uint64_t cp = 0;
  uint64_t ws_words = 0, max_ws = 0, chunk_start = 0;
  bool in_chunk = false;
  while (p < end) {
    Char c = At(p, end);
    if (c.cls == kWs) {
      if (in_chunk) {
        ++ws_words;
        max_ws = std::max(max_ws, cp - chunk_start);
        in_chunk = false;
      }
      p += c.len;
      ++cp;
      continue;
    }
    if (!in_chunk) {
      in_chunk = true;
      chunk_start = cp;
    }
    const uint8_t* t = p;
    uint32_t tcp = 0;
    bool alpha = false;
    bool symbol;
    if (IsWordClass(c.cls)) {
      symbol = false;
      uint8_t prev = c.cls;
      alpha = c.cls == kAlpha;
      p += c.len;
      ++tcp;
      while (p < end) {
        Char d = At(p, end);
        if (IsWordClass(d.cls)) {
          alpha |= d.cls == kAlpha;
          prev = d.cls;
          p += d.len;
          ++tcp;
          continue;
        }
        if (d.len == 1 && p + 1 < end) {
          uint8_t next = kAscii.cls[p[1]];
          bool join = false;
          if ((d.cp == '\'' || d.cp == '-' || d.cp == '.') && IsWordClass(prev) &&
              (next == kAlpha || next == kDigit)) {
            join = true;
          } else if ((d.cp == ',' || d.cp == ':') && prev == kDigit && next == kDigit) {
            join = true;
          }
          if (join) {
            p += 2;
            tcp += 2;
            prev = next;
            alpha |= next == kAlpha;
            continue;
          }
        }
        break;
      }
    } else {
      symbol = true;
      int32_t first = c.cp;
      p += c.len;
      ++tcp;
      while (p < end) {
        Char d = At(p, end);
        if (d.cls != kPunct || d.cp != first) break;
        p += d.len;
        ++tcp;
      }
    }
    std::string_view tok(reinterpret_cast<const char*>(t), p - t);
    words->push_back(WordInfo{TokenHash(t, tok.size()), tcp, alpha, symbol, stop.Match(tok)});
    cp += tcp;
  }
  if (in_chunk) {
    ++ws_words;
    max_ws = std::max(max_ws, cp - chunk_start);
  }
  line->cp = cp;
  line->ws_words = ws_words;
  line->max_ws_word_cp = max_ws;
  line->word_end = static_cast<uint32_t>(words->size());
  line->hash = Hash64(reinterpret_cast<const char*>(base + line->begin), line->end - line->begin);
}

}  // namespace

void Analyze(std::string_view text, const std::vector<std::string>& stop_words, TextStats* st) {
  st->lines.clear();
  st->words.clear();
  st->total_cp = 0;
  st->ends_with_newline = !text.empty() && text.back() == '\n';
  StopMatcher stop(stop_words);
  const uint8_t* base = reinterpret_cast<const uint8_t*>(text.data());
  size_t pos = 0;
  uint64_t total = 0;
  while (true) {
    const void* nl = std::memchr(text.data() + pos, '\n', text.size() - pos);
    size_t e = nl ? static_cast<const char*>(nl) - text.data() : text.size();
    LineInfo line;
    line.begin = pos;
    line.end = e;
    AnalyzeLine(base, &line, stop, &st->words);
    total += line.cp;
    st->lines.push_back(line);
    if (!nl) break;
    ++total;  // the '\n'
    pos = e + 1;
  }
  st->total_cp = total;
}

}  // namespace grist::clean::internal
