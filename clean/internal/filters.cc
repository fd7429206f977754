#include "clean/internal/filters.h"

#include <utf8proc.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <algorithm>
#include <cstring>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "common/hash.h"

namespace grist::clean::internal {

// The first occurrence of `pat` in `hay` at or after `from`. One byte: memchr. Longer: 16
// candidate positions at a time whose first and last bytes both match (SSE2), each candidate then
// compared in full; glibc's memmem for these short phrases walks a shift table byte by byte and
// was 7% of a clean.
size_t FindPhrase(std::string_view hay, std::string_view pat, size_t from) {
  constexpr size_t npos = std::string_view::npos;
  const size_t m = pat.size();
  if (from > hay.size() || m > hay.size() - from) return npos;
  if (m == 0) return from;
  const char* base = hay.data();
  if (m == 1) {
    const void* p = std::memchr(base + from, pat[0], hay.size() - from);
    return p ? static_cast<const char*>(p) - base : npos;
  }
  const size_t stop = hay.size() - m + 1;  // candidates are the positions before stop
  size_t i = from;
#if defined(__SSE2__)
  const __m128i first = _mm_set1_epi8(pat[0]), last = _mm_set1_epi8(pat[m - 1]);
  for (; i + 16 <= stop; i += 16) {  // the last load ends at i + 15 + m - 1 < hay.size()
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(base + i));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(base + i + m - 1));
    unsigned mask = static_cast<unsigned>(
        _mm_movemask_epi8(_mm_and_si128(_mm_cmpeq_epi8(a, first), _mm_cmpeq_epi8(b, last))));
    while (mask != 0) {
      const size_t at = i + static_cast<size_t>(__builtin_ctz(mask));
      if (std::memcmp(base + at + 1, pat.data() + 1, m - 2) == 0) return at;
      mask &= mask - 1;
    }
  }
#endif
  for (; i < stop; ++i) {
    if (base[i] == pat[0] && base[i + m - 1] == pat[m - 1] &&
        std::memcmp(base + i + 1, pat.data() + 1, m - 2) == 0) {
      return i;
    }
  }
  return npos;
}

namespace {

inline bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

inline std::string_view StripAscii(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && (s[b] == ' ' || s[b] == '\t' || s[b] == '\n')) ++b;
  while (e > b && (s[e - 1] == ' ' || s[e - 1] == '\t' || s[e - 1] == '\n')) --e;
  return s.substr(b, e - b);
}

// The first "\n\n" in hay at or after `from`: memchr for the newline (a few per paragraph),
// glibc's two-byte memmem being a byte-by-byte loop.
inline size_t FindBlankLine(std::string_view hay, size_t from) {
  const char* p = hay.data() + std::min(from, hay.size());
  const char* end = hay.data() + hay.size();
  while (p < end) {
    const char* nl = static_cast<const char*>(std::memchr(p, '\n', static_cast<size_t>(end - p)));
    if (nl == nullptr || nl + 1 >= end) break;
    if (nl[1] == '\n') return static_cast<size_t>(nl - hay.data());
    p = nl + 2;  // nl[1] is no newline: no "\n\n" starts there
  }
  return std::string_view::npos;
}

size_t CountSubstr(std::string_view s, std::string_view pat) {
  size_t n = 0, pos = 0;
  while ((pos = FindPhrase(s, pat, pos)) != std::string_view::npos) {
    ++n;
    pos += pat.size();
  }
  return n;
}


// Number of duplicates and their code points among `keys` (hash, cp length) in order.
std::pair<uint64_t, uint64_t> FindDuplicates(CountTable* table,
                                             const std::vector<std::pair<uint64_t, uint64_t>>& keys) {
  table->Reset(keys.size());
  uint64_t dups = 0, dup_chars = 0;
  for (size_t i = 0; i < keys.size(); ++i) {
    auto* s = table->Find(keys[i].first, static_cast<uint32_t>(i));
    if (s->count() > 0) {
      ++dups;
      dup_chars += keys[i].second;
    }
    s->Increment();
  }
  return {dups, dup_chars};
}

