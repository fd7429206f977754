#include "clean/internal/word_split.h"

#include <utf8proc.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace grist::clean::internal {
namespace {

constexpr int32_t kTerminal[] = {
    0x21,    0x2E,    0x3F,    0x589,   0x61D,   0x61E,   0x61F,   0x6D4,   0x700,   0x701,
    0x702,   0x7F9,   0x837,   0x839,   0x83D,   0x83E,   0x964,   0x965,   0x104A,  0x104B,
    0x1362,  0x1367,  0x1368,  0x166E,  0x1735,  0x1736,  0x17D4,  0x17D5,  0x17D6,  0x17D9,
    0x17DA,  0x1803,  0x1809,  0x1944,  0x1945,  0x1AA8,  0x1AA9,  0x1AAA,  0x1AAB,  0x1B5A,
    0x1B5B,  0x1B5E,  0x1B5F,  0x1B7D,  0x1B7E,  0x1C3B,  0x1C3C,  0x1C7E,  0x1C7F,  0x203C,
    0x203D,  0x2047,  0x2048,  0x2049,  0x2E2E,  0x2E3C,  0x2E53,  0x2E54,  0x3002,  0xA4FF,
    0xA60E,  0xA60F,  0xA6F3,  0xA6F7,  0xA876,  0xA877,  0xA8CE,  0xA8CF,  0xA92F,  0xA9C8,
    0xA9C9,  0xAA5D,  0xAA5E,  0xAA5F,  0xAAF0,  0xAAF1,  0xABEB,  0xFE52,  0xFE56,  0xFE57,
    0xFF01,  0xFF0E,  0xFF1F,  0xFF61,  0x10A56, 0x10A57, 0x10F55, 0x10F56, 0x10F57, 0x10F58,
    0x10F59, 0x10F86, 0x10F87, 0x10F88, 0x10F89, 0x11047, 0x11048, 0x110BE, 0x110BF, 0x110C0,
    0x110C1, 0x11141, 0x11142, 0x11143, 0x111C5, 0x111C6, 0x111CD, 0x111DE, 0x111DF, 0x11238,
    0x11239, 0x1123B, 0x1123C, 0x112A9, 0x1144B, 0x1144C, 0x115C2, 0x115C3, 0x115C9, 0x115CA,
    0x115CB, 0x115CC, 0x115CD, 0x115CE, 0x115CF, 0x115D0, 0x115D1, 0x115D2, 0x115D3, 0x115D4,
    0x115D5, 0x115D6, 0x115D7, 0x11641, 0x11642, 0x1173C, 0x1173D, 0x1173E, 0x11944, 0x11946,
    0x11A42, 0x11A43, 0x11A9B, 0x11A9C, 0x11C41, 0x11C42, 0x11EF7, 0x11EF8, 0x11F43, 0x11F44,
    0x16A6E, 0x16A6F, 0x16AF5, 0x16B37, 0x16B38, 0x16B44, 0x16E98, 0x1BC9F, 0x1DA88};

// datatrove's PUNCTUATION above U+00FF (those below are in kAsciiPunct / the C1 range).
constexpr int32_t kPunctHigh[] = {0x2013, 0x2014, 0x2019, 0x201C, 0x201D, 0x201E, 0x2026, 0x2236,
                                  0x2501, 0x25BA, 0x3001, 0x3008, 0x3009, 0x300A, 0x300B, 0x300C,
                                  0x300D, 0x3010, 0x3011, 0xFF05, 0xFF08, 0xFF09, 0xFF0C, 0xFF11,
                                  0xFF1A, 0xFF1B, 0xFF5E};

bool InSorted(const int32_t* b, const int32_t* e, int32_t c) { return std::binary_search(b, e, c); }

// spaCy's LIST_PUNCT, LIST_QUOTES and currency symbols (lang/char_classes.py), as code points.
constexpr int32_t kSpacyPunct[] = {'!', '#', '&', '(', ')', '*', ',', ':', ';', '<', '>', '?',
                                   '[', ']', '_', '{', '}', 0xA1, 0xB7, 0xBF, 0x60C, 0x61B,
                                   0x61F, 0x66A, 0x6D4, 0x964, 0x2026, 0x3001, 0x3002, 0xFF01,
                                   0xFF0C, 0xFF1A, 0xFF1B, 0xFF1F, 0xFF5E};
constexpr int32_t kSpacyQuote[] = {'"',    '\'',   ',',    '`',    0xAB,   0xB4,   0xBB,
                                   0x2018, 0x2019, 0x201A, 0x201C, 0x201D, 0x201E, 0x27E6,
                                   0x27E7, 0x3008, 0x3009, 0x300A, 0x300B, 0x300C, 0x300D,
                                   0x300E, 0x300F, 0x3010, 0x3011, 0x3014, 0x3015, 0xFF08,
                                   0xFF09};

// The ASCII members of a sorted set as a 128-bit mask, for a lookup without a search.
struct AsciiMask {
  uint64_t bits[2] = {0, 0};
  template <size_t N>
  constexpr explicit AsciiMask(const int32_t (&set)[N]) {
    for (int32_t c : set) {
      if (c < 0x80) bits[c >> 6] |= uint64_t{1} << (c & 63);
    }
  }
  constexpr bool Has(int32_t c) const { return bits[c >> 6] >> (c & 63) & 1; }
};
constexpr AsciiMask kSpacyPunctAscii(kSpacyPunct), kSpacyQuoteAscii(kSpacyQuote);

bool IsSpacyPunct(int32_t c) {
  if (c < 0x80) return c >= 0 && kSpacyPunctAscii.Has(c);
  return InSorted(std::begin(kSpacyPunct), std::end(kSpacyPunct), c);
}
bool IsQuote(int32_t c) {
  if (c < 0x80) return c >= 0 && kSpacyQuoteAscii.Has(c);
  return InSorted(std::begin(kSpacyQuote), std::end(kSpacyQuote), c);
}
bool IsCurrency(int32_t c) {
  return c == '$' || c == 0xA3 || c == 0xA5 || c == 0x20AC || c == 0xE3F || c == 0xFDFC ||
         (c >= 0x20A0 && c <= 0x20BF);
}
bool IsIcon(int32_t c) {
  return c >= 0xA6 && utf8proc_category(c) == UTF8PROC_CATEGORY_SO;
}
bool IsDigit(int32_t c) { return c >= '0' && c <= '9'; }
bool IsAlpha(int32_t c) {
  if (c < 0x80) return (c | 32) >= 'a' && (c | 32) <= 'z';
  switch (utf8proc_category(c)) {
    case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM: case UTF8PROC_CATEGORY_LO: case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_MC:
      return true;
    default:
      return false;
  }
}
// spaCy's ALPHA_LOWER / ALPHA_UPPER include the scripts without case.
bool IsUncased(int32_t c) {
  if (c < 0x80) return false;
  auto cat = utf8proc_category(c);
  return cat == UTF8PROC_CATEGORY_LO || cat == UTF8PROC_CATEGORY_LM ||
         cat == UTF8PROC_CATEGORY_MN || cat == UTF8PROC_CATEGORY_MC;
}
bool IsLower(int32_t c) {
  if (c < 0x80) return c >= 'a' && c <= 'z';
  return utf8proc_category(c) == UTF8PROC_CATEGORY_LL || IsUncased(c);
}
bool IsUpper(int32_t c) {
  if (c < 0x80) return c >= 'A' && c <= 'Z';
  auto cat = utf8proc_category(c);
  return cat == UTF8PROC_CATEGORY_LU || cat == UTF8PROC_CATEGORY_LT || IsUncased(c);
}
bool IsHyphen(int32_t c) { return c == '-' || c == 0x2013 || c == 0x2014 || c == '~'; }

// Abbreviations that spaCy's English exceptions keep whole with their period.
constexpr const char* kAbbrev[] = {
    "Adm.",  "Ak.",   "Ala.",  "Apr.",   "Ariz.", "Ark.",  "Aug.",  "Bros.", "Calif.", "Co.",
    "Colo.", "Conn.", "Corp.", "D.C.",   "Dec.",  "Del.",  "Dr.",   "E.G.",  "E.g.",   "Feb.",
    "Fla.",  "Ga.",   "Gen.",  "Gov.",   "I.E.",  "I.e.",  "Ia.",   "Id.",   "Ill.",   "Inc.",
    "Ind.",  "Jan.",  "Jr.",   "Jul.",   "Jun.",  "Kan.",  "Kans.", "Ky.",   "La.",    "Ltd.",
    "Mar.",  "Mass.", "Md.",   "Messrs.", "Mich.", "Minn.", "Miss.", "Mo.",  "Mont.",  "Mr.",
    "Mrs.",  "Ms.",   "Mt.",   "N.C.",   "N.D.",  "N.H.",  "N.J.",  "N.M.",  "N.Y.",   "Neb.",
    "Nebr.", "Nev.",  "Nov.",  "Oct.",   "Okla.", "Ore.",  "Pa.",   "Ph.D.", "Prof.",  "Rep.",
    "Rev.",  "S.C.",  "Sen.",  "Sep.",   "Sept.", "St.",   "Tenn.", "Va.",   "Wash.",  "Wis.",
    "a.m.",  "co.",   "e.g.",  "i.e.",   "p.m.",  "v.s.",  "vs.",   "and/or", "w/o",   "C++",
    "''",    "o'clock", "ma'am", "'em",  "'s",    "'S",    "'d",    "'ll",   "'re",
    "'m",    "'cause", "\xE2\x80\x99s", "\xE2\x80\x99S", "\xE2\x80\x99\xE2\x80\x99",
    // emoticons
    ":)", ":-)", ":))", ";)", ";-)", ":(", ":-(", ":((", "=)", "=(", ":D", ":-D", ";D", ":P", ":-P",
    ":p", ":-p", "):", "(:", ")-:", "(-:", ":]", ":-]", "[:", ":/", ":-/", "=/", "<3", "</3",
    ":'(", ":')", ":o", ":O", ":-o", ":-O", "xD", "XD", ":|", ":-|", "^_^", "o.O", "O.o", "o_O",
    "O_o", "-_-", "(=", "=]", "=[", "=|", ":3", ":>", ":x", ":X", ":*", ":-*", "8)", "8-)", "<.<",
    ">.>", ">.<", "._.", ";_;", "@_@", "0.0", "o.o", "O.O", ":0", ":1", ":-0", ":}", ":-}",
    "=D", "=3", "(;", "(^_^)", "v.v", "V.V"};

// Lower-cased (ASCII letters only) text of [b, e), with U+2019 turned into "'"; false when it
// holds other non-ASCII characters or is longer than `cap`.
bool LowerKey(const SplitScratch& s, size_t b, size_t e, size_t cap, std::string* key) {
  key->clear();
  if (e - b > cap) return false;
  for (size_t i = b; i < e; ++i) {
    int32_t c = s.cp[i];
    if (c == 0x2019) c = '\'';
    if (c >= 0x80) return false;
    key->push_back(static_cast<char>(c >= 'A' && c <= 'Z' ? c + 32 : c));
  }
  return true;
}

constexpr const char* kNtVerbs[] = {"ai",    "are",   "ca",   "could", "dare", "did",  "does",
                                    "do",    "had",   "has",  "have",  "is",   "may",  "might",
                                    "must",  "need",  "ought", "sha",  "should", "was", "were",
                                    "wo",    "would"};
constexpr const char* kPronouns[] = {"i",     "you",   "he",   "she",  "it",   "we",    "they",
                                     "there", "that",  "this", "these", "those", "what", "who",
                                     "where", "when",  "why",  "how"};
// Forms spaCy does not split when written without the apostrophe (they are words).
constexpr const char* kNoApostropheExcluded[] = {"hell", "shell", "shed", "ill", "its",
                                                 "well", "were", "whore"};
constexpr const char* kRePronouns[] = {"you", "we",  "they",  "there", "these", "those",
                                       "what", "who", "where", "when",  "why",   "how"};
constexpr const char* kSPronouns[] = {"he",  "she", "it",    "that", "there", "this",
                                      "what", "who", "where", "when", "why",   "how"};

bool InList(std::string_view w, const char* const* b, const char* const* e) {
  for (const char* const* p = b; p != e; ++p) {
    if (w == *p) return true;
  }
  return false;
}

// The split of a lower-cased contraction ("don't" -> 2, "cannot" -> 3), or 0.
size_t RuleSplit(std::string_view k) {
  // n't / nt contractions.
  for (std::string_view suf : {std::string_view("n't"), std::string_view("nt")}) {
    if (k.size() > suf.size() && k.compare(k.size() - suf.size(), suf.size(), suf) == 0) {
      std::string_view base(k.data(), k.size() - suf.size());
      if (InList(base, std::begin(kNtVerbs), std::end(kNtVerbs))) return base.size();
    }
  }
  // Pronoun contractions: 'd 'll 're 've 'm 's, with or without the apostrophe.
  for (std::string_view suf : {"'ll", "'re", "'ve", "'d", "'m", "'s", "ll", "re", "ve", "d", "m",
                               "s"}) {
    if (k.size() <= suf.size() || k.compare(k.size() - suf.size(), suf.size(), suf) != 0) continue;
    std::string_view base(k.data(), k.size() - suf.size());
    if (!InList(base, std::begin(kPronouns), std::end(kPronouns))) continue;
    bool apostrophe = suf[0] == '\'';
    std::string_view bare = apostrophe ? suf.substr(1) : suf;
    bool ok = true;
    if (bare == "m") {
      ok = base == "i";
    } else if (bare == "re") {
      ok = InList(base, std::begin(kRePronouns), std::end(kRePronouns));
    } else if (bare == "ve") {
      ok = base == "i" || InList(base, std::begin(kRePronouns), std::end(kRePronouns));
    } else if (bare == "s") {
      ok = InList(base, std::begin(kSPronouns), std::end(kSPronouns));
    }
    if (!ok) continue;
    if (!apostrophe &&
        InList(k, std::begin(kNoApostropheExcluded), std::end(kNoApostropheExcluded))) {
      continue;
    }
    return base.size();
  }
  if (k == "cannot") return 3;
  if (k == "gonna" || k == "gotta") return 3;
  if (k == "yall") return 1;
  if (k == "y'all") return 2;
  return 0;
}

// Abbreviations by byte length, and every contraction RuleSplit splits, sorted, built once.
// FNV-1a of a short key: the tables are looked up by hash, then confirmed.
uint64_t KeyHash(std::string_view v) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : v) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

