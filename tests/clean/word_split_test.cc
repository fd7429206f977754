// The word splitter of the quality filters against spaCy's English tokenizer (what datatrove uses):
// every expected split below is spaCy 3.8's output for the same chunk.
#include "clean/internal/word_split.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace grist::clean::internal {
namespace {

std::string Split(const std::string& chunk) {
  SplitScratch s;
  std::vector<TokenSpan> spans;
  SplitChunk(chunk, &s, &spans);
  std::string out;
  for (const auto& t : spans) {
    if (!out.empty()) out += '|';
    out += chunk.substr(t.begin, t.end - t.begin);
  }
  return out;
}

TEST(WordSplitTest, MatchesSpacyOnKnownChunks) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"don't", "do|n't"},
      {"I'm", "I|'m"},
      {"dont", "do|nt"},
      {"DON'T", "DON'T"},
      {"well-known", "well|-|known"},
      {"U.S.", "U.S."},
      {"(U.S.)", "(|U.S.|)"},
      {"e.g.", "e.g."},
      {"Mr.", "Mr."},
      {"Inc.'s", "Inc.|'s"},
      {"$5.00", "$|5.00"},
      {"US$6", "US$|6"},
      {"3,000", "3,000"},
      {"5km.", "5|km|."},
      {"10am", "10|am"},
      {"www.example.com,", "www.example.com|,"},
      {"dmd2@Isis.MsState.Edu", "dmd2@Isis|.|MsState|.|Edu"},
      {"poultry--they", "poultry|--|they"},
      {"end.The", "end|.|The"},
      {":)", ":)"},
      {"hello...", "hello|..."},
      {"word,", "word|,"},
  };
  for (const auto& [chunk, want] : cases) EXPECT_EQ(Split(chunk), want) << chunk;
}

TEST(WordSplitTest, CharacterSets) {
  EXPECT_TRUE(IsTerminalPunctuation('.'));
  EXPECT_TRUE(IsTerminalPunctuation(0x3002));  // 。
  EXPECT_FALSE(IsTerminalPunctuation('"'));    // FineWeb's stop chars have no quotes
  EXPECT_TRUE(IsDatatrovePunctuation('$'));
  EXPECT_TRUE(IsDatatrovePunctuation(0x2019));  // ’
  EXPECT_FALSE(IsDatatrovePunctuation(0x2018));  // ‘ is not in datatrove's PUNCTUATION
  EXPECT_FALSE(IsDatatrovePunctuation(0xA3));    // £
}

}  // namespace
}  // namespace grist::clean::internal