// C4 line flags.
enum : uint8_t {
  kHasLorem = 1,
  kHasJavascript = 2,
  kHasCurly = 4,
  kHasPolicy = 8,
  kHasBracket = 16,
};

// Removes "[digits]", "[edit]" and "[citation needed]" (datatrove's CITATION_REGEX).
bool RemoveCitations(std::string_view line, std::string* out) {
  out->clear();
  bool changed = false;
  size_t i = 0;
  while (i < line.size()) {
    size_t b = line.find('[', i);
    if (b == std::string_view::npos) break;
    out->append(line.substr(i, b - i));
    size_t j = b + 1;
    while (j < line.size() && line[j] >= '0' && line[j] <= '9') ++j;
    size_t match = 0;
    if (j < line.size() && line[j] == ']') {
      match = j + 1 - b;
    } else if (line.substr(b, 6) == "[edit]") {
      match = 6;
    } else if (line.substr(b, 17) == "[citation needed]") {
      match = 17;
    }
    if (match > 0) {
      changed = true;
      i = b + match;
    } else {
      out->push_back('[');
      i = b + 1;
    }
  }
  out->append(line.substr(i));
  return changed;
}

// C4's END_PUNCTUATION: . ? ! " '
bool C4End(std::string_view s) {
  return !s.empty() && (s.back() == '.' || s.back() == '\'' || s.back() == '"' ||
                        s.back() == '!' || s.back() == '?');
}
// FineWeb's stop_chars: datatrove's TERMINAL_PUNCTUATION (quotes are not among them).
bool StopEnd(std::string_view s) {
  if (s.empty()) return false;
  size_t i = s.size() - 1;
  while (i > 0 && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) --i;
  int32_t cp;
  utf8proc_iterate(reinterpret_cast<const uint8_t*>(s.data()) + i,
                   static_cast<utf8proc_ssize_t>(s.size() - i), &cp);
  return IsTerminalPunctuation(cp);
}

}  // namespace

void CountTable::Reset(size_t n) {
  size_t want = 16;
  while (want < 2 * n) want <<= 1;
  if (slots_.size() < want) {
    slots_.assign(want, Slot{0, 0, 0});
    gen_ = 0;
    used_ = 0;
  }
  mask_ = want - 1;
  if (++gen_ == 256) {  // only the slots used since the last clear can hold a stamp
    std::fill(slots_.begin(), slots_.begin() + static_cast<ptrdiff_t>(used_), Slot{0, 0, 0});
    gen_ = 1;
    used_ = 0;
  }
  used_ = std::max(used_, want);
}