struct SpecialTables {
  static constexpr size_t kMaxAbbrev = 12;
  std::vector<std::pair<uint64_t, std::string_view>> abbrev;            // sorted by hash
  std::vector<std::pair<uint64_t, std::pair<std::string, uint8_t>>> contractions;  // by hash
  // Bit (hash & kBitMask) set for each key of the table: most chunks are no key, and one bit test
  // (in L1) rules them out before the binary search.
  static constexpr uint64_t kBitMask = (1u << 13) - 1;
  uint64_t abbrev_bits[(kBitMask + 1) / 64] = {};
  uint64_t contraction_bits[(kBitMask + 1) / 64] = {};
  static bool Test(const uint64_t* bits, uint64_t h) {
    return (bits[(h & kBitMask) >> 6] >> (h & 63)) & 1;
  }
  static void Set(uint64_t* bits, uint64_t h) { bits[(h & kBitMask) >> 6] |= 1ull << (h & 63); }
};

const SpecialTables& Tables() {
  static const SpecialTables* t = [] {
    auto* out = new SpecialTables();
    for (const char* a : kAbbrev) {
      std::string_view v(a);
      if (v.size() <= SpecialTables::kMaxAbbrev) out->abbrev.emplace_back(KeyHash(v), v);
    }
    std::vector<std::string_view> bases(std::begin(kNtVerbs), std::end(kNtVerbs));
    bases.insert(bases.end(), std::begin(kPronouns), std::end(kPronouns));
    for (const char* x : {"can", "gon", "got", "y"}) bases.push_back(x);
    for (std::string_view base : bases) {
      for (const char* suf : {"n't", "nt", "'ll", "'re", "'ve", "'d", "'m", "'s", "ll", "re", "ve",
                              "d", "m", "s", "not", "na", "ta", "all", "'all"}) {
        std::string k = std::string(base) + suf;
        size_t at = RuleSplit(k);
        if (at > 0) {
          out->contractions.emplace_back(KeyHash(k), std::make_pair(k, static_cast<uint8_t>(at)));
        }
      }
    }
    std::sort(out->abbrev.begin(), out->abbrev.end());
    std::sort(out->contractions.begin(), out->contractions.end());
    out->contractions.erase(std::unique(out->contractions.begin(), out->contractions.end()),
                            out->contractions.end());
    for (const auto& a : out->abbrev) SpecialTables::Set(out->abbrev_bits, a.first);
    for (const auto& c : out->contractions) SpecialTables::Set(out->contraction_bits, c.first);
    return out;
  }();
  return *t;
}

