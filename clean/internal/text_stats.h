// Per-line and per-word measurements of a normalized text, computed in one pass, that the quality
// filters share. Private to clean/.
//
// Words follow an approximation of nltk's Treebank word_tokenize (which datatrove uses): runs of
// letters, digits and marks form a word, where ' - . between two letters or digits and , : between
// two digits stay inside it; every other punctuation or symbol character (ASCII punctuation,
// Unicode categories P* and S*) forms its own token, a run of the same character being one token
// ("...", "--").
#ifndef GRIST_CLEAN_INTERNAL_TEXT_STATS_H_
#define GRIST_CLEAN_INTERNAL_TEXT_STATS_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace grist::clean::internal {

struct WordInfo {
  uint64_t hash;     // XXH3-64 of the token's bytes
  uint32_t cp;       // length in code points
  bool has_alpha;    // holds a letter (Python str.isalpha on some character)
  bool symbol_only;  // only punctuation/symbol characters
  bool stop;         // equal to one of the stop words
};

struct LineInfo {
  size_t begin = 0;  // byte offsets in the text, excluding the '\n'
  size_t end = 0;
  uint64_t hash = 0;  // XXH3-64 of the line's bytes
  uint64_t cp = 0;    // code points
  uint32_t word_begin = 0, word_end = 0;  // range in TextStats::words
  uint64_t ws_words = 0;                  // whitespace-separated words (str.split())
  uint64_t max_ws_word_cp = 0;            // longest of those, in code points
};

struct TextStats {
  std::vector<LineInfo> lines;  // text.split('\n'): every segment, empty ones included
  std::vector<WordInfo> words;
  uint64_t total_cp = 0;
  bool ends_with_newline = false;
};

// Fills *stats (reusing its capacity) for `text`. Stop words are matched exactly (case-sensitive).
void Analyze(std::string_view text, const std::vector<std::string>& stop_words, TextStats* stats);

}  // namespace grist::clean::internal

#endif  // GRIST_CLEAN_INTERNAL_TEXT_STATS_H_
