#include "common/json_writer.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/internal/json_scan.h"
#include "common/utf8.h"

namespace grist {
namespace {

TEST(JsonWriterTest, CompactAndPretty) {
  JsonWriter w(0);
  w.BeginObject().Field("a", int64_t{1}).Key("b").BeginArray().Double(0.5).Bool(true).Null().EndArray();
  w.Field("s", "x\"y\n").EndObject();
  EXPECT_EQ(w.str(), "{\"a\":1,\"b\":[0.5,true,null],\"s\":\"x\\\"y\\n\"}");

  JsonWriter p(2);
  p.BeginObject().Field("k", uint64_t{7}).Key("e").BeginObject().EndObject().EndObject();
  EXPECT_EQ(p.str(), "{\n  \"k\": 7,\n  \"e\": {}\n}\n");
}

TEST(JsonWriterTest, EscapesControlAndInvalidUtf8) {
  std::string out;
  AppendJsonString(&out, std::string("a\x01\x7f") + "\xc3\xa9" + "\xff" + "\xe2\x82");
  EXPECT_EQ(out, "\"a\\u0001\\u007f\xc3\xa9\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\"");
}

TEST(JsonWriterTest, Doubles) {
  EXPECT_EQ(JsonDouble(0.1), "0.1");
  EXPECT_EQ(JsonDouble(3), "3.0");
  EXPECT_EQ(JsonDouble(1e300), "1e+300");
  EXPECT_EQ(JsonDouble(std::numeric_limits<double>::quiet_NaN()), "null");
}

}  // namespace
}  // namespace grist

namespace grist {
namespace {

// The byte-by-byte definition AppendJsonString's fast path must agree with.
std::string ReferenceJsonString(std::string_view s) {
  std::string out = "\"";
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  for (size_t i = 0; i < n;) {
    const unsigned char c = p[i];
    if (c < 0x80) {
      switch (c) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\n': out += "\\n"; break;
        case '\r': out += "\\r"; break;
        case '\t': out += "\\t"; break;
        case '\b': out += "\\b"; break;
        case '\f': out += "\\f"; break;
        default:
          if (c < 0x20 || c == 0x7f) {
            char buf[8];
            std::snprintf(buf, sizeof(buf), "\\u%04x", c);
            out += buf;
          } else {
            out.push_back(static_cast<char>(c));
          }
      }
      ++i;
      continue;
    }
    // UTF-8 validity is common/utf8.h's (tests/common/utf8_test.cc pins it down).
    const int len = Utf8SequenceLength(p + i, n - i);
    if (len > 0) {
      out.append(s.data() + i, len);
      i += len;
    } else {
      out += "\xEF\xBF\xBD";
      ++i;
    }
  }
  return out + "\"";
}

TEST(JsonWriterTest, EscapingFastPathMatchesTheByteByByteDefinition) {
  // Random strings over an alphabet rich in the cases: controls, DEL, quotes, backslashes, ASCII,
  // UTF-8 lead and continuation bytes, surrogates, overlongs, and 0xF8-0xFF.
  const std::string alphabet = std::string("\"\\\n\r\t\b\f\x01\x1f\x7f aZ~", 15) +
                               "\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80\xED\xA0\x80\xC0\xAF\xF8\xFF\x80";
  uint64_t x = 12345;
  for (int round = 0; round < 20000; ++round) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    const size_t len = (x >> 33) % 40;
    std::string s;
    for (size_t i = 0; i < len; ++i) {
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      // Mostly plain letters, so that 8-byte plain words occur between the special bytes.
      s.push_back((x >> 60) < 10 ? static_cast<char>('a' + (x >> 40) % 26)
                                 : alphabet[(x >> 33) % alphabet.size()]);
    }
    std::string got;
    AppendJsonString(&got, s);
    ASSERT_EQ(got, ReferenceJsonString(s)) << "input of " << s.size() << " bytes, round " << round;
  }
}

// ScanJsonStringAsWritten accepts exactly what AppendJsonString writes: every string it writes
// (short and long, every special byte), with the decoded size; and no other spelling of a string
// (other escapes, uppercase hex, raw controls or DEL, an unterminated string).
TEST(JsonWriterTest, ScanAcceptsExactlyWhatAppendJsonStringWrites) {
  const std::string alphabet = std::string("\"\\\n\r\t\b\f\x01\x1f\x7f aZ~/", 16) +
                               "\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80";
  uint64_t x = 777;
  for (int round = 0; round < 20000; ++round) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    const size_t len = (x >> 33) % (round % 2 == 0 ? 40 : 200);
    std::string s;
    while (s.size() < len) {
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      s.push_back((x >> 60) < 10 ? static_cast<char>('a' + (x >> 40) % 26)
                                 : alphabet[(x >> 33) % alphabet.size()]);
    }
    if (!IsValidUtf8(s)) continue;
    std::string w = "ab";
    AppendJsonString(&w, s);
    w += ",tail";
    size_t end = 0, decoded = 0;
    ASSERT_TRUE(ScanJsonStringAsWritten(w, 2, &end, &decoded)) << w;
    EXPECT_EQ(end, w.size() - 5);
    EXPECT_EQ(decoded, s.size());
  }
  auto scans = [](const std::string& w) {
    size_t end = 0, decoded = 0;
    return ScanJsonStringAsWritten(w, 0, &end, &decoded);
  };
  for (int c = 0; c < 0x80; ++c) {
    const std::string raw = std::string("\"a") + static_cast<char>(c) + "b\"";
    if (c != '"' && c != '\\') {
      EXPECT_EQ(scans(raw), c >= 0x20 && c != 0x7f) << c;
    }
    char u[16];
    std::snprintf(u, sizeof(u), "\"\\u%04x\"", c);
    const bool written = (c < 0x20 && c != '\b' && c != '\f' && c != '\n' && c != '\r' &&
                          c != '\t') || c == 0x7f;
    EXPECT_EQ(scans(u), written) << u;
    std::snprintf(u, sizeof(u), "\"\\u%04X\"", c);
    EXPECT_EQ(scans(u), written && (c & 0xf) < 10) << u;  // the same where no letter occurs
  }
  for (const char* other : {"\"\\/\"", "\"\\u00e9\"", "\"\\ud83d\\ude00\"", "\"\\x41\"", "\"\\",
                            "\"abc", "abc\"", "", "\"\\u00\""}) {
    EXPECT_FALSE(scans(other)) << other;
  }
  size_t end = 0, decoded = 0;
  ASSERT_TRUE(ScanJsonStringAsWritten("\"\\u001b\\t\\u007f\\\"\"", 0, &end, &decoded));
  EXPECT_EQ(decoded, 4u);
}

