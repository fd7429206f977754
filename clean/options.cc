// The options of the `clean` stage, declared once (CleanOptions::Table): section "clean.*" of the
// TOML config, the flags of `grist clean`, their help with the defaults of cleaner.h, and the
// effective options in the report.
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "clean/cleaner.h"
#include "common/config.h"
#include "common/status_macros.h"

namespace grist::clean {
namespace {

constexpr OptionBounds kFraction{0, 1};

OptionTable<CleanOptions>* BuildTable() {
  auto* t = new OptionTable<CleanOptions>("clean.");
  // Normalization and input/output. Order as in the report's "options" (OptionsJson).
  t->Enum("clean.utf8", GRIST_OPTION_FIELD(utf8),
          "Invalid UTF-8: replace each bad sequence by U+FFFD, or reject the document",
          std::vector<std::pair<std::string, Utf8Policy>>{{"repair", Utf8Policy::kRepair},
                                                          {"reject", Utf8Policy::kReject}});
  t->Enum("clean.normalization", GRIST_OPTION_FIELD(normalization), "Unicode normalization",
          std::vector<std::pair<std::string, Normalization>>{{"nfc", Normalization::kNfc},
                                                             {"nfkc", Normalization::kNfkc},
                                                             {"none", Normalization::kNone}});
  t->Bool("clean.strip_bom", GRIST_OPTION_FIELD(strip_bom), "Strip a leading byte order mark");
  t->Bool("clean.remove_control", GRIST_OPTION_FIELD(remove_control),
          "Remove control characters (C0 other than tab and newline, DEL, C1)");
  t->Bool("clean.whitespace", GRIST_OPTION_FIELD(normalize_whitespace),
          "Collapse runs of spaces, strip lines, at most one blank line in a row");
  t->String("clean.text_field", GRIST_OPTION_FIELD(input.text_field),
            "JSON member holding the text");
  t->Enum("clean.txt_mode", GRIST_OPTION_FIELD(input.txt_mode),
          "Plain-text files: one document per file, or per blank-line-separated block",
          std::vector<std::pair<std::string, std::string>>{{"file", "file"}, {"blocks", "blocks"}});
  t->Int("clean.max_record_bytes", GRIST_OPTION_FIELD(input.max_record_bytes),
         "Longer records are rejected as bad_record without being held in memory", {0, 1e12});
  t->Enum("clean.on_file_error", GRIST_OPTION_FIELD(on_file_error),
          "An unreadable or corrupt file: stop, or record it in the report and go on",
          std::vector<std::pair<std::string, FileErrorPolicy>>{{"stop", FileErrorPolicy::kStop},
                                                               {"skip", FileErrorPolicy::kSkip}});
  t->Int("clean.part_bytes", GRIST_OPTION_FIELD(output.part_bytes),
         "Output part size in bytes (uncompressed)", {1 << 16, 1e12})
      .NotInJson();
  t->Int("clean.zstd_level", GRIST_OPTION_FIELD(output.zstd_level), "zstd level of the parts", {1, 19})
      .NotInJson();

  t->Bool("clean.length.enabled", GRIST_OPTION_FIELD(length.enabled), "Length filter");
  t->Int("clean.length.min_chars", GRIST_OPTION_FIELD(length.min_chars),
         "Fewest code points after normalization (0: no minimum)");
  t->Int("clean.length.max_chars", GRIST_OPTION_FIELD(length.max_chars),
         "Most code points (0: no maximum)");

  t->Bool("clean.gopher_repetition.enabled", GRIST_OPTION_FIELD(gopher_repetition.enabled),
          "Gopher repetition filter");
  t->Double("clean.gopher_repetition.dup_line_frac", GRIST_OPTION_FIELD(gopher_repetition.dup_line_frac),
            "Most duplicated lines / lines (0: off)", kFraction);
  t->Double("clean.gopher_repetition.dup_para_frac", GRIST_OPTION_FIELD(gopher_repetition.dup_para_frac),
            "Most duplicated paragraphs / paragraphs (0: off)", kFraction);
  t->Double("clean.gopher_repetition.dup_line_char_frac",
            GRIST_OPTION_FIELD(gopher_repetition.dup_line_char_frac),
            "Most characters in duplicated lines / characters (0: off)", kFraction);
  t->Double("clean.gopher_repetition.dup_para_char_frac",
            GRIST_OPTION_FIELD(gopher_repetition.dup_para_char_frac),
            "Most characters in duplicated paragraphs / characters (0: off)", kFraction);
  t->Double("clean.gopher_repetition.top_2_gram_frac", GRIST_OPTION_FIELD(gopher_repetition.top_n_gram[0]),
            "Most characters of the most frequent 2-gram x its count / characters (0: off)", kFraction);
  t->Double("clean.gopher_repetition.top_3_gram_frac", GRIST_OPTION_FIELD(gopher_repetition.top_n_gram[1]),
            "The same for 3-grams", kFraction);
  t->Double("clean.gopher_repetition.top_4_gram_frac", GRIST_OPTION_FIELD(gopher_repetition.top_n_gram[2]),
            "The same for 4-grams", kFraction);
  t->Double("clean.gopher_repetition.dup_5_gram_frac", GRIST_OPTION_FIELD(gopher_repetition.dup_n_gram[0]),
            "Most characters in duplicated 5-grams / characters (0: off)", kFraction);
  t->Double("clean.gopher_repetition.dup_6_gram_frac", GRIST_OPTION_FIELD(gopher_repetition.dup_n_gram[1]),
            "The same for 6-grams", kFraction);
  t->Double("clean.gopher_repetition.dup_7_gram_frac", GRIST_OPTION_FIELD(gopher_repetition.dup_n_gram[2]),
            "The same for 7-grams", kFraction);
  t->Double("clean.gopher_repetition.dup_8_gram_frac", GRIST_OPTION_FIELD(gopher_repetition.dup_n_gram[3]),
            "The same for 8-grams", kFraction);
  t->Double("clean.gopher_repetition.dup_9_gram_frac", GRIST_OPTION_FIELD(gopher_repetition.dup_n_gram[4]),
            "The same for 9-grams", kFraction);
  t->Double("clean.gopher_repetition.dup_10_gram_frac", GRIST_OPTION_FIELD(gopher_repetition.dup_n_gram[5]),
            "The same for 10-grams", kFraction);

  t->Bool("clean.gopher_quality.enabled", GRIST_OPTION_FIELD(gopher_quality.enabled),
          "Gopher quality filter");
  t->Int("clean.gopher_quality.min_doc_words", GRIST_OPTION_FIELD(gopher_quality.min_doc_words),
         "Fewest words not made only of punctuation (0: off)");
  t->Int("clean.gopher_quality.max_doc_words", GRIST_OPTION_FIELD(gopher_quality.max_doc_words),
         "Most such words (0: off)");
  t->Double("clean.gopher_quality.min_avg_word_length",
            GRIST_OPTION_FIELD(gopher_quality.min_avg_word_length),
            "Shortest mean word length (0: off)");
  t->Double("clean.gopher_quality.max_avg_word_length",
            GRIST_OPTION_FIELD(gopher_quality.max_avg_word_length),
            "Longest mean word length (0: off)");
  t->Double("clean.gopher_quality.max_symbol_word_ratio",
            GRIST_OPTION_FIELD(gopher_quality.max_symbol_word_ratio),
            "Most '#' (or '...') per word (0: off)");
  t->Double("clean.gopher_quality.max_bullet_lines_ratio",
            GRIST_OPTION_FIELD(gopher_quality.max_bullet_lines_ratio),
            "Most lines starting with a bullet / lines (0: off)", kFraction);
  t->Double("clean.gopher_quality.max_ellipsis_lines_ratio",
            GRIST_OPTION_FIELD(gopher_quality.max_ellipsis_lines_ratio),
            "Most lines ending with an ellipsis / lines (0: off)", kFraction);
  t->Double("clean.gopher_quality.max_non_alpha_words_ratio",
            GRIST_OPTION_FIELD(gopher_quality.max_non_alpha_words_ratio),
            "Fewest words holding a letter / words (0: off)", kFraction);
  t->Int("clean.gopher_quality.min_stop_words", GRIST_OPTION_FIELD(gopher_quality.min_stop_words),
         "Fewest distinct stop words (0: off)");
  t->StringList("clean.gopher_quality.stop_words", GRIST_OPTION_FIELD(gopher_quality.stop_words),
                "The stop words (case-sensitive), comma-separated");

  t->Bool("clean.c4.enabled", GRIST_OPTION_FIELD(c4.enabled), "C4 line filter");
  t->Bool("clean.c4.remove_citations", GRIST_OPTION_FIELD(c4.remove_citations),
          "Remove [1], [edit] and [citation needed]");
  t->Bool("clean.c4.filter_no_terminal_punct", GRIST_OPTION_FIELD(c4.filter_no_terminal_punct),
          "Remove lines not ending in terminal punctuation");
  t->Int("clean.c4.min_num_sentences", GRIST_OPTION_FIELD(c4.min_num_sentences),
         "Fewest sentences (0: off)");
  t->Int("clean.c4.min_words_per_line", GRIST_OPTION_FIELD(c4.min_words_per_line),
         "Remove lines of fewer words (0: off)");
  t->Int("clean.c4.max_word_length", GRIST_OPTION_FIELD(c4.max_word_length),
         "Remove lines with a longer word, in code points (0: off)");
  t->Bool("clean.c4.filter_lorem_ipsum", GRIST_OPTION_FIELD(c4.filter_lorem_ipsum),
          "Reject documents holding \"lorem ipsum\"");
  t->Bool("clean.c4.filter_javascript", GRIST_OPTION_FIELD(c4.filter_javascript),
          "Remove lines mentioning javascript");
  t->Bool("clean.c4.filter_curly_bracket", GRIST_OPTION_FIELD(c4.filter_curly_bracket),
          "Reject documents holding a curly bracket");
  t->Bool("clean.c4.filter_policy", GRIST_OPTION_FIELD(c4.filter_policy),
          "Remove lines about terms of use, privacy or cookie policy");

  t->Bool("clean.fineweb.enabled", GRIST_OPTION_FIELD(fineweb.enabled), "FineWeb quality filter");
  t->Double("clean.fineweb.line_punct_thr", GRIST_OPTION_FIELD(fineweb.line_punct_thr),
            "Fewest lines ending in terminal punctuation / lines", kFraction);
  t->Bool("clean.fineweb.line_punct_exclude_zero", GRIST_OPTION_FIELD(fineweb.line_punct_exclude_zero),
          "Keep documents where no line ends in terminal punctuation");
  t->Double("clean.fineweb.short_line_thr", GRIST_OPTION_FIELD(fineweb.short_line_thr),
            "Most short lines / lines", kFraction);
  t->Int("clean.fineweb.short_line_length", GRIST_OPTION_FIELD(fineweb.short_line_length),
         "Longest short line, in code points");
  t->Double("clean.fineweb.char_duplicates_ratio", GRIST_OPTION_FIELD(fineweb.char_duplicates_ratio),
            "Most characters in duplicated lines / characters", kFraction);
  t->Double("clean.fineweb.new_line_ratio", GRIST_OPTION_FIELD(fineweb.new_line_ratio),
            "Most newlines / words");
  return t;
}

}  // namespace

const OptionTable<CleanOptions>& CleanOptions::Table() {
  static const OptionTable<CleanOptions>* table = BuildTable();
  return *table;
}

absl::StatusOr<CleanOptions> CleanOptions::FromConfig(const Config& c) {
  CleanOptions o;
  RETURN_IF_ERROR(Table().Read(c, &o));
  for (const std::string& key : c.UnusedKeys()) {
    if (key.rfind("clean.", 0) == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("config ", c.source(), ": unknown key '", key, "' (see docs/clean.md)"));
    }
  }
  return o;
}

}  // namespace grist::clean
