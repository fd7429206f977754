// The text cleaner of the `clean` stage: normalization (UTF-8 repair, BOM, control characters, line
// endings, Unicode NFC/NFKC, whitespace) and the quality filters of datatrove/FineWeb (Gopher
// quality, Gopher repetition, C4 line rules, FineWeb rules) plus min/max length. docs/clean.md lists
// every rule with its threshold and where grist deliberately differs from datatrove.
//
//   ASSIGN_OR_RETURN(CleanOptions options, CleanOptions::FromConfig(config));
//   Cleaner cleaner(options);                 // one per thread: it owns reusable scratch buffers
//   CleanResult r;
//   cleaner.Clean(raw_text, &r);              // r.text = cleaned text, r.reasons empty = keep
//
// Thread safety: a Cleaner is not thread-safe; use one per thread. CleanOptions is a plain value.
// Determinism: the result depends only on the input text and the options (no hashing seeds, no
// locale, no thread state).
#ifndef GRIST_CLEAN_CLEANER_H_
#define GRIST_CLEAN_CLEANER_H_

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/option_table.h"
#include "common/records.h"

namespace grist {
class Config;
}

namespace grist::clean {

enum class Utf8Policy { kRepair, kReject };
enum class Normalization { kNone, kNfc, kNfkc };
enum class FileErrorPolicy { kStop, kSkip };

// datatrove GopherQualityFilter. A threshold of 0 disables that rule (as None does in datatrove).
struct GopherQualityOptions {
  bool enabled = true;
  int64_t min_doc_words = 50;
  int64_t max_doc_words = 100000;
  double min_avg_word_length = 3;
  double max_avg_word_length = 10;
  double max_symbol_word_ratio = 0.1;
  double max_bullet_lines_ratio = 0.9;
  double max_ellipsis_lines_ratio = 0.3;
  double max_non_alpha_words_ratio = 0.8;
  int64_t min_stop_words = 2;
  std::vector<std::string> stop_words = {"the", "be", "to", "of", "and", "that", "have", "with"};
};

// datatrove GopherRepetitionFilter (Gopher paper, table A1). 0 disables a rule.
struct GopherRepetitionOptions {
  bool enabled = true;
  double dup_line_frac = 0.3;
  double dup_para_frac = 0.3;
  double dup_line_char_frac = 0.2;
  double dup_para_char_frac = 0.2;
  // top_n_gram[n - 2] for n = 2..4.
  std::array<double, 3> top_n_gram = {0.20, 0.18, 0.16};
  // dup_n_gram[n - 5] for n = 5..10.
  std::array<double, 6> dup_n_gram = {0.15, 0.14, 0.13, 0.12, 0.11, 0.10};
};

// datatrove C4QualityFilter as FineWeb configures it (filter_no_terminal_punct = false). Removes
// lines (and citation marks) from the text; rejects the document on "lorem ipsum", a curly bracket
// or too few sentences. Values <= 0 disable the numeric rules.
struct C4Options {
  bool enabled = true;
  bool remove_citations = true;
  bool filter_no_terminal_punct = false;
  int64_t min_num_sentences = 5;
  int64_t min_words_per_line = 3;
  int64_t max_word_length = 1000;
  bool filter_lorem_ipsum = true;
  bool filter_javascript = true;
  bool filter_curly_bracket = true;
  bool filter_policy = true;
};

// datatrove FineWebQualityFilter.
struct FineWebOptions {
  bool enabled = true;
  double line_punct_thr = 0.12;
  bool line_punct_exclude_zero = false;
  double short_line_thr = 0.67;
  int64_t short_line_length = 30;
  double char_duplicates_ratio = 0.01;
  double new_line_ratio = 0.3;
};

struct LengthOptions {
  bool enabled = true;
  int64_t min_chars = 1;           // code points after normalization; 0 disables
  int64_t max_chars = 10'000'000;  // 0 disables
};

struct CleanOptions {
  // Normalization.
  Utf8Policy utf8 = Utf8Policy::kRepair;
  Normalization normalization = Normalization::kNfc;
  bool strip_bom = true;
  bool remove_control = true;
  bool normalize_whitespace = true;
  // Filters, applied in this order to the normalized text (C4 edits the text FineWeb then sees).
  LengthOptions length;
  GopherRepetitionOptions gopher_repetition;
  GopherQualityOptions gopher_quality;
  C4Options c4;
  FineWebOptions fineweb;
  // Stage settings (RunClean).
  InputOptions input;
  OutputOptions output;
  FileErrorPolicy on_file_error = FileErrorPolicy::kStop;
  uint64_t split_bytes = 32ull << 20;  // largest split (BalancedSplitBytes); never changes the output

  // Every option of section "clean.*": key, flag, default (the initializers above), help, range.
  // clean/options.cc declares them; FromConfig, the flags of `grist clean` and OptionsJson all come
  // from it (common/option_table.h).
  static const OptionTable<CleanOptions>& Table();
  // Reads section "clean.*" (docs/clean.md lists every key). A value of the wrong type, out of
  // range or not among an enumeration's, and a key under "clean." that is not in Table(), are
  // InvalidArgument naming the key.
  static absl::StatusOr<CleanOptions> FromConfig(const Config& config);
  // Every filter off, normalization only.
  static CleanOptions NormalizeOnly();
};

// The names of the filters, in report order, and the reasons each can give.
inline constexpr const char* kFilterNames[] = {"utf8",    "length",         "gopher_repetition",
                                               "gopher_quality", "c4", "fineweb"};
inline constexpr int kNumFilters = 6;

// Counters of what normalization changed in one document.
struct NormalizeCounters {
  uint64_t invalid_utf8_sequences = 0;  // each replaced by U+FFFD (or the doc rejected)
  uint64_t bom_stripped = 0;
  uint64_t control_chars_removed = 0;   // NUL, C0 other than \t \n, DEL, C1
  uint64_t crlf_unified = 0;            // \r\n, lone \r, and other line separators made \n
  uint64_t lines_normalized = 0;        // lines that Unicode normalization changed
  uint64_t c4_lines_removed = 0;        // lines C4 removed from kept or rejected text
  void Add(const NormalizeCounters& o);
};

struct CleanResult {
  std::string text;  // cleaned text (what is written for a kept document)
  // Empty = keep. Else one reason per failing filter, in filter order (e.g. "gopher_short_doc",
  // "line_punct_ratio"); a filter gives at most one reason (its first failing rule, as datatrove).
  std::vector<std::string> reasons;
  // Filter index (into kFilterNames) of each reason.
  std::vector<int> reason_filters;
  NormalizeCounters counters;
  bool keep() const { return reasons.empty(); }
};

class Cleaner {
 public:
  explicit Cleaner(CleanOptions options);
  ~Cleaner();
  Cleaner(const Cleaner&) = delete;
  Cleaner& operator=(const Cleaner&) = delete;

  // Cleans `raw` (any bytes) into *result (reused: pass the same object to avoid allocations).
  void Clean(std::string_view raw, CleanResult* result);

  // Normalization alone: `raw` -> *out. Returns false when the text holds invalid UTF-8 and the
  // policy is kReject (*out then holds the repaired text).
  bool Normalize(std::string_view raw, std::string* out, NormalizeCounters* counters);

  const CleanOptions& options() const { return options_; }

  struct Scratch;

 private:
  CleanOptions options_;
  std::unique_ptr<Scratch> scratch_;
};

}  // namespace grist::clean

#endif  // GRIST_CLEAN_CLEANER_H_