// Strings long enough for the validated path (checked for UTF-8 first, then scanned 16 bytes at a
// time): valid text with its special bytes at every offset of a 16-byte block and at the ends,
// and the same text made invalid by one stray byte anywhere (the byte-by-byte path then).
TEST(JsonWriterTest, LongStringsEscapeAsTheByteByByteDefinition) {
  const std::vector<std::string> specials = {"\"", "\\", "\n", "\t", std::string(1, '\0'),
                                             "\x01", "\x1f", "\x7f", "\xC3\xA9",
                                             "\xF0\x9F\x98\x80", "\xE2\x82\xAC"};
  const std::vector<std::string> strays = {"\xFF", "\x80", "\xC3", "\xED\xA0\x80", "\xC0\xAF"};
  uint64_t x = 777;
  auto next = [&x] {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    return x >> 33;
  };
  int validated = 0;
  for (int round = 0; round < 4000; ++round) {
    const size_t len = 64 + next() % 300;
    std::string s;
    while (s.size() < len) {
      const uint64_t r = next();
      if (r % 7 == 0) {
        s += specials[(r >> 8) % specials.size()];
      } else {
        s.append(1 + (r >> 8) % 40, static_cast<char>('a' + (r >> 16) % 26));
      }
    }
    if (round % 3 == 0) s.insert(next() % (s.size() + 1), strays[next() % strays.size()]);
    validated += IsValidUtf8(s) ? 1 : 0;
    std::string got = "prefix";
    AppendJsonString(&got, s);
    ASSERT_EQ(got, "prefix" + ReferenceJsonString(s)) << "round " << round;
  }
  EXPECT_GT(validated, 2000);  // both paths ran
  EXPECT_LT(validated, 4000);
  // A special byte at each position of the first and last blocks of a 64-byte plain string.
  for (const std::string& sp : specials) {
    for (size_t at = 0; at <= 64; ++at) {
      std::string s(64, 'q');
      s.insert(at, sp);
      std::string got;
      AppendJsonString(&got, s);
      ASSERT_EQ(got, ReferenceJsonString(s)) << "at " << at;
    }
  }
}

// Both scans for the bytes that need escaping (the 8-byte one of builds without SSE2, and the
// 16-byte one where SSE2 is) find the first such byte from every start, as the definition does:
// each special byte at every offset of a 40-byte run of plain bytes (ASCII and UTF-8 lead and
// continuation bytes, which are plain here), and random mixes.
TEST(JsonWriterTest, BothEscapeScansFindTheFirstByteThatNeedsEscaping) {
  auto special = [](unsigned char c) { return c < 0x20 || c == 0x7f || c == '"' || c == '\\'; };
  auto check = [&](const std::string& s) {
    const auto* p = reinterpret_cast<const unsigned char*>(s.data());
    for (size_t i = 0; i <= s.size(); ++i) {
      size_t want = i;
      while (want < s.size() && !special(p[want])) ++want;
      ASSERT_EQ(internal::NextSpecialByWords(p, i, s.size()), want) << "from " << i;
#if defined(__SSE2__)
      ASSERT_EQ(internal::NextSpecialBy16(p, i, s.size()), want) << "from " << i;
#endif
    }
  };
  const std::string plain = "ab\xc3\xa9 \x7e\x80\xbf\xffZ09 ~!#";  // no byte needs escaping
  std::string base;
  while (base.size() < 40) base += plain;
  base.resize(40);
  check(base);
  for (int c = 0; c < 256; ++c) {
    if (!special(static_cast<unsigned char>(c))) continue;
    for (size_t at = 0; at < base.size(); ++at) {
      std::string s = base;
      s[at] = static_cast<char>(c);
      check(s);
    }
  }
  uint32_t x = 3;
  for (int round = 0; round < 200; ++round) {
    std::string s;
    const size_t len = 1 + round % 70;
    for (size_t i = 0; i < len; ++i) {
      x = x * 1103515245u + 12345u;
      const unsigned char c = static_cast<unsigned char>(x >> 23);
      s.push_back(static_cast<char>((x >> 16) % 9 == 0 ? c : 'a' + (c % 26)));
    }
    check(s);
  }
}

}  // namespace
}  // namespace grist