namespace {

// The n-gram rules of Gopher repetition over st.words, as datatrove defines them: for n = 2..4 the
// most frequent n-gram (ties: the first seen), for n = 5..10 the characters of duplicated n-grams
// found left to right, skipping past each duplicate. N-grams are identified by a polynomial hash of
// their words' hashes, one table operation per n-gram looked at.
//
// Only repeated n-grams matter, and an (n+1)-gram can repeat only where the n-grams at i and i + 1
// both repeat. So level 2 counts every 2-gram, and each level n + 1 counts only the positions whose
// n-grams at i and i + 1 repeat (in news text a few percent): the others occur once, which is all
// the rules need to know of them. The decisions are those of counting every n-gram at every level
// (FiltersTest.GopherNGramsMatchTheDirectCount checks this on crafted repetitive text).
const char* GopherNGrams(const GopherRepetitionOptions& o, const TextStats& st, double len,
                         FilterScratch* sc) {
  const std::vector<WordInfo>& w = st.words;
  const size_t nw = w.size();
  int max_n = 0;  // the largest n with a rule on
  for (int n = 2; n <= 4; ++n) {
    if (o.top_n_gram[n - 2] > 0) max_n = n;
  }
  for (int n = 5; n <= 10; ++n) {
    if (o.dup_n_gram[n - 5] > 0) max_n = n;
  }
  if (max_n < 2 || nw < 2) return nullptr;
  CountTable* table = &sc->table;
  // gram[i]: the hash of the n-gram at i, for i a position of level n (then the sum over k < n of
  // w[i + k].hash * kP^(n - 1 - k), built one word per level).
  std::vector<uint64_t>& gram = sc->grams;
  std::vector<uint32_t>& cand = sc->candidates;  // the positions of level n > 2
  // level[i]: the largest n such that the n-gram at i occurs more than once (0: none so far).
  std::vector<uint8_t>& level = sc->levels;
  constexpr uint64_t kP = 0x100000001B3ull * 2 + 1;
  gram.resize(nw);
  level.assign(nw + 1, 0);
  static const char* kTop[] = {"top_2_gram", "top_3_gram", "top_4_gram"};
  static const char* kDup[] = {"duplicated_5_n_grams", "duplicated_6_n_grams",
                               "duplicated_7_n_grams", "duplicated_8_n_grams",
                               "duplicated_9_n_grams", "duplicated_10_n_grams"};
  for (int n = 2; n <= max_n; ++n) {
    // The positions of level n: every one for n = 2; else those where both (n-1)-grams, at i and
    // i + 1, repeat, and an n-gram fits.
    if (n == 3) {
      cand.resize(nw);
      size_t out = 0;
      for (size_t i = 0; i + 3 <= nw; ++i) {
        cand[out] = static_cast<uint32_t>(i);
        out += (level[i] & level[i + 1]) >= 2;  // both are 0 or 2 here
      }
      cand.resize(out);
    } else if (n > 3) {
      size_t out = 0;
      for (uint32_t i : cand) {
        cand[out] = i;
        out += i + static_cast<size_t>(n) <= nw && level[i] >= n - 1 && level[i + 1] >= n - 1;
      }
      cand.resize(out);
    }
    // Count their n-grams; a position whose n-gram is seen again, and the n-gram's first position,
    // are of level n.
    uint32_t best_count = 1, best_first = 0;  // every n-gram once: the first one
    auto count = [&](uint32_t i) {
      CountTable::Slot* s = table->Find(gram[i], i);
      s->Increment();
      const uint32_t c = s->count();
      if (c > 1) {
        level[i] = static_cast<uint8_t>(n);
        level[s->first] = static_cast<uint8_t>(n);
        if (c > best_count || (c == best_count && s->first < best_first)) {
          best_count = c;
          best_first = s->first;
        }
      }
    };
    if (n == 2) {
      table->Reset(nw - 1);
      for (size_t i = 0; i + 1 < nw; ++i) {
        gram[i] = w[i].hash * kP + w[i + 1].hash;
        count(static_cast<uint32_t>(i));
      }
    } else {
      for (uint32_t i : cand) gram[i] = gram[i] * kP + w[i + n - 1].hash;
      table->Reset(cand.size());
      for (uint32_t i : cand) count(i);
    }
    const bool any = best_count > 1;
    if (n <= 4) {
      const double frac = o.top_n_gram[n - 2];
      if (frac > 0 && nw >= static_cast<size_t>(n)) {
        uint64_t best_len = n - 1;  // joined with " "
        for (int k = 0; k < n; ++k) best_len += w[best_first + k].cp;
        if (static_cast<double>(best_len * best_count) / len > frac) return kTop[n - 2];
      }
    } else {
      const double frac = o.dup_n_gram[n - 5];
      if (frac > 0 && nw >= static_cast<size_t>(n) && any) {
        // Left to right: a position whose n-gram occurs once is neither found nor ever looked
        // up again, so only the repeated ones touch the table.
        table->Reset(cand.size());
        uint64_t repeated = 0;
        size_t idx = 0;
        for (uint32_t i : cand) {
          if (i < idx || level[i] < n) continue;
          auto* s = table->Find(gram[i], i);
          if (s->count() > 0) {
            for (int k = 0; k < n; ++k) repeated += w[i + k].cp;  // joined with "" as datatrove
            idx = i + static_cast<size_t>(n);
          } else {
            s->Increment();
          }
        }
        if (static_cast<double>(repeated) / len > frac) return kDup[n - 5];
      }
    }
    // No repeated n-gram: none of any larger n either (the top rules up to 4 still apply).
    if (!any && n >= 4) break;
  }
  return nullptr;
}

}  // namespace