// A special case of [b, e): 0 = none; else the number of code points of the first piece (the
// rest is the second piece), or the whole length when it is kept as one token.
size_t Special(const SplitScratch& s, std::string_view text, size_t b, size_t e, std::string* key) {
  const size_t n = e - b;
  const SpecialTables& t = Tables();
  const size_t bytes = s.off[e] - s.off[b];
  if (bytes <= SpecialTables::kMaxAbbrev) {
    std::string_view v(text.data() + s.off[b], bytes);
    const uint64_t h = KeyHash(v);
    if (SpecialTables::Test(t.abbrev_bits, h)) {
      auto it = std::lower_bound(t.abbrev.begin(), t.abbrev.end(), h,
                                 [](const auto& x, uint64_t y) { return x.first < y; });
      for (; it != t.abbrev.end() && it->first == h; ++it) {
        if (it->second == v) return n;
      }
    }
  }
  if (n == 2 && s.cp[b + 1] == '.' && IsLower(s.cp[b]) && s.cp[b] < 0x100) return n;  // "a."
  // spaCy's exceptions are written in lower case and capitalized ("Don't"), not in capitals.
  for (size_t i = b + 1; i < e; ++i) {
    if (s.cp[i] >= 'A' && s.cp[i] <= 'Z') return 0;
  }
  if (!LowerKey(s, b, e, 12, key)) return 0;
  const std::string& k = *key;
  const uint64_t h = KeyHash(k);
  if (SpecialTables::Test(t.contraction_bits, h)) {
    auto it = std::lower_bound(t.contractions.begin(), t.contractions.end(), h,
                               [](const auto& x, uint64_t y) { return x.first < y; });
    for (; it != t.contractions.end() && it->first == h; ++it) {
      if (it->second.first == k) return it->second.second;
    }
  }
  // 1-12 followed by am / pm / a.m. / p.m.
  size_t d = 0;
  while (d < k.size() && IsDigit(k[d])) ++d;
  if (d == 1 || d == 2) {
    int v = d == 1 ? k[0] - '0' : (k[0] - '0') * 10 + (k[1] - '0');
    std::string_view rest(k.data() + d, k.size() - d);
    if (v >= 1 && v <= 12 && (rest == "am" || rest == "pm" || rest == "a.m." || rest == "p.m.")) {
      return d;
    }
  }
  return 0;
}


