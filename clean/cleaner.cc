// The cleaning pipeline: normalization (internal/normalizer.h), then the filters
// (internal/filters.h) in CleanOptions order.
#include "clean/cleaner.h"

#include <memory>
#include <utility>

#include "clean/internal/filters.h"
#include "clean/internal/normalizer.h"
#include "clean/internal/text_stats.h"

namespace grist::clean {

using internal::CodePoints;
using internal::TextStats;

void NormalizeCounters::Add(const NormalizeCounters& o) {
  invalid_utf8_sequences += o.invalid_utf8_sequences;
  bom_stripped += o.bom_stripped;
  control_chars_removed += o.control_chars_removed;
  crlf_unified += o.crlf_unified;
  lines_normalized += o.lines_normalized;
  c4_lines_removed += o.c4_lines_removed;
}

CleanOptions CleanOptions::NormalizeOnly() {
  CleanOptions o;
  o.length.enabled = false;
  o.gopher_repetition.enabled = false;
  o.gopher_quality.enabled = false;
  o.c4.enabled = false;
  o.fineweb.enabled = false;
  return o;
}

struct Cleaner::Scratch {
  TextStats stats;
  internal::FilterScratch filters;
};

Cleaner::Cleaner(CleanOptions options)
    : options_(std::move(options)), scratch_(std::make_unique<Scratch>()) {}
Cleaner::~Cleaner() = default;

bool Cleaner::Normalize(std::string_view raw, std::string* out, NormalizeCounters* counters) {
  bool valid = internal::NormalizeText(options_, raw, out, counters);
  return valid || options_.utf8 == Utf8Policy::kRepair;
}

namespace {

enum FilterIndex { kUtf8 = 0, kLength, kGopherRep, kGopherQuality, kC4, kFineWeb };

void Reject(CleanResult* r, int filter, const char* reason) {
  r->reasons.emplace_back(reason);
  r->reason_filters.push_back(filter);
}

}  // namespace

void Cleaner::Clean(std::string_view raw, CleanResult* r) {
  Scratch& sc = *scratch_;
  r->reasons.clear();
  r->reason_filters.clear();
  r->counters = NormalizeCounters();
  bool ok = Normalize(raw, &r->text, &r->counters);
  if (!ok) {
    Reject(r, kUtf8, "invalid_utf8");
    return;
  }
  const CleanOptions& o = options_;
  bool need_stats = o.gopher_repetition.enabled || o.gopher_quality.enabled || o.c4.enabled ||
                    o.fineweb.enabled;
  uint64_t total_cp = CodePoints(r->text);
  if (o.length.enabled) {
    if (o.length.min_chars > 0 && total_cp < static_cast<uint64_t>(o.length.min_chars)) {
      Reject(r, kLength, "too_short");
      return;
    }
    if (o.length.max_chars > 0 && total_cp > static_cast<uint64_t>(o.length.max_chars)) {
      Reject(r, kLength, "too_long");
      return;
    }
  }
  if (!need_stats) return;
  if (r->text.empty()) {
    // Nothing to measure: every ratio is undefined. Gopher rejects it as too short if enabled.
    if (o.gopher_quality.enabled && o.gopher_quality.min_doc_words > 0) {
      Reject(r, kGopherQuality, "gopher_short_doc");
    }
    if (o.fineweb.enabled) Reject(r, kFineWeb, "empty");
    if (o.c4.enabled && o.c4.min_num_sentences > 0) Reject(r, kC4, "too_few_sentences");
    return;
  }
  std::string_view text = r->text;
  TextStats& st = sc.stats;
  internal::Analyze(text, o.gopher_quality.stop_words, &st);

  if (o.gopher_repetition.enabled) {
    if (const char* why = internal::GopherRepetition(o.gopher_repetition, text, st, &sc.filters)) {
      Reject(r, kGopherRep, why);
    }
  }
  if (o.gopher_quality.enabled) {
    if (const char* why = internal::GopherQuality(o.gopher_quality, text, st)) {
      Reject(r, kGopherQuality, why);
    }
  }

  // C4 edits the text FineWeb then measures: the lines it keeps (hash, cp, ends with a stop
  // character, tokens) are what FineWeb counts.
  uint64_t newlines_after = 0;
  if (o.c4.enabled) {
    bool edited = false;
    if (const char* why = internal::C4Lines(o.c4, o.gopher_quality.stop_words, text, st, &sc.filters,
                                            &edited, &newlines_after, &r->counters.c4_lines_removed)) {
      Reject(r, kC4, why);
      return;  // the document is gone; FineWeb would only measure lines C4 has not finished
    }
    if (edited || sc.filters.edited.size() != r->text.size()) {
      r->text.swap(sc.filters.edited);
      text = r->text;
    }
  } else {
    newlines_after = internal::AllLines(text, st, &sc.filters);
  }

  if (o.fineweb.enabled) {
    if (const char* why = internal::FineWeb(o.fineweb, newlines_after, &sc.filters)) {
      Reject(r, kFineWeb, why);
    }
  }
}

}  // namespace grist::clean
