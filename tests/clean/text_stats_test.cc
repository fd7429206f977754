// Analyze's words against their definition: SplitChunk's tokens of each whitespace-separated chunk,
// each with TokenProperties. Analyze takes fast paths for common chunks ("word", "word,", "word.",
// "2005."); these tests hold them to the definition on chunks built to hit every path and its edges.
#include "clean/internal/text_stats.h"

#include <string>
#include <vector>

#include "clean/internal/word_split.h"
#include "common/rng.h"
#include "gtest/gtest.h"

namespace grist::clean::internal {
namespace {

const std::vector<std::string> kStop = {"the", "be", "to", "of", "and", "that", "have", "with",
                                        "I", "a", "2005", ",", "co", "verylongstopword"};

// The words of a one-line text by the definition.
std::vector<WordInfo> Definition(const std::string& line) {
  std::vector<WordInfo> out;
  SplitScratch scratch;
  std::vector<TokenSpan> spans;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && line[i] == ' ') ++i;
    size_t j = i;
    while (j < line.size() && line[j] != ' ') ++j;
    if (j > i) {
      spans.clear();
      const std::string chunk = line.substr(i, j - i);
      SplitChunk(chunk, &scratch, &spans);
      for (const TokenSpan& s : spans) {
        out.push_back(TokenProperties(std::string_view(chunk).substr(s.begin, s.end - s.begin), kStop));
      }
    }
    i = j;
  }
  return out;
}

void ExpectSameWords(const std::string& line, TextStats* st) {
  Analyze(line, kStop, st);
  const std::vector<WordInfo> want = Definition(line);
  ASSERT_EQ(st->words.size(), want.size()) << line;
  for (size_t k = 0; k < want.size(); ++k) {
    const WordInfo& a = st->words[k];
    const WordInfo& b = want[k];
    EXPECT_TRUE(a.hash == b.hash && a.cp == b.cp && a.has_alpha == b.has_alpha &&
                a.symbol_only == b.symbol_only && a.is_punct == b.is_punct &&
                a.sentence_end == b.sentence_end && a.stop == b.stop)
        << "word " << k << " of '" << line << "'";
  }
}

TEST(TextStatsTest, FastPathsMatchTheDefinitionOnKnownChunks) {
  const char* chunks[] = {
      "word", "Word", "WORD", "word,", "word;", "word:", "word!", "word?", "word.", "Word.",
      "WORD.", "w.", "a.", "co.", "Co.", "vs.", "Inc.", "Mr.", "Dr.", "etc.", "e.g.", "U.S.",
      "dont", "Dont", "dont.", "dont,", "cannot", "Cannot.", "im", "Im,", "hes", "its", "well",
      "were.", "gonna", "yall", "it's", "don't", "I'm", "2005", "2005.", "2005,", "2005;", "1,000",
      "3.5", "10am", "5pm.", "a", "I", "the", "the,", "The", "of.", "and!", "to?", ",", ".", "...",
      "(word)", "\"word\"", "word\"", "'word'", "word's", "well-known", "http://x.org", "a@b.co",
      "caf\xC3\xA9", "caf\xC3\xA9.", "na\xC3\xAFve,", "word\xE2\x80\x99s", "\xE2\x80\x9Cword\xE2\x80\x9D",
      "x,y", "#tag", "--", "verylongstopword", "verylongstopword.", "abcdefgh", "abcdefghi,",
      "ABCDEFGH.", "aB.", "ab1.", "1a.", "12,", "1.", "0.",
      // the less common shapes (AddCommonChunk) and their edges
      "\"The", "(The", "\"word\"", "(AP)", "(AP).", "word)", "word.\"", "word,\"", "word\".",
      "\"dont", "(dont)", "dont's", "it's", "It's", "IT'S", "\"it's", "Obama's", "Obama's\"",
      "Obama'S", "s's", "'s", "x's,", "well-known", "well-known,", "well-known.", "Anti-US.",
      "a-b-c", "a--b", "-a", "a-", "dont-stop", "\"well-known\"", "e-mail", "1,000", "1,000,",
      "3.5", "3.5.", "10:30", "10:30,", "1.2.3", "50%", "50%.", "50%,", "\"50%,\"", "1.5%", "0.0",
      "(0.0)", "8)", "(8)", "(8", "8-)", "\"a.", "a.\"", "(co.)", "\"Inc.\"", "(Mr.", "xD)",
      "(xD", "\"\"", "()", "(", ")", "\"", "-", "\xE2\x80\x94", "\xC3\xA9", "\xE2\x80\x99",
      "\xF0\x9F\x98\x80", "(\xC3\xA9)", "10am", "5pm)", "(5", "5)", "1,a", "a,1", "a'b", "a's's"};
  TextStats st;
  std::string all;
  for (const char* c : chunks) {
    ExpectSameWords(c, &st);
    all += c;
    all += ' ';
  }
  ExpectSameWords(all, &st);
}

// Random chunks of letters, digits, the fast paths' punctuation and a few others, and words that
// are contractions without their apostrophe.
TEST(TextStatsTest, FastPathsMatchTheDefinitionOnRandomChunks) {
  const char* pieces[] = {"a", "b", "e", "o", "s", "t", "n", "d", "m", "A", "B", "I", "Z", "0", "1",
                          "9", ".", ",", ";", ":", "!", "?", "'", "\"", "(", ")", "-", "/", "#",
                          "\xC3\xA9", "\xE2\x80\x99", "\xE2\x80\xA6", "dont", "im", "its", "co",
                          "the", "2005", "cannot", "Mr", "etc", "well", "'s", "%", "\xE2\x80\x94",
                          "xD", "am", "pm", "Inc"};
  Rng rng(2026);
  TextStats st;
  for (int doc = 0; doc < 2000; ++doc) {
    std::string line;
    const uint64_t chunks = 1 + rng.Uniform(30);
    for (uint64_t c = 0; c < chunks; ++c) {
      if (c) line += ' ';
      const uint64_t len = 1 + rng.Uniform(5);
      for (uint64_t k = 0; k < len; ++k) line += pieces[rng.Uniform(std::size(pieces))];
    }
    ExpectSameWords(line, &st);
    if (HasFailure()) break;
  }
}

}  // namespace
}  // namespace grist::clean::internal