size_t PrefixLen(const SplitScratch& s, size_t b, size_t e) {
  int32_t c = s.cp[b];
  if (c == '.') {
    if (b + 1 < e && s.cp[b + 1] == '.') {
      size_t j = b + 1;
      while (j < e && s.cp[j] == '.') ++j;
      return j - b;
    }
    return 0;
  }
  if (c == 0xA7 || c == '%' || c == '=' || c == 0x2014 || c == 0x2013) return 1;
  // the currencies "US$" "C$" "A$"
  if (c == 'U' && b + 2 < e && s.cp[b + 1] == 'S' && s.cp[b + 2] == '$') return 3;
  if ((c == 'C' || c == 'A') && b + 1 < e && s.cp[b + 1] == '$') return 2;
  if (c == '+') return b + 1 < e && IsDigit(s.cp[b + 1]) ? 0 : 1;
  if (IsSpacyPunct(c) || IsQuote(c) || IsCurrency(c) || IsIcon(c)) return 1;
  return 0;
}

constexpr std::string_view kUnits[] = {
    "km", "m", "dm", "cm", "mm", "ha", "nm", "yd", "in", "ft", "kg", "g", "mg", "t", "lb", "oz",
    "m/s", "km/h", "kmh", "mph", "hPa", "Pa", "mbar", "mb", "MB", "kb", "KB", "gb", "GB", "tb",
    "TB", "T", "G", "M", "K", "%", "km\xC2\xB2", "m\xC2\xB2", "m\xC2\xB3", "cm\xC2\xB2",
    "\xC2\xB5m", "\xC2\xB5g"};

