#include "clean/internal/text_stats.h"

#include <utf8proc.h>

#include <algorithm>
#include <cstring>

#include "clean/internal/word_split.h"
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

// The bytes of a token of 1-8 bytes as one integer: two tokens of the same length are equal exactly
// when their keys are.
inline uint64_t ShortKey(const uint8_t* p, size_t n) {
  if (n >= 4) {
    uint32_t x, y;
    std::memcpy(&x, p, 4);
    std::memcpy(&y, p + n - 4, 4);  // overlaps x when n < 8: every byte is in one of them
    return x | static_cast<uint64_t>(y) << 32;
  }
  return p[0] | static_cast<uint64_t>(p[n / 2]) << 8 | static_cast<uint64_t>(p[n - 1]) << 16;
}

class StopMatcher {
 public:
  explicit StopMatcher(const std::vector<std::string>& w) : words_(&w) {
    for (size_t i = 0; i < w.size(); ++i) {
      const std::string& s = w[i];
      if (s.size() < 64) length_mask_ |= 1ull << s.size();
      if (s.empty() || s.size() > 8) continue;
      if (num_short_ == kMaxShort) {
        short_complete_ = false;
        continue;
      }
      short_[num_short_++] = Short{ShortKey(reinterpret_cast<const uint8_t*>(s.data()), s.size()),
                                   static_cast<uint32_t>(s.size()), static_cast<uint32_t>(i + 1)};
    }
  }
  // 1 + the index of the first stop word equal to [p, p + n), or 0.
  uint32_t Match(const uint8_t* p, size_t n) const {
    if (n >= 64 || !(length_mask_ >> n & 1)) return 0;
    if (n <= 8 && short_complete_) {  // the stop words of 1-8 bytes, in list order
      const uint64_t key = ShortKey(p, n);
      for (int i = 0; i < num_short_; ++i) {
        if (short_[i].key == key && short_[i].len == n) return short_[i].index;
      }
      return 0;
    }
    const std::string_view t(reinterpret_cast<const char*>(p), n);
    for (size_t i = 0; i < words_->size(); ++i) {
      if ((*words_)[i] == t) return static_cast<uint32_t>(i + 1);
    }
    return 0;
  }

 private:
  static constexpr int kMaxShort = 32;
  struct Short {
    uint64_t key;
    uint32_t len, index;
  };
  const std::vector<std::string>* words_;
  uint64_t length_mask_ = 0;  // bit i: some stop word has i bytes (i < 64)
  bool short_complete_ = true;  // every stop word of 1-8 bytes is in short_
  int num_short_ = 0;
  Short short_[kMaxShort];
};

// Chunks of ASCII letters only that spaCy splits anyway ("dont", "cannot", "im"), packed
// lower-case into 8 bytes: sorted, and a bit per key (by a multiplicative hash) that rules out
// almost every other chunk with one load.
struct LetterSpecialTable {
  static constexpr int kBits = 12;
  std::vector<uint64_t> keys;
  uint64_t bits[(1 << kBits) / 64] = {};
  static uint32_t Slot(uint64_t x) { return static_cast<uint32_t>(x * 0x9E3779B97F4A7C15ull >> (64 - kBits)); }
  bool Contains(uint64_t x) const {
    const uint32_t b = Slot(x);
    if (!(bits[b >> 6] >> (b & 63) & 1)) return false;
    return std::binary_search(keys.begin(), keys.end(), x);
  }
};

const LetterSpecialTable& LetterSpecials() {
  static const LetterSpecialTable* v = [] {
    auto* out = new LetterSpecialTable();
    SplitScratch s;
    std::vector<TokenSpan> toks;
    auto pack = [](std::string_view w) {
      uint64_t x = 0;
      std::memcpy(&x, w.data(), w.size());
      return x;
    };
    const char* bases[] = {"ai",    "are",    "ca",    "could", "dare",  "did",  "does", "do",
                           "had",   "has",    "have",  "is",    "may",   "might", "must", "need",
                           "ought", "sha",    "should", "was",  "were",  "wo",   "would", "i",
                           "you",   "he",     "she",   "it",    "we",    "they", "there", "that",
                           "this",  "these",  "those", "what",  "who",   "where", "when", "why",
                           "how",   "cannot", "gonna", "gotta", "yall"};
    for (const char* b : bases) {
      for (const char* suf : {"", "nt", "d", "ll", "re", "ve", "m", "s"}) {
        std::string w = std::string(b) + suf;
        if (w.size() > 8) continue;
        toks.clear();
        SplitChunk(w, &s, &toks);
        if (toks.size() > 1) out->keys.push_back(pack(w));
      }
    }
    std::sort(out->keys.begin(), out->keys.end());
    out->keys.erase(std::unique(out->keys.begin(), out->keys.end()), out->keys.end());
    for (uint64_t x : out->keys) {
      const uint32_t b = LetterSpecialTable::Slot(x);
      out->bits[b >> 6] |= 1ull << (b & 63);
    }
    return out;
  }();
  return *v;
}