const char* GopherRepetition(const GopherRepetitionOptions& o, std::string_view text,
                             const TextStats& st, FilterScratch* sc) {
  CountTable* table = &sc->table;
  std::vector<std::pair<uint64_t, uint64_t>>* key_buf = &sc->keys;
  double len = static_cast<double>(st.total_cp);
  if (len == 0) return nullptr;
  std::vector<std::pair<uint64_t, uint64_t>>& keys = *key_buf;
  keys.clear();
  // Paragraphs: re.split(r"\n{2,}", text.strip()).
  {
    // keys: (hash, begin << 32 | length) of each paragraph in s; a paragraph's code points are
    // counted only when it is a duplicate, and one paragraph alone has none: no hash needed.
    std::string_view s = StripAscii(text);
    size_t pos = 0;
    const bool one = FindBlankLine(s, 0) == std::string_view::npos;
    while (!one) {
      size_t brk = FindBlankLine(s, pos);
      std::string_view para = s.substr(pos, brk == std::string_view::npos ? s.npos : brk - pos);
      keys.emplace_back(Hash64(para), static_cast<uint64_t>(pos) << 32 | para.size());
      if (brk == std::string_view::npos) break;
      pos = brk;
      while (pos < s.size() && s[pos] == '\n') ++pos;
    }
    uint64_t dups = 0, dup_chars = 0;
    if (!one && s.size() < (uint64_t{1} << 32)) {
      table->Reset(keys.size());
      for (size_t i = 0; i < keys.size(); ++i) {
        auto* slot = table->Find(keys[i].first, static_cast<uint32_t>(i));
        if (slot->count() > 0) {
          ++dups;
          dup_chars += CodePoints(s.substr(keys[i].second >> 32, keys[i].second & 0xFFFFFFFFu));
        }
        slot->Increment();
      }
    } else if (!one) {  // 4 GB and more: hash and count as they come
      std::vector<std::pair<uint64_t, uint64_t>> big;
      pos = 0;
      while (true) {
        size_t brk = FindBlankLine(s, pos);
        std::string_view para = s.substr(pos, brk == std::string_view::npos ? s.npos : brk - pos);
        big.emplace_back(Hash64(para), CodePoints(para));
        if (brk == std::string_view::npos) break;
        pos = brk;
        while (pos < s.size() && s[pos] == '\n') ++pos;
      }
      std::tie(dups, dup_chars) = FindDuplicates(table, big);
    }
    const size_t paragraphs = one ? 1 : keys.size();
    if (o.dup_para_frac > 0 && static_cast<double>(dups) / paragraphs > o.dup_para_frac) {
      return "dup_para_frac";
    }
    if (o.dup_para_char_frac > 0 && dup_chars / len > o.dup_para_char_frac) {
      return "dup_para_char_frac";
    }
  }
  // Lines: re.split("\n+", text): empty lines dropped except a first or last one.
  {
    keys.clear();
    for (size_t i = 0; i < st.lines.size(); ++i) {
      const LineInfo& l = st.lines[i];
      bool edge = i == 0 || i + 1 == st.lines.size();
      if (l.end == l.begin && !edge) continue;
      keys.emplace_back(l.hash, l.cp);
    }
    auto [dups, dup_chars] = FindDuplicates(table, keys);
    if (o.dup_line_frac > 0 && static_cast<double>(dups) / keys.size() > o.dup_line_frac) {
      return "dup_line_frac";
    }
    if (o.dup_line_char_frac > 0 && dup_chars / len > o.dup_line_char_frac) {
      return "dup_line_char_frac";
    }
  }
  return GopherNGrams(o, st, len, sc);
}