size_t SuffixLen(const SplitScratch& s, std::string_view text, size_t b, size_t e) {
  const size_t n = e - b;
  int32_t c = s.cp[e - 1];
  size_t best = 0;
  if (c == '.' && n >= 2 && s.cp[e - 2] == '.') {
    size_t j = e - 1;
    while (j > b && s.cp[j - 1] == '.') --j;
    return e - j;
  }
  if (IsSpacyPunct(c) || IsQuote(c) || IsIcon(c) || c == 0x2014 || c == 0x2013) best = 1;
  if (n >= 2 && (c == 's' || c == 'S') && (s.cp[e - 2] == '\'' || s.cp[e - 2] == 0x2019)) best = 2;
  if (n >= 2) {
    int32_t p = s.cp[e - 2];
    if (c == '+' && IsDigit(p)) best = std::max<size_t>(best, 1);
    if (IsCurrency(c) && IsDigit(p)) best = std::max<size_t>(best, 1);
    if (c == '.') {
      if (IsDigit(p) || IsLower(p) || p == '%' || p == 0xB2 || p == '-' || p == '+' ||
          IsSpacyPunct(p) || IsQuote(p)) {
        best = std::max<size_t>(best, 1);
      } else if (n >= 3 && IsUpper(p) && IsUpper(s.cp[e - 3])) {
        best = std::max<size_t>(best, 1);
      } else if (n >= 3 && s.cp[e - 3] == 0xB0 &&
                 (p == 'F' || p == 'f' || p == 'C' || p == 'c' || p == 'K' || p == 'k')) {
        best = std::max<size_t>(best, 1);
      }
    }
  }
  // A unit after a digit (units are at most 4 code points: look for the digit first).
  bool digit_near = false;
  for (size_t j = e; j > b && e - j < 6 && !digit_near; --j) digit_near = IsDigit(s.cp[j - 1]);
  if (!digit_near) return best;
  const uint32_t end_byte = s.off[e];
  for (std::string_view u : kUnits) {
    const size_t ub = u.size();
    if (ub >= end_byte - s.off[b]) continue;
    if (std::memcmp(text.data() + end_byte - ub, u.data(), ub) != 0) continue;
    // the code point before the unit must be a digit and begin right before it
    size_t j = e;
    while (j > b && s.off[j] > end_byte - ub) --j;
    if (s.off[j] != end_byte - ub || j == b || !IsDigit(s.cp[j - 1])) continue;
    best = std::max(best, e - j);
  }
  return best;
}

