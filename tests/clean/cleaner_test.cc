// Normalization: UTF-8 repair/reject, BOM, control characters, line endings, NFC/NFKC, whitespace.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "clean/cleaner.h"
#include "common/config.h"
#include "common/rng.h"

namespace grist::clean {
namespace {

using namespace std::string_literals;

std::string Norm(const std::string& raw, NormalizeCounters* c = nullptr,
                 CleanOptions o = CleanOptions::NormalizeOnly()) {
  Cleaner cleaner(o);
  std::string out;
  NormalizeCounters local;
  cleaner.Normalize(raw, &out, c ? c : &local);
  return out;
}

TEST(NormalizeTest, StripsLeadingBomOnly) {
  NormalizeCounters c;
  EXPECT_EQ(Norm("\xEF\xBB\xBFHello", &c), "Hello");
  EXPECT_EQ(c.bom_stripped, 1u);
  NormalizeCounters c2;
  EXPECT_EQ(Norm("Hi\xEF\xBB\xBFthere", &c2), "Hi\xEF\xBB\xBFthere");
  EXPECT_EQ(c2.bom_stripped, 0u);
  // A BOM that becomes leading once control characters are removed is stripped in the same pass
  // (found by fuzz_cleaner: otherwise a second normalization changed the text again).
  NormalizeCounters c3;
  const std::string once = Norm("\x01\xEF\xBB\xBF\x04x", &c3);
  EXPECT_EQ(once, "x");
  EXPECT_EQ(c3.bom_stripped, 1u);
  EXPECT_EQ(Norm(once), once);
}

TEST(NormalizeTest, UnifiesLineEndings) {
  NormalizeCounters c;
  EXPECT_EQ(Norm("a\r\nb\rc\nd", &c), "a\nb\nc\nd");
  EXPECT_EQ(c.crlf_unified, 2u);
  NormalizeCounters c2;
  // NEL and LINE SEPARATOR are line breaks, PARAGRAPH SEPARATOR a paragraph break, \v \f breaks.
  EXPECT_EQ(Norm("a\xC2\x85" "b\xE2\x80\xA8" "c\xE2\x80\xA9" "d\x0B" "e\x0C" "f", &c2),
            "a\nb\nc\n\nd\ne\nf");
  EXPECT_EQ(c2.crlf_unified, 5u);
}

TEST(NormalizeTest, RemovesNulAndControlCharacters) {
  NormalizeCounters c;
  EXPECT_EQ(Norm("a\0b\x07" "c\x7F" "d\xC2\x80" "e\xC2\x9F" "f\tg"s, &c), "abcdef g");
  EXPECT_EQ(c.control_chars_removed, 5u);
  CleanOptions keep = CleanOptions::NormalizeOnly();
  keep.remove_control = false;
  keep.normalize_whitespace = false;
  EXPECT_EQ(Norm("a\0b"s, nullptr, keep), "a\0b"s);
}

TEST(NormalizeTest, RepairsInvalidUtf8WithMaximalSubparts) {
  NormalizeCounters c;
  // Lone continuation byte, invalid lead, truncated 3-byte sequence at the end.
  EXPECT_EQ(Norm("a\x80" "b\xFF" "c\xE2\x82", &c), "a\xEF\xBF\xBD" "b\xEF\xBF\xBD" "c\xEF\xBF\xBD");
  EXPECT_EQ(c.invalid_utf8_sequences, 3u);
  NormalizeCounters c2;
  // Overlong encoding (2 sequences) and an encoded surrogate (3), as Python's errors="replace".
  EXPECT_EQ(Norm("\xC0\xAF|\xED\xA0\x80", &c2),
            "\xEF\xBF\xBD\xEF\xBF\xBD|\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(c2.invalid_utf8_sequences, 5u);
  NormalizeCounters c3;
  // Valid 2/3/4-byte sequences pass untouched.
  EXPECT_EQ(Norm("\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80", &c3), "\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80");
  EXPECT_EQ(c3.invalid_utf8_sequences, 0u);
}

TEST(NormalizeTest, RejectPolicyRejectsInvalidUtf8) {
  CleanOptions o = CleanOptions::NormalizeOnly();
  o.utf8 = Utf8Policy::kReject;
  Cleaner cleaner(o);
  CleanResult r;
  cleaner.Clean("ok \xFF bad", &r);
  ASSERT_EQ(r.reasons.size(), 1u);
  EXPECT_EQ(r.reasons[0], "invalid_utf8");
  EXPECT_EQ(r.reason_filters[0], 0);
  EXPECT_EQ(r.counters.invalid_utf8_sequences, 1u);
  cleaner.Clean("all good", &r);
  EXPECT_TRUE(r.keep());
  EXPECT_EQ(r.text, "all good");
}

TEST(NormalizeTest, NfcComposesAndNfkcFolds) {
  NormalizeCounters c;
  // e + COMBINING ACUTE -> U+00E9; the ASCII line is untouched.
  EXPECT_EQ(Norm("plain\ncafe\xCC\x81", &c), "plain\ncaf\xC3\xA9");
  EXPECT_EQ(c.lines_normalized, 1u);
  // NFC keeps compatibility characters (U+FB01 LATIN SMALL LIGATURE FI, U+2460 CIRCLED ONE).
  EXPECT_EQ(Norm("\xEF\xAC\x81 \xE2\x91\xA0"), "\xEF\xAC\x81 \xE2\x91\xA0");
  CleanOptions nfkc = CleanOptions::NormalizeOnly();
  nfkc.normalization = Normalization::kNfkc;
  EXPECT_EQ(Norm("\xEF\xAC\x81 \xE2\x91\xA0", nullptr, nfkc), "fi 1");
  CleanOptions none = CleanOptions::NormalizeOnly();
  none.normalization = Normalization::kNone;
  EXPECT_EQ(Norm("cafe\xCC\x81", nullptr, none), "cafe\xCC\x81");
}

TEST(NormalizeTest, WhitespaceKeepsParagraphs) {
  EXPECT_EQ(Norm("  Hello \t  world  \n\n\n\n  Next   para \n \n"), "Hello world\n\nNext para");
  EXPECT_EQ(Norm("one\ntwo\n\nthree"), "one\ntwo\n\nthree");
  // Unicode spaces (NBSP, EM SPACE, IDEOGRAPHIC SPACE) collapse to one ASCII space.
  EXPECT_EQ(Norm("a\xC2\xA0\xC2\xA0" "b\xE2\x80\x83" "c\xE3\x80\x80" "d"), "a b c d");
  EXPECT_EQ(Norm(" \n\t\n "), "");
  CleanOptions off = CleanOptions::NormalizeOnly();
  off.normalize_whitespace = false;
  EXPECT_EQ(Norm("  a  b \n\n\n", nullptr, off), "  a  b \n\n\n");
}

// Whitespace normalization of ASCII text by its definition: each line stripped and its runs of
// spaces and tabs made one space; empty lines dropped at both ends, and between two kept lines
// at most one (two newlines).
std::string NormalizeAsciiWhitespace(const std::string& raw) {
  std::string out;
  int newlines = 0;
  size_t i = 0;
  while (i <= raw.size()) {
    size_t e = raw.find('\n', i);
    if (e == std::string::npos) e = raw.size();
    std::string line;
    bool space = false;
    for (size_t k = i; k < e; ++k) {
      if (raw[k] == ' ' || raw[k] == '\t') {
        space = !line.empty();
      } else {
        if (space) line += ' ';
        space = false;
        line += raw[k];
      }
    }
    if (!line.empty()) {
      if (!out.empty()) out.append(std::min(newlines, 2), '\n');
      out += line;
      newlines = 0;
    }
    ++newlines;
    i = e + 1;
  }
  return out;
}

// The normalizer copies runs of words and single spaces 8 bytes at a time; random ASCII text
// of words, single and double spaces, tabs and newlines holds it to the definition.
TEST(NormalizeTest, WhitespaceRunsMatchTheDefinition) {
  const char* pieces[] = {"a", "word", "Longerword", "!", "x.", " ", " ", " ", "  ", "\t", " \t",
                          "\n", "\n\n", " \n ", "~", "{}", "\x7e", "12345678"};
  Rng rng(8);
  for (int doc = 0; doc < 3000; ++doc) {
    std::string raw;
    const uint64_t n = rng.Uniform(60);
    for (uint64_t k = 0; k < n; ++k) raw += pieces[rng.Uniform(std::size(pieces))];
    ASSERT_EQ(Norm(raw), NormalizeAsciiWhitespace(raw)) << "'" << raw << "'";
  }
}

TEST(CleanOptionsTest, FromConfigReadsEverySectionAndRejectsTypos) {
  auto cfg = Config::FromString(R"(
[clean]
normalization = "nfkc"
utf8 = "reject"
on_file_error = "skip"
[clean.gopher_quality]
min_doc_words = 10
stop_words = ["a", "b"]
[clean.gopher_repetition]
top_3_gram_frac = 0.5
dup_10_gram_frac = 0.0
[clean.c4]
enabled = false
[clean.fineweb]
short_line_length = 40
)",
                                "test.toml");
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  auto o = CleanOptions::FromConfig(*cfg);
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->normalization, Normalization::kNfkc);
  EXPECT_EQ(o->utf8, Utf8Policy::kReject);
  EXPECT_EQ(o->on_file_error, FileErrorPolicy::kSkip);
  EXPECT_EQ(o->gopher_quality.min_doc_words, 10);
  EXPECT_EQ(o->gopher_quality.stop_words, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(o->gopher_repetition.top_n_gram[1], 0.5);
  EXPECT_EQ(o->gopher_repetition.dup_n_gram[5], 0.0);
  EXPECT_EQ(o->gopher_repetition.dup_n_gram[0], 0.15);
  EXPECT_FALSE(o->c4.enabled);
  EXPECT_EQ(o->fineweb.short_line_length, 40);
  EXPECT_EQ(o->fineweb.line_punct_thr, 0.12);

  auto typo = Config::FromString("[clean.gopher_quality]\nmin_doc_word = 3\n", "typo.toml");
  ASSERT_TRUE(typo.ok());
  auto bad = CleanOptions::FromConfig(*typo);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(std::string(bad.status().message()),
            "config typo.toml: unknown key 'clean.gopher_quality.min_doc_word' (see docs/clean.md)");

  auto enum_bad = Config::FromString("[clean]\nnormalization = \"nfd\"\n", "e.toml");
  ASSERT_TRUE(enum_bad.ok());
  auto bad2 = CleanOptions::FromConfig(*enum_bad);
  ASSERT_FALSE(bad2.ok());
  EXPECT_EQ(std::string(bad2.status().message()),
            "config e.toml: key 'clean.normalization': expected \"nfc\", \"nfkc\" or \"none\", got "
            "\"nfd\"");

  auto range = Config::FromString("[clean.fineweb]\nshort_line_thr = 1.5\n", "r.toml");
  ASSERT_TRUE(range.ok());
  EXPECT_FALSE(CleanOptions::FromConfig(*range).ok());
}

}  // namespace
}  // namespace grist::clean
