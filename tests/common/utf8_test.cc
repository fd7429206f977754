#include "common/utf8.h"

#include <gtest/gtest.h>

#include <string>

namespace grist {
namespace {

int Len(const std::string& s) {
  return Utf8SequenceLength(reinterpret_cast<const unsigned char*>(s.data()), s.size());
}

TEST(Utf8, ValidSequencesOfEachLength) {
  EXPECT_EQ(Len("a"), 1);
  EXPECT_EQ(Len(std::string("\0", 1)), 1);
  EXPECT_EQ(Len("\x7f"), 1);
  EXPECT_EQ(Len("\xc2\x80"), 2);          // U+0080, the first two-byte code point
  EXPECT_EQ(Len("\xdf\xbf"), 2);          // U+07FF
  EXPECT_EQ(Len("\xe0\xa0\x80"), 3);      // U+0800
  EXPECT_EQ(Len("\xed\x9f\xbf"), 3);      // U+D7FF, below the surrogates
  EXPECT_EQ(Len("\xee\x80\x80"), 3);      // U+E000, above them
  EXPECT_EQ(Len("\xef\xbf\xbd"), 3);      // U+FFFD
  EXPECT_EQ(Len("\xf0\x90\x80\x80"), 4);  // U+10000
  EXPECT_EQ(Len("\xf4\x8f\xbf\xbf"), 4);  // U+10FFFF, the last code point
  EXPECT_EQ(Len("\xc3\xa9xyz"), 2);       // only the first character counts
}

TEST(Utf8, InvalidSequences) {
  for (const char* bad : {"\x80",                // a continuation byte first
                          "\xbf",
                          "\xc0\x80",            // overlong U+0000
                          "\xc1\xbf",            // overlong U+007F
                          "\xe0\x9f\xbf",        // overlong U+07FF
                          "\xf0\x8f\xbf\xbf",    // overlong U+FFFF
                          "\xed\xa0\x80",        // U+D800, a surrogate
                          "\xed\xbf\xbf",        // U+DFFF
                          "\xf4\x90\x80\x80",    // U+110000
                          "\xf5\x80\x80\x80",    // a lead byte past U+10FFFF
                          "\xf8\x88\x80\x80\x80",  // a five-byte form
                          "\xff", "\xfe",
                          "\xc3",                // truncated
                          "\xe2\x82",
                          "\xf0\x9f\x98",
                          "\xc3\x28",            // a second byte that does not continue
                          "\xe2\x28\xa1"}) {
    EXPECT_EQ(Len(bad), 0) << ::testing::PrintToString(std::string(bad));
  }
  // The length counts what is there, not what follows.
  EXPECT_EQ(Utf8SequenceLength(reinterpret_cast<const unsigned char*>("\xc3\xa9"), 1), 0);
}

TEST(Utf8, WholeStringsAndRepair) {
  EXPECT_TRUE(IsValidUtf8(""));
  EXPECT_TRUE(IsValidUtf8("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"));
  EXPECT_FALSE(IsValidUtf8("caf\xc3"));
  EXPECT_FALSE(IsValidUtf8("a\xed\xa0\x80z"));
  std::string out = "stale";
  EXPECT_EQ(RepairUtf8("a\xff\xc3\xa9\xe2\x82z\xed\xa0\x80", &out), 6u);
  // Byte by byte: 0xff; then the truncated E2 82 as two; then the surrogate's three bytes.
  EXPECT_EQ(out,
            "a\xef\xbf\xbd\xc3\xa9\xef\xbf\xbd\xef\xbf\xbdz\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
  EXPECT_EQ(RepairUtf8("plain", &out), 0u);
  EXPECT_EQ(out, "plain");
}

}  // namespace
}  // namespace grist