bool IsHostChar(int32_t c) { return IsDigit(c) || IsAlpha(c) || c >= 0xA1; }

// spaCy's URL_MATCH, simplified: [scheme://][userinfo@]host[:port][/?#path], the host being dot
// separated labels ending in a lower-case top-level label of two or more letters.
bool IsUrl(const SplitScratch& s, size_t b, size_t e) {
  size_t i = b;
  // scheme
  for (size_t j = b; j + 2 < e; ++j) {
    int32_t c = s.cp[j];
    if (c == ':' && s.cp[j + 1] == '/' && s.cp[j + 2] == '/') {
      if (j - b >= 2) i = j + 3;
      break;
    }
    if (!(IsDigit(c) || IsAlpha(c) || c == '+' || c == '-' || c == '.' || c == '_')) break;
  }
  // host ends at the first / ? # (or : followed by a port)
  size_t host_end = i;
  while (host_end < e && s.cp[host_end] != '/' && s.cp[host_end] != '?' && s.cp[host_end] != '#') {
    ++host_end;
  }
  // userinfo: up to the last '@' before host_end
  for (size_t j = host_end; j > i; --j) {
    if (s.cp[j - 1] == '@') {
      i = j;
      break;
    }
  }
  size_t port = host_end;
  for (size_t j = i; j < host_end; ++j) {
    if (s.cp[j] == ':') {
      port = j;
      break;
    }
  }
  if (port != host_end) {
    size_t digits = host_end - port - 1;
    if (digits < 2 || digits > 5) return false;
    for (size_t j = port + 1; j < host_end; ++j) {
      if (!IsDigit(s.cp[j])) return false;
    }
  }
  // host: labels separated by '.', at least two, the last lower-case letters only (>= 2)
  size_t labels = 0, label_start = i;
  bool last_ok = false;
  for (size_t j = i; j <= port; ++j) {
    if (j == port || s.cp[j] == '.') {
      if (j == label_start) return false;
      if (!IsHostChar(s.cp[label_start]) || !IsHostChar(s.cp[j - 1])) return false;
      ++labels;
      last_ok = j - label_start >= 2;
      for (size_t k = label_start; k < j && last_ok; ++k) {
        int32_t c = s.cp[k];
        last_ok = (c >= 'a' && c <= 'z') || c >= 0xA1;
      }
      label_start = j + 1;
      continue;
    }
    int32_t c = s.cp[j];
    if (!(IsHostChar(c) || c == '-' || c == '_')) return false;
  }
  return labels >= 2 && last_ok;
}

