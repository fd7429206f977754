// CleanOptions::FromConfig: section "clean.*" of the TOML config.
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "clean/cleaner.h"
#include "common/config.h"
#include "common/status_macros.h"

namespace grist::clean {
namespace {

absl::Status BadValue(const Config& c, const std::string& key, const std::string& value,
                      const std::string& allowed) {
  return absl::InvalidArgumentError(absl::StrCat("config ", c.source(), ": key '", key,
                                                 "': expected ", allowed, ", got \"", value, "\""));
}

absl::Status CheckRange(const Config& c, const std::string& key, double v, double lo, double hi) {
  if (v < lo || v > hi) {
    return absl::InvalidArgumentError(absl::StrCat("config ", c.source(), ": key '", key,
                                                   "': ", v, " is outside [", lo, ", ", hi, "]"));
  }
  return absl::OkStatus();
}

#define GRIST_GET(type, field, key)                          \
  do {                                                       \
    ASSIGN_OR_RETURN(field, c.Get##type(key, field));        \
  } while (0)

#define GRIST_GET_FRAC(field, key)                           \
  do {                                                       \
    ASSIGN_OR_RETURN(field, c.GetDouble(key, field));        \
    RETURN_IF_ERROR(CheckRange(c, key, field, 0, 1));        \
  } while (0)

}  // namespace

absl::StatusOr<CleanOptions> CleanOptions::FromConfig(const Config& c) {
  CleanOptions o;
  {
    ASSIGN_OR_RETURN(std::string v, c.GetString("clean.utf8", "repair"));
    if (v == "repair") o.utf8 = Utf8Policy::kRepair;
    else if (v == "reject") o.utf8 = Utf8Policy::kReject;
    else return BadValue(c, "clean.utf8", v, "\"repair\" or \"reject\"");
  }
  {
    ASSIGN_OR_RETURN(std::string v, c.GetString("clean.normalization", "nfc"));
    if (v == "nfc") o.normalization = Normalization::kNfc;
    else if (v == "nfkc") o.normalization = Normalization::kNfkc;
    else if (v == "none") o.normalization = Normalization::kNone;
    else return BadValue(c, "clean.normalization", v, "\"nfc\", \"nfkc\" or \"none\"");
  }
  {
    ASSIGN_OR_RETURN(std::string v, c.GetString("clean.on_file_error", "stop"));
    if (v == "stop") o.on_file_error = FileErrorPolicy::kStop;
    else if (v == "skip") o.on_file_error = FileErrorPolicy::kSkip;
    else return BadValue(c, "clean.on_file_error", v, "\"stop\" or \"skip\"");
  }
  GRIST_GET(Bool, o.strip_bom, "clean.strip_bom");
  GRIST_GET(Bool, o.remove_control, "clean.remove_control");
  GRIST_GET(Bool, o.normalize_whitespace, "clean.whitespace");

  GRIST_GET(String, o.input.text_field, "clean.text_field");
  GRIST_GET(String, o.input.txt_mode, "clean.txt_mode");
  if (o.input.txt_mode != "file" && o.input.txt_mode != "blocks") {
    return BadValue(c, "clean.txt_mode", o.input.txt_mode, "\"file\" or \"blocks\"");
  }
  {
    int64_t v = static_cast<int64_t>(o.input.max_record_bytes);
    GRIST_GET(Int, v, "clean.max_record_bytes");
    RETURN_IF_ERROR(CheckRange(c, "clean.max_record_bytes", static_cast<double>(v), 0, 1e12));
    o.input.max_record_bytes = static_cast<uint64_t>(v);
  }
  {
    int64_t v = static_cast<int64_t>(o.output.part_bytes);
    GRIST_GET(Int, v, "clean.part_bytes");
    RETURN_IF_ERROR(CheckRange(c, "clean.part_bytes", static_cast<double>(v), 1 << 16, 1e12));
    o.output.part_bytes = static_cast<uint64_t>(v);
    int64_t level = o.output.zstd_level;
    GRIST_GET(Int, level, "clean.zstd_level");
    RETURN_IF_ERROR(CheckRange(c, "clean.zstd_level", static_cast<double>(level), 1, 19));
    o.output.zstd_level = static_cast<int>(level);
  }

  GRIST_GET(Bool, o.length.enabled, "clean.length.enabled");
  GRIST_GET(Int, o.length.min_chars, "clean.length.min_chars");
  GRIST_GET(Int, o.length.max_chars, "clean.length.max_chars");

  auto& r = o.gopher_repetition;
  GRIST_GET(Bool, r.enabled, "clean.gopher_repetition.enabled");
  GRIST_GET_FRAC(r.dup_line_frac, "clean.gopher_repetition.dup_line_frac");
  GRIST_GET_FRAC(r.dup_para_frac, "clean.gopher_repetition.dup_para_frac");
  GRIST_GET_FRAC(r.dup_line_char_frac, "clean.gopher_repetition.dup_line_char_frac");
  GRIST_GET_FRAC(r.dup_para_char_frac, "clean.gopher_repetition.dup_para_char_frac");
  for (int n = 2; n <= 4; ++n) {
    GRIST_GET_FRAC(r.top_n_gram[n - 2], absl::StrCat("clean.gopher_repetition.top_", n, "_gram_frac"));
  }
  for (int n = 5; n <= 10; ++n) {
    GRIST_GET_FRAC(r.dup_n_gram[n - 5], absl::StrCat("clean.gopher_repetition.dup_", n, "_gram_frac"));
  }

  auto& q = o.gopher_quality;
  GRIST_GET(Bool, q.enabled, "clean.gopher_quality.enabled");
  GRIST_GET(Int, q.min_doc_words, "clean.gopher_quality.min_doc_words");
  GRIST_GET(Int, q.max_doc_words, "clean.gopher_quality.max_doc_words");
  GRIST_GET(Double, q.min_avg_word_length, "clean.gopher_quality.min_avg_word_length");
  GRIST_GET(Double, q.max_avg_word_length, "clean.gopher_quality.max_avg_word_length");
  GRIST_GET(Double, q.max_symbol_word_ratio, "clean.gopher_quality.max_symbol_word_ratio");
  GRIST_GET_FRAC(q.max_bullet_lines_ratio, "clean.gopher_quality.max_bullet_lines_ratio");
  GRIST_GET_FRAC(q.max_ellipsis_lines_ratio, "clean.gopher_quality.max_ellipsis_lines_ratio");
  GRIST_GET_FRAC(q.max_non_alpha_words_ratio, "clean.gopher_quality.max_non_alpha_words_ratio");
  GRIST_GET(Int, q.min_stop_words, "clean.gopher_quality.min_stop_words");
  GRIST_GET(StringList, q.stop_words, "clean.gopher_quality.stop_words");

  auto& c4 = o.c4;
  GRIST_GET(Bool, c4.enabled, "clean.c4.enabled");
  GRIST_GET(Bool, c4.remove_citations, "clean.c4.remove_citations");
  GRIST_GET(Bool, c4.filter_no_terminal_punct, "clean.c4.filter_no_terminal_punct");
  GRIST_GET(Int, c4.min_num_sentences, "clean.c4.min_num_sentences");
  GRIST_GET(Int, c4.min_words_per_line, "clean.c4.min_words_per_line");
  GRIST_GET(Int, c4.max_word_length, "clean.c4.max_word_length");
  GRIST_GET(Bool, c4.filter_lorem_ipsum, "clean.c4.filter_lorem_ipsum");
  GRIST_GET(Bool, c4.filter_javascript, "clean.c4.filter_javascript");
  GRIST_GET(Bool, c4.filter_curly_bracket, "clean.c4.filter_curly_bracket");
  GRIST_GET(Bool, c4.filter_policy, "clean.c4.filter_policy");

  auto& f = o.fineweb;
  GRIST_GET(Bool, f.enabled, "clean.fineweb.enabled");
  GRIST_GET_FRAC(f.line_punct_thr, "clean.fineweb.line_punct_thr");
  GRIST_GET(Bool, f.line_punct_exclude_zero, "clean.fineweb.line_punct_exclude_zero");
  GRIST_GET_FRAC(f.short_line_thr, "clean.fineweb.short_line_thr");
  GRIST_GET(Int, f.short_line_length, "clean.fineweb.short_line_length");
  GRIST_GET_FRAC(f.char_duplicates_ratio, "clean.fineweb.char_duplicates_ratio");
  GRIST_GET(Double, f.new_line_ratio, "clean.fineweb.new_line_ratio");

  for (const std::string& key : c.UnusedKeys()) {
    if (key.rfind("clean.", 0) == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("config ", c.source(), ": unknown key '", key, "' (see docs/clean.md)"));
    }
  }
  return o;
}

}  // namespace grist::clean