const char* GopherQuality(const GopherQualityOptions& o, std::string_view text,
                          const TextStats& st) {
  const auto& w = st.words;
  uint64_t n_words = w.size();
  uint64_t n_non_symbol = 0, non_symbol_cp = 0, n_alpha = 0, n_stop = 0;
  // datatrove counts the distinct stop words present (a set intersection), not their occurrences.
  uint64_t seen_mask = 0;
  std::vector<bool> seen_more;
  for (const WordInfo& x : w) {  // without branches: a stop word is a coin toss
    n_non_symbol += !x.symbol_only;
    non_symbol_cp += x.symbol_only ? 0 : x.cp;
    n_alpha += x.has_alpha;
    const uint32_t i = x.stop - 1;  // UINT32_MAX for none
    seen_mask |= i < 64 ? uint64_t{1} << i : 0;
    if (i != UINT32_MAX && i >= 64) [[unlikely]] {
      if (seen_more.size() <= i - 64) seen_more.resize(i - 63);
      if (!seen_more[i - 64]) {
        seen_more[i - 64] = true;
        ++n_stop;
      }
    }
  }
  n_stop += static_cast<uint64_t>(__builtin_popcountll(seen_mask));
  if (o.min_doc_words > 0 && n_non_symbol < static_cast<uint64_t>(o.min_doc_words)) {
    return "gopher_short_doc";
  }
  if (o.max_doc_words > 0 && n_non_symbol > static_cast<uint64_t>(o.max_doc_words)) {
    return "gopher_long_doc";
  }
  if (n_non_symbol > 0) {
    double avg = static_cast<double>(non_symbol_cp) / n_non_symbol;
    if (o.min_avg_word_length > 0 && avg < o.min_avg_word_length) return "gopher_below_avg_threshold";
    if (o.max_avg_word_length > 0 && avg > o.max_avg_word_length) return "gopher_above_avg_threshold";
  }
  if (n_words > 0 && o.max_symbol_word_ratio > 0) {
    double nwd = static_cast<double>(n_words);
    if (CountSubstr(text, "#") / nwd > o.max_symbol_word_ratio) return "gopher_too_many_hashes";
    size_t ell = CountSubstr(text, "...") + CountSubstr(text, "\xE2\x80\xA6");
    if (ell / nwd > o.max_symbol_word_ratio) return "gopher_too_many_ellipsis";
  }
  // text.splitlines(): every '\n'-separated line, without a final empty one.
  size_t n_lines = st.lines.size();
  if (n_lines > 0 && st.lines.back().begin == st.lines.back().end && st.ends_with_newline) --n_lines;
  if (n_lines > 0) {
    uint64_t bullets = 0, ellipsis = 0;
    for (size_t i = 0; i < n_lines; ++i) {
      std::string_view line = text.substr(st.lines[i].begin, st.lines[i].end - st.lines[i].begin);
      std::string_view s = StripAscii(line);
      if (!s.empty() && (s[0] == '-' || s.substr(0, 3) == "\xE2\x80\xA2")) ++bullets;
      if (EndsWith(s, "...") || EndsWith(s, "\xE2\x80\xA6")) ++ellipsis;
    }
    if (o.max_bullet_lines_ratio > 0 &&
        static_cast<double>(bullets) / n_lines > o.max_bullet_lines_ratio) {
      return "gopher_too_many_bullets";
    }
    if (o.max_ellipsis_lines_ratio > 0 &&
        static_cast<double>(ellipsis) / n_lines > o.max_ellipsis_lines_ratio) {
      return "gopher_too_many_end_ellipsis";
    }
  }
  if (n_words > 0 && o.max_non_alpha_words_ratio > 0 &&
      static_cast<double>(n_alpha) / n_words < o.max_non_alpha_words_ratio) {
    return "gopher_below_alpha_threshold";
  }
  if (o.min_stop_words > 0 && n_stop < static_cast<uint64_t>(o.min_stop_words)) {
    return "gopher_enough_stop_words";
  }
  return nullptr;
}