// Length of the infix at i (0: none).
size_t InfixAt(const SplitScratch& s, size_t b, size_t e, size_t i) {
  int32_t c = s.cp[i];
  if (c == '.' && i + 1 < e && s.cp[i + 1] == '.') {
    size_t j = i;
    while (j < e && s.cp[j] == '.') ++j;
    return j - i;
  }
  if (c == 0x2026 || IsIcon(c)) return 1;
  if (i == b || i + 1 >= e) return 0;
  int32_t p = s.cp[i - 1], q = s.cp[i + 1];
  if ((c == '+' || c == '-' || c == '*' || c == '^') && IsDigit(p) && (IsDigit(q) || q == '-')) {
    return 1;
  }
  if (c == '.' && (IsLower(p) || IsQuote(p)) && (IsUpper(q) || IsQuote(q))) return 1;
  if (c == ',' && IsAlpha(p) && IsAlpha(q)) return 1;
  if (IsHyphen(c) && (IsAlpha(p) || IsDigit(p))) {
    // alternatives in spaCy's order: - – — -- --- —— ~ ; the first followed by a letter wins
    if (IsAlpha(q)) return 1;
    if (c == '-' && q == '-') {
      if (i + 2 < e && IsAlpha(s.cp[i + 2])) return 2;
      if (i + 3 < e && s.cp[i + 2] == '-' && IsAlpha(s.cp[i + 3])) return 3;
    }
    if (c == 0x2014 && q == 0x2014 && i + 2 < e && IsAlpha(s.cp[i + 2])) return 2;
    return 0;
  }
  if ((c == ':' || c == '<' || c == '>' || c == '=' || c == '/') && (IsAlpha(p) || IsDigit(p)) &&
      IsAlpha(q)) {
    return 1;
  }
  return 0;
}

void Emit(const SplitScratch& s, size_t b, size_t e, std::vector<TokenSpan>* out) {
  out->push_back(TokenSpan{s.off[b], s.off[e]});
}

void Decode(std::string_view chunk, SplitScratch* s) {
  s->cp.clear();
  s->off.clear();
  const uint8_t* p = reinterpret_cast<const uint8_t*>(chunk.data());
  size_t i = 0;
  while (i < chunk.size()) {
    utf8proc_int32_t c;
    utf8proc_ssize_t n = p[i] < 0x80 ? 1 : utf8proc_iterate(p + i, chunk.size() - i, &c);
    if (p[i] < 0x80) c = p[i];
    if (n <= 0) {
      c = 0xFFFD;
      n = 1;
    }
    s->cp.push_back(c);
    s->off.push_back(static_cast<uint32_t>(i));
    i += static_cast<size_t>(n);
  }
  s->off.push_back(static_cast<uint32_t>(chunk.size()));
}

}  // namespace

