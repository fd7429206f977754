// The quality filters on crafted text, one filter enabled at a time, with the exact decision.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "clean/cleaner.h"
#include "clean/internal/filters.h"
#include "clean/internal/text_stats.h"
#include "common/rng.h"

namespace grist::clean {
namespace {

// n distinct lower-case words of 5 letters ("wbaaa", "wbaab", ...), none a stop word.
std::string Words(int n, char tag = 'b') {
  std::string s;
  for (int i = 0; i < n; ++i) {
    if (i) s += ' ';
    s += 'w';
    s += tag;
    s += static_cast<char>('a' + (i / 676) % 26);
    s += static_cast<char>('a' + (i / 26) % 26);
    s += static_cast<char>('a' + i % 26);
  }
  return s;
}

CleanOptions Only(const char* filter) {
  CleanOptions o = CleanOptions::NormalizeOnly();
  std::string f = filter;
  if (f == "gopher_quality") o.gopher_quality.enabled = true;
  if (f == "gopher_repetition") o.gopher_repetition.enabled = true;
  if (f == "c4") o.c4.enabled = true;
  if (f == "fineweb") o.fineweb.enabled = true;
  if (f == "length") o.length.enabled = true;
  return o;
}

std::vector<std::string> Reasons(const CleanOptions& o, const std::string& text,
                                 std::string* out = nullptr) {
  Cleaner c(o);
  CleanResult r;
  c.Clean(text, &r);
  if (out) *out = r.text;
  return r.reasons;
}

using V = std::vector<std::string>;

// A document that passes Gopher quality: 60 words of 5 letters plus stop words.
std::string GoodGopher() { return "the cat and the dog " + Words(60) + "."; }

TEST(GopherQualityTest, ExactDecisions) {
  CleanOptions o = Only("gopher_quality");
  EXPECT_EQ(Reasons(o, GoodGopher()), V{});
  EXPECT_EQ(Reasons(o, "the cat and the dog"), V{"gopher_short_doc"});
  // 49 non-symbol words (punctuation tokens do not count) vs 50.
  EXPECT_EQ(Reasons(o, "the of " + Words(47) + " . , ;"), V{"gopher_short_doc"});
  EXPECT_EQ(Reasons(o, "the of " + Words(48)), V{});
  o.gopher_quality.max_doc_words = 55;
  EXPECT_EQ(Reasons(o, GoodGopher()), V{"gopher_long_doc"});
  o = Only("gopher_quality");
  std::string two;  // 60 words of 2 letters: mean 2 < 3
  for (int i = 0; i < 30; ++i) two += "to of ";
  EXPECT_EQ(Reasons(o, two), V{"gopher_below_avg_threshold"});
  std::string longw = "the with ";  // mean > 10
  for (int i = 0; i < 60; ++i) longw += "extraordinarily" + std::string(1, 'a' + i % 26) + " ";
  EXPECT_EQ(Reasons(o, longw), V{"gopher_above_avg_threshold"});
  // '#' count / all tokens (7 '#' tokens among 65 + 7) = 0.097 keeps; 8 / 73 = 0.11 rejects.
  std::string base = "the cat and the dog " + Words(60);
  EXPECT_EQ(Reasons(o, base + " # # # # # # #"), V{});
  EXPECT_EQ(Reasons(o, base + " # # # # # # # #"), V{"gopher_too_many_hashes"});
  EXPECT_EQ(Reasons(o, base + " ... ... \xE2\x80\xA6 ... ... ... ... ..."),
            V{"gopher_too_many_ellipsis"});
  // 10 lines, all bullets ("-" or U+2022) -> 1.0 > 0.9.
  std::string bullets;
  for (int i = 0; i < 10; ++i) {
    bullets += (i % 2 ? "- the " : "\xE2\x80\xA2 of ") + Words(6, static_cast<char>('c' + i)) + "\n";
  }
  EXPECT_EQ(Reasons(o, bullets), V{"gopher_too_many_bullets"});
  // 4 of 10 lines end with an ellipsis: 0.4 > 0.3 (and 4 ellipses / 74 tokens stays under 0.1).
  std::string ell;
  for (int i = 0; i < 10; ++i) {
    ell += "the " + Words(6, static_cast<char>('c' + i)) + (i < 4 ? " ..." : " .") + "\n";
  }
  EXPECT_EQ(Reasons(o, ell), V{"gopher_too_many_end_ellipsis"});
  // 62 alphabetic words and 16 numbers: 62/78 = 0.795 < 0.8.
  std::string nums = "the and " + Words(60);
  for (int i = 0; i < 16; ++i) nums += " 1234";
  EXPECT_EQ(Reasons(o, nums), V{"gopher_below_alpha_threshold"});
  // Stop words are matched case-sensitively: "The" does not count.
  EXPECT_EQ(Reasons(o, "The cat And dog " + Words(60)), V{"gopher_enough_stop_words"});
  EXPECT_EQ(Reasons(o, "the cat and dog " + Words(60)), V{});
}

TEST(GopherRepetitionTest, ExactDecisions) {
  CleanOptions o = Only("gopher_repetition");
  EXPECT_EQ(Reasons(o, Words(80)), V{});
  // 3 paragraphs, one repeated: 1/3 > 0.3.
  std::string p1 = Words(20, 'c'), p2 = Words(20, 'd');
  EXPECT_EQ(Reasons(o, p1 + "\n\n" + p2 + "\n\n" + p1), V{"dup_para_frac"});
  // 10 lines, 5 identical: 4 duplicates / 10 lines = 0.4 > 0.3.
  std::string lines;
  for (int i = 0; i < 10; ++i) {
    lines += (i < 5 ? std::string("same line here") : Words(8, static_cast<char>('c' + i))) + "\n";
  }
  EXPECT_EQ(Reasons(o, lines), V{"dup_line_frac"});
  // 10 lines, 4 identical: 3/10 = 0.3 is not > 0.3; but their characters are > 20% of the text.
  std::string lines2;
  for (int i = 0; i < 10; ++i) {
    lines2 += (i < 4 ? Words(12, 'z') : Words(8, static_cast<char>('c' + i))) + "\n";
  }
  EXPECT_EQ(Reasons(o, lines2), V{"dup_line_char_frac"});
  // "foo bar" 10 times: 70 chars of a ~230-char text > 0.2.
  std::string top;
  for (int i = 0; i < 10; ++i) top += "foo bar ";
  EXPECT_EQ(Reasons(o, top + Words(25)), V{"top_2_gram"});
  // A 30-word run repeated once among 50 other words: duplicated 5-grams cover 150 of ~660 chars.
  std::string run = Words(30, 'e');
  EXPECT_EQ(Reasons(o, run + " " + Words(50) + " " + run), V{"duplicated_5_n_grams"});
  o.gopher_repetition.dup_n_gram = {0, 0, 0, 0, 0, 0};
  EXPECT_EQ(Reasons(o, run + " " + Words(50) + " " + run), V{});
}

std::string Sentences(int n, char tag) {
  std::string s;
  for (int i = 0; i < n; ++i) {
    if (i) s += ' ';
    s += "The " + Words(5, static_cast<char>(tag + i)) + ".";
  }
  return s;
}

TEST(C4Test, LineRulesAndDocumentRules) {
  CleanOptions o = Only("c4");
  std::string good = Sentences(5, 'c');
  std::string out;
  EXPECT_EQ(Reasons(o, good, &out), V{});
  EXPECT_EQ(out, good);
  EXPECT_EQ(Reasons(o, Sentences(4, 'c')), V{"too_few_sentences"});
  // Lines with fewer than 3 words, "javascript" and cookie/policy phrases go; paragraphs stay.
  std::string doc = "Title\n\n" + Sentences(3, 'c') + "\nPlease enable JavaScript to view it.\n\n" +
                    "This site uses cookies for things.\nRead our Privacy Policy now.\n" +
                    Sentences(2, 'k') + "\nok\n\n" + Sentences(1, 'p');
  EXPECT_EQ(Reasons(o, doc, &out), V{});
  EXPECT_EQ(out, Sentences(3, 'c') + "\n\n" + Sentences(2, 'k') + "\n\n" + Sentences(1, 'p'));
  // Citations are removed.
  EXPECT_EQ(Reasons(o, Sentences(4, 'c') + " Sky is blue.[1] Grass is green[citation needed].[edit]",
                    &out),
            V{});
  EXPECT_EQ(out, Sentences(4, 'c') + " Sky is blue. Grass is green.");
  EXPECT_EQ(Reasons(o, good + "\nLorem ipsum dolor sit amet."), V{"lorem_ipsum"});
  // A short line is removed before the document rules see it.
  EXPECT_EQ(Reasons(o, good + "\nlorem ipsum"), V{});
  EXPECT_EQ(Reasons(o, good + "\nvar x = { a: 1 };"), V{"curly_bracket"});
  // A line with a word over 1000 characters goes.
  EXPECT_EQ(Reasons(o, good + "\nsee " + std::string(1001, 'x') + " here", &out), V{});
  EXPECT_EQ(out, good);
  // Terminal punctuation rule (off by default, as FineWeb runs C4).
  o.c4.filter_no_terminal_punct = true;
  EXPECT_EQ(Reasons(o, good + "\nno end mark here\nit trails off...", &out), V{});
  EXPECT_EQ(out, good);
}

TEST(FineWebTest, ExactDecisions) {
  CleanOptions o = Only("fineweb");
  std::string good;
  for (int i = 0; i < 10; ++i) good += "The " + Words(8, static_cast<char>('c' + i)) + ".\n";
  EXPECT_EQ(Reasons(o, good), V{});
  // No line ends in punctuation: ratio 0 < 0.12.
  std::string nopunct;
  for (int i = 0; i < 10; ++i) nopunct += "The " + Words(8, static_cast<char>('c' + i)) + "\n";
  EXPECT_EQ(Reasons(o, nopunct), V{"line_punct_ratio"});
  o.fineweb.line_punct_exclude_zero = true;
  EXPECT_EQ(Reasons(o, nopunct), V{});
  o = Only("fineweb");
  // 8 of 10 lines have <= 30 characters: 0.8 > 0.67.
  std::string shorts;
  for (int i = 0; i < 10; ++i) {
    shorts += (i < 8 ? "Short " + Words(2, static_cast<char>('c' + i)) : Words(9, static_cast<char>('c' + i))) + ".\n";
  }
  EXPECT_EQ(Reasons(o, shorts), V{"short_line_ratio"});
  // One line repeated: its characters are >= 1% of the text.
  EXPECT_EQ(Reasons(o, good + "The " + Words(8, 'c') + "."), V{"char_dup_ratio"});
  // 10 one-word lines: 9 newlines / 20 tokens = 0.45 > 0.3.
  std::string list;
  for (int i = 0; i < 10; ++i) {
    list += "Pneumonoultramicroscopicsilicovolcanoconiosis" + std::string(1, 'a' + i) + ".\n";
  }
  list.pop_back();
  EXPECT_EQ(Reasons(o, list), V{"list_ratio"});
}

// The n-gram rules of Gopher repetition as datatrove states them, counting every n-gram (a word
// sequence, by its words' hashes) at every n: for n = 2..4 the most frequent n-gram's characters
// (words joined with one space) times its count, for n = 5..10 the characters of the n-grams found
// again left to right, skipping past each one found. Fractions of the text's code points.
std::vector<double> DirectNGramFractions(const internal::TextStats& st) {
  const auto& w = st.words;
  std::vector<double> out;
  auto key = [&](size_t i, int n) {
    std::vector<uint64_t> k;
    for (int j = 0; j < n; ++j) k.push_back(w[i + j].hash);
    return k;
  };
  for (int n = 2; n <= 4; ++n) {
    std::map<std::vector<uint64_t>, std::pair<uint64_t, size_t>> counts;  // count, first
    for (size_t i = 0; i + n <= w.size(); ++i) {
      auto it = counts.try_emplace(key(i, n), 0, i).first;
      ++it->second.first;
    }
    uint64_t best = 0;
    size_t first = 0;
    for (const auto& [k, v] : counts) {
      if (v.first > best || (v.first == best && v.second < first)) {
        best = v.first;
        first = v.second;
      }
    }
    uint64_t chars = n - 1;
    for (int j = 0; j < n && first + j < w.size(); ++j) chars += w[first + j].cp;
    out.push_back(w.size() < static_cast<size_t>(n) ? 0.0
                                                    : static_cast<double>(chars * best) / st.total_cp);
  }
  for (int n = 5; n <= 10; ++n) {
    std::map<std::vector<uint64_t>, bool> seen;
    uint64_t repeated = 0;
    size_t i = 0;
    while (i + n <= w.size()) {
      auto k = key(i, n);
      if (seen.count(k)) {
        for (int j = 0; j < n; ++j) repeated += w[i + j].cp;
        i += n;
      } else {
        seen[k] = true;
        ++i;
      }
    }
    out.push_back(static_cast<double>(repeated) / st.total_cp);
  }
  return out;
}

// GopherRepetition counts only the n-grams that can repeat; its decisions must be those of the
// direct count. Texts of 1-300 words drawn from 3-40 words repeat n-grams of every length; each
// rule alone, at its threshold just below the measured fraction (reject) and at it (keep).
TEST(FiltersTest, GopherNGramsMatchTheDirectCount) {
  const char* vocab[] = {"the", "cat", "sat", "on", "a", "mat", "and", "dog", "ran", "far",
                         "it's", "U.S.", "end.", "(see", "this)", "--", "well-known", "x",
                         "y", "z", "alpha", "beta", "gamma", "delta", "eps", "zeta", "eta",
                         "theta", "iota", "kappa", "lambda", "mu", "nu", "xi", "omicron", "pi",
                         "rho", "sigma", "tau", "upsilon"};
  Rng rng(13);
  internal::TextStats st;
  internal::FilterScratch sc;
  const std::vector<std::string> stop = {"the", "and"};
  int rejects = 0;
  for (int doc = 0; doc < 400; ++doc) {
    const uint64_t words = 1 + rng.Uniform(300), kinds = 3 + rng.Uniform(38);
    std::string text;
    for (uint64_t i = 0; i < words; ++i) {
      if (i) text += rng.Uniform(12) == 0 ? "\n" : " ";
      text += vocab[rng.Uniform(kinds)];
    }
    internal::Analyze(text, stop, &st);
    const std::vector<double> want = DirectNGramFractions(st);
    for (int rule = 0; rule < 9; ++rule) {
      GopherRepetitionOptions o;
      o.dup_line_frac = o.dup_para_frac = o.dup_line_char_frac = o.dup_para_char_frac = 0;
      o.top_n_gram = {0, 0, 0};
      o.dup_n_gram = {0, 0, 0, 0, 0, 0};
      double& t = rule < 3 ? o.top_n_gram[rule] : o.dup_n_gram[rule - 3];
      const double f = want[rule];
      if (f <= 0) continue;
      t = f;
      EXPECT_EQ(internal::GopherRepetition(o, text, st, &sc), nullptr) << "rule " << rule << ": " << text;
      t = std::nextafter(f, 0.0);
      const char* why = internal::GopherRepetition(o, text, st, &sc);
      EXPECT_NE(why, nullptr) << "rule " << rule << " fraction " << f << ": " << text;
      rejects += why != nullptr;
    }
  }
  EXPECT_GT(rejects, 1000);
}

// Every phrase the filters search, and random short patterns over a small alphabet (many partial
// matches: first and last byte equal, middle not), at every start position and across the 16-byte
// blocks' edges, give string_view::find's answer.
TEST(FiltersTest, FindPhraseMatchesStringFind) {
  Rng rng(29);
  const std::vector<std::string> phrases = {"lorem ipsum", "javascript", "{", "[", "#", "...",
                                            "\xE2\x80\xA6", "terms of use", "privacy policy",
                                            "cookie", "ab", "aba"};
  int found = 0;
  for (int round = 0; round < 300; ++round) {
    const size_t len = rng.Uniform(80);
    std::string hay;
    for (size_t i = 0; i < len; ++i) hay += "ab. \xE2" "c"[rng.Uniform(6)];
    if (round % 3 == 0 && len > 12) {  // plant a phrase
      const std::string& ph = phrases[rng.Uniform(phrases.size())];
      hay.replace(rng.Uniform(len - 12), std::min(ph.size(), len), ph);
    }
    std::vector<std::string> pats = phrases;
    for (int k = 0; k < 6; ++k) {
      std::string p;
      const size_t plen = 1 + rng.Uniform(5);
      for (size_t i = 0; i < plen; ++i) p += "ab. c"[rng.Uniform(5)];
      pats.push_back(p);
    }
    for (const std::string& p : pats) {
      for (size_t from = 0; from <= hay.size() + 1; ++from) {
        const size_t want = std::string_view(hay).find(p, from);
        ASSERT_EQ(internal::FindPhrase(hay, p, from), want)
            << "'" << p << "' in '" << hay << "' from " << from;
        found += want != std::string_view::npos;
      }
    }
  }
  EXPECT_GT(found, 10000);
}

TEST(LengthTest, MinAndMaxInCodePoints) {
  CleanOptions o = Only("length");
  o.length.min_chars = 5;
  o.length.max_chars = 6;
  EXPECT_EQ(Reasons(o, "abcd"), V{"too_short"});
  EXPECT_EQ(Reasons(o, "\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9"), V{});  // 5 code points
  EXPECT_EQ(Reasons(o, "abcdefg"), V{"too_long"});
  EXPECT_EQ(Reasons(Only("length"), "   \n\n  "), V{"too_short"});  // empty after cleaning
}

TEST(CleanerTest, EveryFailingFilterIsReportedInOrder) {
  CleanOptions o;  // all defaults
  Cleaner c(o);
  CleanResult r;
  std::string spam;
  for (int i = 0; i < 30; ++i) spam += "buy now\n";
  c.Clean(spam, &r);
  EXPECT_EQ(r.reasons, (V{"dup_line_frac", "gopher_enough_stop_words", "too_few_sentences"}));
  EXPECT_EQ(r.reason_filters, (std::vector<int>{2, 3, 4}));
  std::string good;
  for (int i = 0; i < 8; ++i) {
    good += "The " + Words(10, static_cast<char>('c' + i)) + " of the " +
            Words(3, static_cast<char>('m' + i)) + ".\n";
  }
  c.Clean(good, &r);
  EXPECT_EQ(r.reasons, V{});
  good.pop_back();
  EXPECT_EQ(r.text, good);
}

}  // namespace
}  // namespace grist::clean
