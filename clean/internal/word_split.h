// Word splitting of the quality filters: an approximation of spaCy's blank English tokenizer, which
// datatrove (>= 0.4) uses for English `split_into_words` and, with spaCy's sentencizer, for C4's
// sentence count. Private to clean/.
//
// A text is cut at whitespace into chunks; each chunk is split as spaCy does: special cases first
// (contractions "don't" -> "do" "n't", abbreviations "Mr." "U.S." "e.g.", emoticons ":)"), else
// prefixes (opening punctuation, quotes, currency, symbols) and suffixes (closing punctuation,
// quotes, "'s", a period after a lower-case letter or digit, units after a number) are peeled off
// one at a time; what remains is one token when it looks like a URL or e-mail address, else it is
// split at infixes (hyphens and "/" ":" between letters, "." between a lower- and an upper-case
// letter, "," between letters, "..." anywhere, arithmetic between digits). docs/clean.md lists
// where this differs from spaCy.
#ifndef GRIST_CLEAN_INTERNAL_WORD_SPLIT_H_
#define GRIST_CLEAN_INTERNAL_WORD_SPLIT_H_

#include <cstdint>
#include <string_view>
#include <vector>

namespace grist::clean::internal {

struct TokenSpan {
  uint32_t begin, end;  // byte offsets in the chunk
};

// Scratch buffers reused between calls (one per thread).
struct SplitScratch {
  std::vector<int32_t> cp;    // code points of the chunk
  std::vector<uint32_t> off;  // byte offset of each code point, plus the chunk's length
  std::vector<TokenSpan> suffixes;
};

// Appends the tokens of `chunk` (no whitespace inside, valid UTF-8) to *out, in order.
void SplitChunk(std::string_view chunk, SplitScratch* scratch, std::vector<TokenSpan>* out);

// True when `chunk` is one of the abbreviations or emoticons spaCy keeps whole ("Mr.", "e.g.", ":)").
bool IsSpecialWhole(std::string_view chunk);

// Character sets of datatrove (datatrove/utils/text.py) and spaCy's sentencizer.
// TERMINAL_PUNCTUATION: Unicode's sentence terminals ("." "!" "?" and their kin in other scripts);
// FineWeb's line_punct rule and the sentencizer's boundaries use it.
bool IsTerminalPunctuation(int32_t cp);
// PUNCTUATION_SET (PUNCTUATION plus TERMINAL_PUNCTUATION): a token made only of these is a
// "symbol word" for Gopher quality.
bool IsDatatrovePunctuation(int32_t cp);

}  // namespace grist::clean::internal

#endif  // GRIST_CLEAN_INTERNAL_WORD_SPLIT_H_
