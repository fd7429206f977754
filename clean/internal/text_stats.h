// Per-line and per-word measurements of a normalized text, computed in one pass, that the quality
// filters share. Private to clean/.
//
// Words are split as spaCy's English tokenizer does, which datatrove uses for English
// (word_split.h); the line's sentence count is spaCy's sentencizer's over those words.
#ifndef GRIST_CLEAN_INTERNAL_TEXT_STATS_H_
#define GRIST_CLEAN_INTERNAL_TEXT_STATS_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "clean/internal/word_split.h"

namespace grist::clean::internal {

struct WordInfo {
  uint64_t hash;     // XXH3-64 of the token's bytes
  uint32_t cp;       // length in code points
  bool has_alpha;     // holds a letter (Python str.isalpha on some character)
  bool symbol_only;   // only characters of datatrove's PUNCTUATION_SET
  bool is_punct;      // only Unicode P* characters (spaCy's is_punct)
  bool sentence_end;  // one character of TERMINAL_PUNCTUATION ("." "!" "?" ...)
  uint32_t stop;      // 1 + the index of the stop word it equals, or 0
};

struct LineInfo {
  size_t begin = 0;  // byte offsets in the text, excluding the '\n'
  size_t end = 0;
  uint64_t hash = 0;  // XXH3-64 of the line's bytes
  uint64_t cp = 0;    // code points
  uint32_t word_begin = 0, word_end = 0;  // range in TextStats::words
  uint64_t ws_words = 0;                  // whitespace-separated words (str.split())
  uint64_t max_ws_word_cp = 0;            // longest of those, in code points
  uint32_t sentences = 0;                 // spaCy sentencizer's sentences of the line's words
};

struct TextStats {
  std::vector<LineInfo> lines;  // text.split('\n'): every segment, empty ones included
  std::vector<WordInfo> words;
  uint64_t total_cp = 0;
  bool ends_with_newline = false;
  SplitScratch split_scratch;  // reused by Analyze
  std::vector<TokenSpan> spans;
};

// Fills *stats (reusing its capacity) for `text`. Stop words are matched exactly (case-sensitive).
void Analyze(std::string_view text, const std::vector<std::string>& stop_words, TextStats* stats);

// The properties of one token (valid UTF-8, no whitespace), as Analyze gives them: the definition
// that Analyze's fast paths for common chunks ("word", "word,", "2005.") must match; Analyze's
// words are SplitChunk's tokens of each whitespace-separated chunk with these properties
// (TextStatsTest checks both agree).
WordInfo TokenProperties(std::string_view token, const std::vector<std::string>& stop_words);

}  // namespace grist::clean::internal

#endif  // GRIST_CLEAN_INTERNAL_TEXT_STATS_H_