bool IsSpecialWhole(std::string_view v) {
  if (v.size() > SpecialTables::kMaxAbbrev) return false;
  const SpecialTables& t = Tables();
  const uint64_t h = KeyHash(v);
  if (!SpecialTables::Test(t.abbrev_bits, h)) return false;
  auto it = std::lower_bound(t.abbrev.begin(), t.abbrev.end(), h,
                             [](const auto& x, uint64_t y) { return x.first < y; });
  for (; it != t.abbrev.end() && it->first == h; ++it) {
    if (it->second == v) return true;
  }
  return false;
}

bool IsTerminalPunctuation(int32_t cp) {
  if (cp < 0x80) return cp == '.' || cp == '!' || cp == '?';
  return InSorted(std::begin(kTerminal), std::end(kTerminal), cp);
}

bool IsDatatrovePunctuation(int32_t cp) {
  if (cp < 0x80) {
    if (cp < 0x20) return cp != '\t' && cp != '\n';  // datatrove's control-character ranges
    if (cp == 0x7F) return true;
    return (cp >= 0x21 && cp <= 0x2F) || (cp >= 0x3A && cp <= 0x40) || (cp >= 0x5B && cp <= 0x60) ||
           (cp >= 0x7B && cp <= 0x7E);
  }
  if (cp <= 0x9F) return true;
  if (cp == 0xAB || cp == 0xB4 || cp == 0xBB) return true;
  return InSorted(std::begin(kPunctHigh), std::end(kPunctHigh), cp) || IsTerminalPunctuation(cp);
}

void SplitChunk(std::string_view chunk, SplitScratch* s, std::vector<TokenSpan>* out) {
  if (chunk.empty()) return;
  Decode(chunk, s);
  std::string key;
  size_t b = 0, e = s->cp.size();
  s->suffixes.clear();
  size_t special = 0;
  size_t last = static_cast<size_t>(-1);
  while (b < e && e - b != last) {
    special = Special(*s, chunk, b, e, &key);
    if (special) break;
    last = e - b;
    size_t pl = PrefixLen(*s, b, e);
    if (pl && b + pl < e) {
      size_t sp = Special(*s, chunk, b + pl, e, &key);
      if (sp) {
        Emit(*s, b, b + pl, out);
        b += pl;
        special = sp;
        break;
      }
    }
    size_t sl = b + pl < e ? SuffixLen(*s, chunk, b + pl, e) : 0;
    if (sl && e - sl > b) {
      size_t sp = Special(*s, chunk, b, e - sl, &key);
      if (sp) {
        s->suffixes.push_back(TokenSpan{s->off[e - sl], s->off[e]});
        e -= sl;
        special = sp;
        break;
      }
    }
    if (pl && sl && pl + sl <= e - b) {
      Emit(*s, b, b + pl, out);
      s->suffixes.push_back(TokenSpan{s->off[e - sl], s->off[e]});
      b += pl;
      e -= sl;
    } else if (pl) {
      Emit(*s, b, b + pl, out);
      b += pl;
    } else if (sl) {
      s->suffixes.push_back(TokenSpan{s->off[e - sl], s->off[e]});
      e -= sl;
    }
  }
  if (b < e) {
    if (special) {
      Emit(*s, b, b + special, out);
      if (b + special < e) Emit(*s, b + special, e, out);
    } else if (IsUrl(*s, b, e)) {
      Emit(*s, b, e, out);
    } else {
      size_t start = b;
      size_t i = b;
      while (i < e) {
        size_t m = InfixAt(*s, b, e, i);
        if (m == 0) {
          ++i;
          continue;
        }
        if (i > start) Emit(*s, start, i, out);
        Emit(*s, i, i + m, out);
        i += m;
        start = i;
      }
      if (start < e) Emit(*s, start, e, out);
    }
  }
  for (size_t k = s->suffixes.size(); k > 0; --k) out->push_back(s->suffixes[k - 1]);
}

}  // namespace grist::clean::internal
