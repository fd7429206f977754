// The quality filters of the `clean` stage (datatrove's Gopher repetition, Gopher quality, C4 and
// FineWeb filters) over a normalized text and its TextStats. Private to clean/: Cleaner::Clean
// (cleaner.cc) runs them in order. Each returns the reason of its first failing rule (datatrove's
// names, e.g. "dup_line_frac"), or nullptr to keep. docs/clean.md lists every rule.
//
// Thread safety: none; the FilterScratch (one per Cleaner) is reused from document to document.
#ifndef GRIST_CLEAN_INTERNAL_FILTERS_H_
#define GRIST_CLEAN_INTERNAL_FILTERS_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "clean/cleaner.h"
#include "clean/internal/text_stats.h"

namespace grist::clean::internal {

// Hash counting with first-seen order, reused across documents.

class CountTable {
 public:
  // 16 bytes: the key, the index where it was first seen, and count (low 24 bits, saturating) with
  // the table generation (high 8 bits) that marks the slot as used.
  struct Slot {
    uint64_t key;
    uint32_t first;
    uint32_t count_gen;
    uint32_t count() const { return count_gen & kCountMask; }
    void Increment() {
      if ((count_gen & kCountMask) != kCountMask) ++count_gen;
    }
  };
  static constexpr uint32_t kCountMask = (1u << 24) - 1;

  // Empties the table and sizes it for `n` keys. Capacity only grows; emptiness is a generation
  // stamp, so a reset costs nothing per slot (a full clear every 255 resets).
  void Reset(size_t n);
  // Returns the slot for key, inserting it with count 0 and first = index when new.
  Slot* Find(uint64_t key, uint32_t index) {
    size_t i = static_cast<size_t>(key * 0x9E3779B97F4A7C15ull >> 20) & mask_;
    const uint32_t tag = gen_ << 24;
    while (true) {
      Slot& s = slots_[i];
      if ((s.count_gen & ~kCountMask) != tag) {
        s = Slot{key, index, tag};
        return &s;
      }
      if (s.key == key) return &s;
      i = (i + 1) & mask_;
    }
  }

 private:
  std::vector<Slot> slots_;
  size_t used_ = 0;  // slots used since the last full clear (a prefix of slots_)
  size_t mask_ = 0;
  uint32_t gen_ = 0;
};


// A line left by C4 (or every line, C4 off), as FineWeb measures it.
struct KeptLine {
  uint64_t hash;
  uint64_t cp;
  bool stop_end;  // ends with a TERMINAL_PUNCTUATION character
  bool blank;
  uint64_t tokens;
};

// Buffers the filters reuse across documents.
struct FilterScratch {
  std::vector<KeptLine> kept;
  std::vector<uint64_t> grams;        // Gopher repetition's n-gram hashes
  std::vector<uint32_t> candidates;   // its positions still counted at the current n
  std::vector<uint8_t> levels;
  std::vector<std::pair<uint64_t, uint64_t>> keys;
  std::string lower;
  std::string edited;  // C4's edited text
  std::string line_buf;
  TextStats line_stats;  // for lines C4 edited
  CountTable table;
  std::vector<uint8_t> line_flags;
};

// hay.find(pat, from), as the filters search their phrases ("lorem ipsum", "...", "{"): 16
// positions at a time (SSE2) where that is available. FiltersTest holds it to string_view::find.
size_t FindPhrase(std::string_view hay, std::string_view pat, size_t from);

inline uint64_t CodePoints(std::string_view s) {
  uint64_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

const char* GopherRepetition(const GopherRepetitionOptions& o, std::string_view text,
                             const TextStats& st, FilterScratch* sc);
const char* GopherQuality(const GopherQualityOptions& o, std::string_view text,
                          const TextStats& st);
// C4: decides per line and records the kept lines in sc->kept; the text without the removed lines
// and citations is built in sc->edited (*edited: whether anything was removed). Returns the
// document's reject reason ("lorem_ipsum", "curly_bracket", "too_few_sentences") or nullptr.
// *newlines_after: the '\n's of the edited text; *lines_removed counts the removed lines.
const char* C4Lines(const C4Options& c4, const std::vector<std::string>& stop_words,
                    std::string_view text, const TextStats& st, FilterScratch* sc, bool* edited,
                    uint64_t* newlines_after, uint64_t* lines_removed);
// With C4 off: every line of `text` into sc->kept; returns the text's '\n' count (lines - 1).
uint64_t AllLines(std::string_view text, const TextStats& st, FilterScratch* sc);
// FineWeb over sc->kept (from C4Lines or AllLines).
const char* FineWeb(const FineWebOptions& fw, uint64_t newlines_after, FilterScratch* sc);

}  // namespace grist::clean::internal

#endif  // GRIST_CLEAN_INTERNAL_FILTERS_H_