const char* C4Lines(const C4Options& c4, const std::vector<std::string>& stop_words,
                    std::string_view text, const TextStats& st, FilterScratch* sc, bool* edited_out,
                    uint64_t* newlines_after_out, uint64_t* lines_removed) {
  sc->kept.clear();
  uint64_t newlines_after = 0;
  bool edited = false;
  const size_t n_lines = st.lines.size();
  // Case-insensitive searches on an ASCII-lower-cased copy; hits are mapped to lines.
  sc->line_flags.assign(n_lines, 0);
  sc->lower.resize(text.size());
  {
    const unsigned char* __restrict in = reinterpret_cast<const unsigned char*>(text.data());
    unsigned char* __restrict out = reinterpret_cast<unsigned char*>(sc->lower.data());
    const size_t size = text.size();
    for (size_t i = 0; i < size; ++i) {  // one vector loop (restrict: no aliasing)
      const unsigned char ch = in[i];
      out[i] = static_cast<unsigned char>(ch + (static_cast<unsigned char>(ch - 'A') < 26 ? 32 : 0));
    }
  }
  std::string_view low = sc->lower;
  auto line_of = [&](size_t pos) {
    size_t lo = 0, hi = n_lines;
    while (hi - lo > 1) {
      size_t mid = (lo + hi) / 2;
      if (st.lines[mid].begin <= pos) lo = mid; else hi = mid;
    }
    return lo;
  };
  auto mark = [&](std::string_view pat, uint8_t flag, std::string_view hay) {
    size_t pos = 0;
    while ((pos = FindPhrase(hay, pat, pos)) != std::string_view::npos) {
      sc->line_flags[line_of(pos)] |= flag;
      pos += 1;
    }
  };
  if (c4.filter_lorem_ipsum) mark("lorem ipsum", kHasLorem, low);
  if (c4.filter_javascript) mark("javascript", kHasJavascript, low);
  if (c4.filter_curly_bracket) mark("{", kHasCurly, text);
  if (c4.remove_citations) mark("[", kHasBracket, text);
  if (c4.filter_policy) {
    mark("terms of use", kHasPolicy, low);
    mark("privacy policy", kHasPolicy, low);
    size_t pos = 0;
    while ((pos = FindPhrase(low, "cookie", pos)) != std::string_view::npos) {
      std::string_view before = low.substr(0, pos);
      bool hit = low.substr(pos, 13) == "cookie policy";
      if (!hit && low.substr(pos, 7) == "cookies") {
        hit = EndsWith(before, "use ") || EndsWith(before, "uses ") || EndsWith(before, "use of ");
      }
      if (hit) sc->line_flags[line_of(pos)] |= kHasPolicy;
      pos += 1;
    }
  }
  int64_t sentences = 0;
  const char* doc_reject = nullptr;
  sc->edited.clear();
  bool pending_para = false;
  for (size_t i = 0; i < n_lines && doc_reject == nullptr; ++i) {
    const LineInfo& l = st.lines[i];
    std::string_view line = StripAscii(text.substr(l.begin, l.end - l.begin));
    uint8_t flags = sc->line_flags[i];
    if (line.empty()) {  // a paragraph break: kept as one, not a C4 line
      if (!sc->edited.empty()) pending_para = true;
      continue;
    }
    bool remove = false;
    uint64_t hash = l.hash, cp = l.cp, tokens = l.word_end - l.word_begin;
    uint64_t sentences_here = l.sentences;
    if (c4.max_word_length > 0 && l.max_ws_word_cp > static_cast<uint64_t>(c4.max_word_length)) {
      remove = true;
    }
    if (!remove && (flags & kHasBracket) && RemoveCitations(line, &sc->line_buf)) {
      std::string_view nl = StripAscii(sc->line_buf);
      if (nl.size() != line.size()) {
        edited = true;
        Analyze(nl, stop_words, &sc->line_stats);
        hash = Hash64(nl);
        cp = CodePoints(nl);
        tokens = sc->line_stats.words.size();
        sentences_here = sc->line_stats.lines.empty() ? 0 : sc->line_stats.lines[0].sentences;
        line = nl;
      }
    }
    if (!remove && c4.filter_no_terminal_punct && (!C4End(line) || EndsWith(line, "..."))) {
      remove = true;  // END_PUNCTUATION = . ? ! " ' and not an ellipsis
    }
    if (!remove && c4.min_words_per_line > 0 &&
        l.ws_words < static_cast<uint64_t>(c4.min_words_per_line)) {
      remove = true;
    }
    if (!remove && (flags & kHasLorem)) {
      doc_reject = "lorem_ipsum";
      break;
    }
    if (!remove && (flags & kHasJavascript)) remove = true;
    if (!remove && (flags & kHasCurly)) {
      doc_reject = "curly_bracket";
      break;
    }
    if (!remove && (flags & kHasPolicy)) remove = true;
    if (remove) {
      edited = true;
      ++*lines_removed;
      continue;
    }
    if (c4.min_num_sentences > 0 && sentences < c4.min_num_sentences) {
      sentences += static_cast<int64_t>(sentences_here);
    }
    if (!sc->edited.empty()) {
      sc->edited.append(pending_para ? "\n\n" : "\n");
      newlines_after += pending_para ? 2 : 1;
    }
    pending_para = false;
    sc->edited.append(line);
    sc->kept.push_back(KeptLine{hash, cp, StopEnd(line), line.empty(), tokens});
  }
  if (doc_reject == nullptr && c4.min_num_sentences > 0 && sentences < c4.min_num_sentences) {
    doc_reject = "too_few_sentences";
  }
  *edited_out = edited;
  *newlines_after_out = newlines_after;
  return doc_reject;
}