// [p, p + n): ASCII letters. `specials`: LetterSpecials(), fetched once per document.
inline bool IsLetterSpecial(const LetterSpecialTable& specials, const uint8_t* p, size_t n) {
  if (n < 2 || n > 8) return false;
  uint64_t x = 0;
  if (n == 8) {
    std::memcpy(&x, p, 8);
  } else if (n >= 4) {  // two overlapping loads, the overlap shifted out
    uint32_t a, b;
    std::memcpy(&a, p, 4);
    std::memcpy(&b, p + n - 4, 4);
    x = a | static_cast<uint64_t>(b) << (8 * (n - 4));
  } else {
    for (size_t i = 0; i < n; ++i) x |= static_cast<uint64_t>(p[i]) << (8 * i);
  }
  x |= 0x2020202020202020ull >> (8 * (8 - n));  // lower case
  return specials.Contains(x);
}

// Properties of one token [p, p + n).
WordInfo TokenInfo(const uint8_t* p, size_t n, const StopMatcher& stop) {
  WordInfo w{};
  w.hash = TokenHash(p, n);
  bool symbol = true, all_p = true, alpha = false;
  uint32_t cp = 0;
  int32_t single = -1;
  const uint8_t* end = p + n;
  for (const uint8_t* q = p; q < end;) {
    int32_t c;
    size_t len = 1;
    if (*q < 0x80) {
      c = *q;
      uint8_t cls = kAscii.cls[c];
      alpha |= cls == kAlpha;
      bool punct = cls == kPunct;
      symbol &= IsDatatrovePunctuation(c);
      all_p &= punct && !(c == '$' || c == '+' || c == '<' || c == '=' || c == '>' || c == '^' ||
                          c == '`' || c == '|' || c == '~');
    } else {
      len = Decode(q, end, &c);
      auto cat = utf8proc_category(c);
      alpha |= cat >= UTF8PROC_CATEGORY_LU && cat <= UTF8PROC_CATEGORY_LO;
      symbol &= IsDatatrovePunctuation(c);
      all_p &= cat >= UTF8PROC_CATEGORY_PC && cat <= UTF8PROC_CATEGORY_PO;
    }
    if (cp == 0) single = c;
    ++cp;
    q += len;
  }
  w.cp = cp;
  w.has_alpha = alpha;
  w.symbol_only = symbol;
  w.is_punct = all_p;
  w.sentence_end = cp == 1 && IsTerminalPunctuation(single);
  w.stop = stop.Match(p, n);
  return w;
}

// TokenInfo of the one-byte token `c` (< 0x80).
inline WordInfo SingleAscii(uint8_t c, const StopMatcher& stop) {
  static const WordInfo* table = [] {
    static WordInfo t[128];
    const std::vector<std::string> none;
    const StopMatcher no_stop(none);
    for (int i = 0; i < 128; ++i) {
      const uint8_t b = static_cast<uint8_t>(i);
      t[i] = TokenInfo(&b, 1, no_stop);
    }
    return t;
  }();
  WordInfo w = table[c];
  w.stop = stop.Match(&c, 1);
  return w;
}

// Appends the words of an ASCII letter run [p, p + n) that is not a contraction, and of digits.
inline void AddLetters(const uint8_t* p, size_t n, const StopMatcher& stop,
                       std::vector<WordInfo>* words) {
  WordInfo& w = words->emplace_back();
  w.hash = TokenHash(p, n);
  w.cp = static_cast<uint32_t>(n);
  w.has_alpha = true;
  w.stop = stop.Match(p, n);
}

inline bool SpecialWhole(const uint8_t* p, size_t n) {
  return IsSpecialWhole(std::string_view(reinterpret_cast<const char*>(p), n));
}

// The length of the UTF-8 sequence that lead byte `c` starts (0 for a continuation byte).
inline int Utf8Length(uint8_t c) {
  return c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
}
inline bool AsciiLetter(uint8_t c) { return kAscii.cls[c] == kAlpha; }
inline bool AsciiDigit(uint8_t c) { return c >= '0' && c <= '9'; }
inline bool Mark(uint8_t c) { return c == ',' || c == ';' || c == ':' || c == '!' || c == '?'; }

// The less common chunk shapes that spaCy still splits by simple rules, all ASCII: a core, with an
// opening '"' or '(' before it and a closing '"' or ')' after it (each its own token). Cores:
// letters ("Obama") or letter runs joined by single hyphens ("well-known": the hyphens are
// infixes), then one of , ; : ! ? or a period after a lower-case letter; letters then "'s"
// ("Obama's"); digit runs joined by single , . or : ("1,000", "3.5", "10:30": one token), then
// "%" (a unit), then one of , ; : ! ? . Chunks whose pieces hit a special case of spaCy ("8)",
// "(co.)", "dont,") are left to SplitChunk. Returns false (nothing appended) for other chunks.
// One code point alone is one token. TextStatsTest holds this to SplitChunk.
bool AddCommonChunk(const uint8_t* t, size_t n, const StopMatcher& stop,
                    const LetterSpecialTable& specials, std::vector<WordInfo>* words) {
  if (n <= 4 && (t[0] < 0x80 ? n == 1 : n == static_cast<size_t>(Utf8Length(t[0])))) {
    words->push_back(n == 1 ? SingleAscii(t[0], stop) : TokenInfo(t, n, stop));
    return true;
  }
  size_t b = 0, e = n;
  if (t[0] == '"' || t[0] == '(') b = 1;
  if (e - b >= 2 && (t[e - 1] == '"' || t[e - 1] == ')')) --e;
  const uint8_t* c = t + b;
  const size_t m = e - b;
  if (m == 0) return false;
  if (SpecialWhole(t, n) || SpecialWhole(c, m) || (b > 0 && SpecialWhole(c, n - b)) ||
      (e < n && SpecialWhole(t, e))) {
    return false;
  }
  const size_t before = words->size();
  auto give_up = [&] {
    words->resize(before);
    return false;
  };
  if (b > 0) words->push_back(SingleAscii(t[0], stop));
  size_t j = 0;
  if (AsciiLetter(c[0])) {
    size_t pieces = 0;
    while (true) {
      const size_t start = j;
      while (j < m && AsciiLetter(c[j])) ++j;
      if (pieces++ > 0) words->push_back(SingleAscii('-', stop));
      AddLetters(c + start, j - start, stop, words);
      if (j + 1 < m && c[j] == '-' && AsciiLetter(c[j + 1])) {
        ++j;
        continue;
      }
      break;
    }
    // A lone word may be a contraction that spaCy splits ("dont"); pieces between hyphens are
    // not looked up.
    if (pieces == 1 && IsLetterSpecial(specials, c, j)) return give_up();
    const size_t rest = m - j;
    if (rest == 1 && (Mark(c[j]) || (c[j] == '.' && j >= 2 && c[j - 1] >= 'a' && c[j - 1] <= 'z'))) {
      words->push_back(SingleAscii(c[j], stop));
    } else if (rest == 2 && pieces == 1 && c[j] == '\'' && c[j + 1] == 's') {
      words->push_back(TokenInfo(c + j, 2, stop));
    } else if (rest != 0) {
      return give_up();
    }
  } else if (AsciiDigit(c[0])) {
    while (j < m && AsciiDigit(c[j])) ++j;
    while (j + 1 < m && (c[j] == ',' || c[j] == '.' || c[j] == ':') && AsciiDigit(c[j + 1])) {
      ++j;
      while (j < m && AsciiDigit(c[j])) ++j;
    }
    WordInfo& w = words->emplace_back();
    w.hash = TokenHash(c, j);
    w.cp = static_cast<uint32_t>(j);
    w.stop = stop.Match(c, j);
    if (j < m && c[j] == '%') words->push_back(SingleAscii(c[j++], stop));
    if (j + 1 == m && (Mark(c[j]) || c[j] == '.')) {
      words->push_back(SingleAscii(c[j++], stop));
    }
    if (j != m) return give_up();
  } else {
    return give_up();
  }
  if (e < n) words->push_back(SingleAscii(t[e], stop));
  return true;
}