uint64_t AllLines(std::string_view text, const TextStats& st, FilterScratch* sc) {
  sc->kept.clear();
  const size_t n_lines = st.lines.size();
  for (size_t i = 0; i < n_lines; ++i) {
    const LineInfo& l = st.lines[i];
    std::string_view line = text.substr(l.begin, l.end - l.begin);
    bool blank = StripAscii(line).empty();
    sc->kept.push_back(KeptLine{l.hash, l.cp, StopEnd(line), blank, l.word_end - l.word_begin});
  }
  return n_lines > 0 ? n_lines - 1 : 0;
}

const char* FineWeb(const FineWebOptions& fw, uint64_t newlines_after, FilterScratch* sc) {
  uint64_t n = 0, stop = 0, shorts = 0, chars = 0, tokens = 0;
  std::vector<std::pair<uint64_t, uint64_t>>& keys = sc->keys;
  keys.clear();
  for (const KeptLine& k : sc->kept) {
    tokens += k.tokens;
    chars += k.cp;
    if (k.blank) continue;
    ++n;
    stop += k.stop_end;
    shorts += k.cp <= static_cast<uint64_t>(fw.short_line_length);
    keys.emplace_back(k.hash, k.cp);
  }
  const char* why = nullptr;
  if (n == 0) {
    why = "empty";
  } else {
    double ratio = static_cast<double>(stop) / n;
    if (ratio < fw.line_punct_thr && !(ratio == 0 && fw.line_punct_exclude_zero)) {
      why = "line_punct_ratio";
    } else if (static_cast<double>(shorts) / n > fw.short_line_thr) {
      why = "short_line_ratio";
    } else {
      auto [dups, dup_chars] = FindDuplicates(&sc->table, keys);
      (void)dups;
      if (chars > 0 && static_cast<double>(dup_chars) / chars > fw.char_duplicates_ratio) {
        why = "char_dup_ratio";
      } else if (tokens == 0 ? newlines_after > 0
                             : static_cast<double>(newlines_after) / tokens > fw.new_line_ratio) {
        why = "list_ratio";
      }
    }
  }
  return why;
}

}  // namespace grist::clean::internal