void AnalyzeLine(const uint8_t* base, LineInfo* line, const StopMatcher& stop,
                 const LetterSpecialTable& specials,
                 std::vector<WordInfo>* words, SplitScratch* scratch,
                 std::vector<TokenSpan>* spans) {
  const uint8_t* p = base + line->begin;
  const uint8_t* end = base + line->end;
  line->word_begin = static_cast<uint32_t>(words->size());
  uint64_t cp = 0;
  uint64_t ws_words = 0, max_ws = 0;
  while (p < end) {
    Char c = At(p, end);
    if (c.cls == kWs) {
      p += c.len;
      ++cp;
      continue;
    }
    // A chunk: the run up to the next whitespace. `seen`: a bit per character class in it;
    // `before_last`: the same without its last character.
    const uint8_t* t = p;
    uint64_t chunk_cp = 0;
    uint32_t seen = 0, before_last = 0;
    while (p < end) {
      if (*p < 0x80) {
        const uint8_t cls = kAscii.cls[*p];
        if (cls == kWs) break;
        before_last = seen;
        seen |= 1u << cls;
        ++p;
        ++chunk_cp;
        continue;
      }
      Char d = At(p, end);
      if (d.cls == kWs) break;
      before_last = seen;
      seen |= 1u << kHigh;
      p += d.len;
      ++chunk_cp;
    }
    ++ws_words;
    max_ws = std::max(max_ws, chunk_cp);
    cp += chunk_cp;
    const size_t n = static_cast<size_t>(p - t);
    constexpr uint32_t kLetters = 1u << kAlpha, kDigits = 1u << kDigit;
    // Fast paths, each splitting as spaCy does (TextStatsTest holds them to SplitChunk): ASCII
    // letters ("word"); ASCII letters then one of , ; : ! ? ("word,"), or then a period after a
    // lower-case letter ("word.": spaCy splits it off unless the chunk is an abbreviation, "co.",
    // "vs."), unless the letters are a contraction ("dont"); ASCII digits ("2005"), alone or before
    // one of , ; : ! ? . (spaCy has no rule that splits or joins them).
    size_t word_len = n;
    bool letters = seen == kLetters, digits = seen == kDigits;
    if (!letters && !digits && n >= 2 && (before_last == kLetters || before_last == kDigits)) {
      const uint8_t last = t[n - 1];
      const bool mark = last == ',' || last == ';' || last == ':' || last == '!' || last == '?';
      if (before_last == kDigits) {
        if (mark || last == '.') {
          digits = true;
          word_len = n - 1;
        }
      } else if (mark) {
        word_len = n - 1;
      } else if (last == '.' && n >= 3 && t[n - 2] >= 'a' && t[n - 2] <= 'z' &&
                 !IsSpecialWhole(std::string_view(reinterpret_cast<const char*>(t), n))) {
        word_len = n - 1;
      }
    }
    if (digits || ((letters || word_len < n) && !IsLetterSpecial(specials, t, word_len))) {
      WordInfo& w = words->emplace_back();
      w.hash = TokenHash(t, word_len);
      w.cp = static_cast<uint32_t>(word_len);
      w.has_alpha = !digits;
      w.stop = stop.Match(t, word_len);
      if (word_len < n) words->push_back(SingleAscii(t[word_len], stop));
      continue;
    }
    if (AddCommonChunk(t, n, stop, specials, words)) continue;
    spans->clear();
    SplitChunk(std::string_view(reinterpret_cast<const char*>(t), n), scratch, spans);
    for (const TokenSpan& s : *spans) words->push_back(TokenInfo(t + s.begin, s.end - s.begin, stop));
  }
  line->cp = cp;
  line->ws_words = ws_words;
  line->max_ws_word_cp = max_ws;
  line->word_end = static_cast<uint32_t>(words->size());
  // spaCy's sentencizer over the line's tokens: a new sentence starts at a token that is not
  // punctuation once a sentence-ending character ("." "!" "?" ...) has been seen.
  uint32_t sentences = line->word_end > line->word_begin ? 1 : 0;
  bool seen = false;
  for (uint32_t i = line->word_begin; i < line->word_end; ++i) {
    const WordInfo& w = (*words)[i];
    if (seen && !w.is_punct && !w.sentence_end) {
      ++sentences;
      seen = false;
    } else if (w.sentence_end) {
      seen = true;
    }
  }
  line->sentences = sentences;
  line->hash = Hash64(reinterpret_cast<const char*>(base + line->begin), line->end - line->begin);
}

}  // namespace

WordInfo TokenProperties(std::string_view token, const std::vector<std::string>& stop_words) {
  return TokenInfo(reinterpret_cast<const uint8_t*>(token.data()), token.size(),
                   StopMatcher(stop_words));
}

void Analyze(std::string_view text, const std::vector<std::string>& stop_words, TextStats* st) {
  st->lines.clear();
  st->words.clear();
  st->total_cp = 0;
  st->ends_with_newline = !text.empty() && text.back() == '\n';
  StopMatcher stop(stop_words);
  const LetterSpecialTable& specials = LetterSpecials();
  const uint8_t* base = reinterpret_cast<const uint8_t*>(text.data());
  size_t pos = 0;
  uint64_t total = 0;
  while (true) {
    const void* nl = std::memchr(text.data() + pos, '\n', text.size() - pos);
    size_t e = nl ? static_cast<const char*>(nl) - text.data() : text.size();
    LineInfo line;
    line.begin = pos;
    line.end = e;
    AnalyzeLine(base, &line, stop, specials, &st->words, &st->split_scratch, &st->spans);
    total += line.cp;
    st->lines.push_back(line);
    if (!nl) break;
    ++total;  // the '\n'
    pos = e + 1;
  }
  st->total_cp = total;
}

}  // namespace grist::clean::internal
