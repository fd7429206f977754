#include "clean/run_clean.h"

#include <memory>
#include <optional>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "common/env.h"
#include "common/json_writer.h"
#include "common/ordered.h"
#include "common/progress.h"
#include "common/status_macros.h"
#include "common/sysinfo.h"
#include "common/thread_pool.h"

namespace grist::clean {

std::string TaskPrefix(int task, int tasks) {
  return absl::StrFormat("part-%05d-of-%05d", task, tasks);
}

namespace {

const char* Utf8PolicyName(Utf8Policy p) { return p == Utf8Policy::kRepair ? "repair" : "reject"; }
const char* NormalizationName(Normalization n) {
  return n == Normalization::kNfc ? "nfc" : n == Normalization::kNfkc ? "nfkc" : "none";
}

struct RejectedDoc {
  Document doc;
  std::string extra;  // "reasons":[...] (+ "error")
};

struct SplitResult {
  std::vector<Document> kept;
  std::vector<RejectedDoc> rejected;
  // The records serialized by the worker (kept, then rejected), so the writer thread only compresses.
  std::vector<std::string> kept_records, rejected_records;
  CleanReport partial;  // counts only
  std::optional<FileError> file_error;
  uint64_t bytes_consumed = 0;
};

// A small pool of Cleaners: each worker takes one for a split and gives it back.
class CleanerPool {
 public:
  explicit CleanerPool(const CleanOptions& o) : options_(o) {}
  std::unique_ptr<Cleaner> Take() {
    absl::MutexLock l(&mu_);
    if (free_.empty()) return std::make_unique<Cleaner>(options_);
    auto c = std::move(free_.back());
    free_.pop_back();
    return c;
  }
  void Give(std::unique_ptr<Cleaner> c) {
    absl::MutexLock l(&mu_);
    free_.push_back(std::move(c));
  }

 private:
  const CleanOptions& options_;
  absl::Mutex mu_;
  std::vector<std::unique_ptr<Cleaner>> free_;
};

std::string ReasonsJson(const std::vector<std::string>& reasons, const std::string& error) {
  std::string s = "\"reasons\":[";
  for (size_t i = 0; i < reasons.size(); ++i) {
    if (i) s.push_back(',');
    AppendJsonString(&s, reasons[i]);
  }
  s.push_back(']');
  if (!error.empty()) {
    s += ",\"error\":";
    AppendJsonString(&s, error);
  }
  return s;
}

absl::StatusOr<SplitResult> ProcessSplit(Env* env, const InputFile& file, const InputSplit& split,
                                         const CleanOptions& options, CleanerPool* pool) {
  SplitResult out;
  CleanReport& rep = out.partial;
  auto file_error = [&](const absl::Status& s, uint64_t last_line) -> absl::Status {
    if (options.on_file_error == FileErrorPolicy::kStop) return s;
    out.file_error = FileError{file.path, last_line, std::string(s.message())};
    return absl::OkStatus();
  };
  auto reader_or = OpenRecordReader(env, file, split, options.input);
  if (!reader_or.ok()) {
    RETURN_IF_ERROR(file_error(reader_or.status(), 0));
    return out;
  }
  std::unique_ptr<RecordReader> reader = std::move(*reader_or);
  std::unique_ptr<Cleaner> cleaner = pool->Take();
  CleanResult result;
  Document doc;
  uint64_t last_line = 0;
  absl::Status status;
  while (true) {
    absl::StatusOr<bool> more = reader->Next(&doc);
    if (!more.ok()) {
      status = file_error(more.status(), last_line);
      break;
    }
    if (!*more) break;
    last_line = doc.line;
    ++rep.counts.docs_in;
    rep.counts.bytes_in += doc.text.size();
    rep.record_bytes += doc.input_bytes;
    if (!doc.error.empty()) {
      ++rep.bad_records;
      rep.normalize.invalid_utf8_sequences += doc.invalid_utf8;
      ++rep.counts.docs_rejected;
      rep.bytes_rejected += doc.text.size();
      ++rep.reasons["bad_record"];
      std::string extra = ReasonsJson({"bad_record"}, doc.error);
      out.rejected.push_back(RejectedDoc{std::move(doc), std::move(extra)});
      doc = Document();
      continue;
    }
    cleaner->Clean(doc.text, &result);
    // The JSONL reader already replaced invalid UTF-8 (to parse the line): apply the policy here.
    result.counters.invalid_utf8_sequences += doc.invalid_utf8;
    if (doc.invalid_utf8 > 0 && options.utf8 == Utf8Policy::kReject &&
        (result.reasons.empty() || result.reasons[0] != "invalid_utf8")) {
      result.reasons.insert(result.reasons.begin(), "invalid_utf8");
      result.reason_filters.insert(result.reason_filters.begin(), 0);
    }
    rep.normalize.Add(result.counters);
    if (result.keep()) {
      ++rep.counts.docs_out;
      rep.counts.bytes_out += result.text.size();
      doc.text.swap(result.text);
      out.kept.push_back(std::move(doc));
    } else {
      ++rep.counts.docs_rejected;
      rep.bytes_rejected += doc.text.size();
      for (size_t i = 0; i < result.reasons.size(); ++i) {
        ++rep.reasons[result.reasons[i]];
        ++rep.filter_rejected[result.reason_filters[i]];
      }
      ++rep.first_filter_rejected[result.reason_filters[0]];
      std::string extra = ReasonsJson(result.reasons, "");
      doc.text.swap(result.text);
      out.rejected.push_back(RejectedDoc{std::move(doc), std::move(extra)});
    }
    doc = Document();
  }
  out.bytes_consumed = reader->bytes_consumed();
  pool->Give(std::move(cleaner));
  if (!status.ok()) return status;
  return out;
}

void Merge(const CleanReport& p, CleanReport* r) {
  r->counts.docs_in += p.counts.docs_in;
  r->counts.docs_out += p.counts.docs_out;
  r->counts.docs_rejected += p.counts.docs_rejected;
  r->counts.bytes_in += p.counts.bytes_in;
  r->counts.bytes_out += p.counts.bytes_out;
  r->bytes_rejected += p.bytes_rejected;
  r->record_bytes += p.record_bytes;
  r->bad_records += p.bad_records;
  for (int i = 0; i < kNumFilters; ++i) {
    r->filter_rejected[i] += p.filter_rejected[i];
    r->first_filter_rejected[i] += p.first_filter_rejected[i];
  }
  for (const auto& [k, v] : p.reasons) r->reasons[k] += v;
  r->normalize.Add(p.normalize);
}

// Removes parts named PREFIX-*.jsonl.zst (and their temporaries) left in `dir` by an earlier run.
absl::Status RemoveStaleParts(Env* env, const std::string& dir, const std::string& prefix) {
  if (!env->IsDirectory(dir)) return absl::OkStatus();
  ASSIGN_OR_RETURN(std::vector<std::string> names, env->ListDir(dir));
  for (const std::string& n : names) {
    if (n.rfind(prefix + "-", 0) == 0 && n.find(".jsonl.zst") != std::string::npos) {
      RETURN_IF_ERROR(env->RemoveFile(JoinPath(dir, n)));
    }
  }
  return absl::OkStatus();
}

}  // namespace

std::string OptionsJson(const CleanOptions& o) {
  JsonWriter w(0);
  w.BeginObject();
  w.Field("utf8", Utf8PolicyName(o.utf8));
  w.Field("normalization", NormalizationName(o.normalization));
  w.Field("strip_bom", o.strip_bom).Field("remove_control", o.remove_control);
  w.Field("whitespace", o.normalize_whitespace);
  w.Field("text_field", o.input.text_field).Field("txt_mode", o.input.txt_mode);
  w.Field("max_record_bytes", o.input.max_record_bytes);
  w.Field("on_file_error", o.on_file_error == FileErrorPolicy::kStop ? "stop" : "skip");
  w.Key("length").BeginObject().Field("enabled", o.length.enabled);
  w.Field("min_chars", o.length.min_chars).Field("max_chars", o.length.max_chars).EndObject();
  const auto& r = o.gopher_repetition;
  w.Key("gopher_repetition").BeginObject().Field("enabled", r.enabled);
  w.Field("dup_line_frac", r.dup_line_frac).Field("dup_para_frac", r.dup_para_frac);
  w.Field("dup_line_char_frac", r.dup_line_char_frac);
  w.Field("dup_para_char_frac", r.dup_para_char_frac);
  for (int n = 2; n <= 4; ++n) w.Field(absl::StrCat("top_", n, "_gram_frac"), r.top_n_gram[n - 2]);
  for (int n = 5; n <= 10; ++n) w.Field(absl::StrCat("dup_", n, "_gram_frac"), r.dup_n_gram[n - 5]);
  w.EndObject();
  const auto& q = o.gopher_quality;
  w.Key("gopher_quality").BeginObject().Field("enabled", q.enabled);
  w.Field("min_doc_words", q.min_doc_words).Field("max_doc_words", q.max_doc_words);
  w.Field("min_avg_word_length", q.min_avg_word_length);
  w.Field("max_avg_word_length", q.max_avg_word_length);
  w.Field("max_symbol_word_ratio", q.max_symbol_word_ratio);
  w.Field("max_bullet_lines_ratio", q.max_bullet_lines_ratio);
  w.Field("max_ellipsis_lines_ratio", q.max_ellipsis_lines_ratio);
  w.Field("max_non_alpha_words_ratio", q.max_non_alpha_words_ratio);
  w.Field("min_stop_words", q.min_stop_words);
  w.Key("stop_words").BeginArray();
  for (const auto& s : q.stop_words) w.String(s);
  w.EndArray().EndObject();
  const auto& c = o.c4;
  w.Key("c4").BeginObject().Field("enabled", c.enabled);
  w.Field("remove_citations", c.remove_citations);
  w.Field("filter_no_terminal_punct", c.filter_no_terminal_punct);
  w.Field("min_num_sentences", c.min_num_sentences);
  w.Field("min_words_per_line", c.min_words_per_line);
  w.Field("max_word_length", c.max_word_length);
  w.Field("filter_lorem_ipsum", c.filter_lorem_ipsum);
  w.Field("filter_javascript", c.filter_javascript);
  w.Field("filter_curly_bracket", c.filter_curly_bracket);
  w.Field("filter_policy", c.filter_policy).EndObject();
  const auto& f = o.fineweb;
  w.Key("fineweb").BeginObject().Field("enabled", f.enabled);
  w.Field("line_punct_thr", f.line_punct_thr);
  w.Field("line_punct_exclude_zero", f.line_punct_exclude_zero);
  w.Field("short_line_thr", f.short_line_thr);
  w.Field("short_line_length", f.short_line_length);
  w.Field("char_duplicates_ratio", f.char_duplicates_ratio);
  w.Field("new_line_ratio", f.new_line_ratio).EndObject();
  w.EndObject();
  return w.Take();
}

std::string CleanReport::CountsJson() const {
  JsonWriter w(0);
  w.BeginObject().Field("docs_in", counts.docs_in).Field("docs_out", counts.docs_out);
  w.Field("docs_rejected", counts.docs_rejected).Field("docs_removed", counts.docs_removed);
  w.Field("bytes_in", counts.bytes_in).Field("bytes_out", counts.bytes_out);
  w.Field("bad_records", bad_records).Key("reasons").BeginObject();
  for (const auto& [reason, n] : reasons) w.Field(reason, n);
  w.EndObject().EndObject();
  return w.Take();
}

std::string CleanReport::ToJson() const {
  JsonWriter w(2);
  w.BeginObject();
  w.Field("stage", "clean");
  w.Field("task", task).Field("tasks", tasks).Field("threads", threads);
  w.Field("files", files).Field("splits", splits);
  w.Key("docs").BeginObject();
  w.Field("in", counts.docs_in).Field("kept", counts.docs_out);
  w.Field("rejected", counts.docs_rejected).Field("bad_records", bad_records).EndObject();
  w.Key("bytes").BeginObject();
  w.Field("in", counts.bytes_in).Field("kept", counts.bytes_out);
  w.Field("rejected", bytes_rejected).Field("records", record_bytes).EndObject();
  w.Field("balanced", counts.Balanced());
  w.Key("filters").BeginObject();
  for (int i = 0; i < kNumFilters; ++i) {
    w.Key(kFilterNames[i]).BeginObject();
    w.Field("rejected", filter_rejected[i]).Field("first_rejected", first_filter_rejected[i]);
    w.EndObject();
  }
  w.EndObject();
  w.Key("reasons").BeginObject();
  for (const auto& [k, v] : reasons) w.Field(k, v);
  w.EndObject();
  w.Key("normalize").BeginObject();
  w.Field("invalid_utf8_sequences", normalize.invalid_utf8_sequences);
  w.Field("bom_stripped", normalize.bom_stripped);
  w.Field("control_chars_removed", normalize.control_chars_removed);
  w.Field("line_breaks_unified", normalize.crlf_unified);
  w.Field("lines_unicode_normalized", normalize.lines_normalized);
  w.Field("c4_lines_removed", normalize.c4_lines_removed);
  w.EndObject();
  w.Key("file_errors").BeginArray();
  for (const auto& e : file_errors) {
    w.BeginObject().Field("file", e.file).Field("last_good_line", e.last_good_line);
    w.Field("error", e.error).EndObject();
  }
  w.EndArray();
  auto parts = [&](const char* key, const std::vector<PartInfo>& v) {
    w.Key(key).BeginArray();
    for (const auto& p : v) {
      w.BeginObject().Field("path", BaseName(p.path)).Field("records", p.records);
      w.Field("bytes", p.bytes).EndObject();
    }
    w.EndArray();
  };
  parts("kept_parts", kept_parts);
  parts("reject_parts", reject_parts);
  w.Field("seconds", seconds);
  w.Field("mb_per_s", MbPerSecond());
  w.Field("peak_rss_bytes", peak_rss_bytes);
  w.Key("options").Raw(options_json.empty() ? "{}" : options_json);
  w.EndObject();
  return w.Take();
}

std::string CleanReport::Summary() const {
  std::string s = absl::StrFormat(
      "clean: %d docs in, %d kept, %d rejected (%d bad records); %s in, %s kept; %.1f MB/s, "
      "%.2f s, %d threads, peak RSS %s\n",
      counts.docs_in, counts.docs_out, counts.docs_rejected, bad_records,
      HumanBytes(static_cast<double>(counts.bytes_in)),
      HumanBytes(static_cast<double>(counts.bytes_out)), MbPerSecond(), seconds, threads,
      HumanBytes(static_cast<double>(peak_rss_bytes)));
  s += "  rejected by filter:";
  for (int i = 0; i < kNumFilters; ++i) {
    absl::StrAppend(&s, " ", kFilterNames[i], "=", filter_rejected[i]);
  }
  s += "\n  reasons:";
  for (const auto& [k, v] : reasons) absl::StrAppend(&s, " ", k, "=", v);
  s += "\n";
  for (const auto& e : file_errors) {
    absl::StrAppend(&s, "  skipped rest of ", e.file, " after line ", e.last_good_line, ": ",
                    e.error, "\n");
  }
  return s;
}

absl::StatusOr<CleanReport> RunClean(Env* env, const std::vector<std::string>& inputs,
                                     const std::string& output_dir, const CleanOptions& options,
                                     const RunOptions& run) {
  Stopwatch clock;
  if (run.tasks < 1 || run.task < 0 || run.task >= run.tasks) {
    return absl::InvalidArgumentError(
        absl::StrCat("task ", run.task, " of ", run.tasks, ": need 0 <= task < tasks"));
  }
  if (output_dir.empty()) return absl::InvalidArgumentError("clean: no output directory given");
  ASSIGN_OR_RETURN(std::vector<InputFile> files, ListInputs(env, inputs));
  ThreadPool pool(run.threads);
  ASSIGN_OR_RETURN(std::vector<InputSplit> all,
                   PlanSplits(env, files, BalancedSplitBytes(files, options.split_bytes, run.tasks), &pool));
  std::vector<InputSplit> splits = SelectTaskSplits(all, run.task, run.tasks);

  const std::string prefix = TaskPrefix(run.task, run.tasks);
  const std::string reject_dir = JoinPath(output_dir, "rejects");
  RETURN_IF_ERROR(env->CreateDirs(reject_dir));
  RETURN_IF_ERROR(RemoveStaleParts(env, output_dir, prefix));
  RETURN_IF_ERROR(RemoveStaleParts(env, reject_dir, prefix));
  ASSIGN_OR_RETURN(std::unique_ptr<RecordWriter> kept_writer,
                   RecordWriter::Open(env, output_dir, prefix, options.output));
  ASSIGN_OR_RETURN(std::unique_ptr<RecordWriter> reject_writer,
                   RecordWriter::Open(env, reject_dir, prefix, options.output));

  CleanReport report;
  report.task = run.task;
  report.tasks = run.tasks;
  report.splits = splits.size();
  {
    std::vector<bool> seen(files.size(), false);
    for (const auto& s : splits) {
      if (!seen[s.file_index]) ++report.files;
      seen[s.file_index] = true;
    }
  }
  uint64_t total_bytes = 0;
  for (const auto& s : splits) total_bytes += s.bytes;

  report.threads = pool.size();
  CleanerPool cleaners(options);
  Progress progress("clean", total_bytes, Progress::Unit::kBytes, !run.progress);

  absl::Status st = OrderedParallel<SplitResult>(
      &pool, splits.size(), 2 * static_cast<size_t>(pool.size()),
      [&](size_t i) -> absl::StatusOr<SplitResult> {
        ASSIGN_OR_RETURN(SplitResult r, ProcessSplit(env, files[splits[i].file_index], splits[i],
                                                     options, &cleaners));
        r.kept_records.reserve(r.kept.size());
        for (const Document& d : r.kept) r.kept_records.push_back(SerializeRecord(d));
        r.rejected_records.reserve(r.rejected.size());
        for (const RejectedDoc& d : r.rejected) {
          r.rejected_records.push_back(SerializeRecord(d.doc, d.extra));
        }
        r.kept.clear();
        r.rejected.clear();
        return r;
      },
      [&](size_t i, SplitResult&& r) -> absl::Status {
        for (const std::string& rec : r.kept_records) RETURN_IF_ERROR(kept_writer->AppendSerialized(rec));
        for (const std::string& rec : r.rejected_records) {
          RETURN_IF_ERROR(reject_writer->AppendSerialized(rec));
        }
        Merge(r.partial, &report);
        if (r.file_error) report.file_errors.push_back(std::move(*r.file_error));
        progress.Add(splits[i].bytes);
        return absl::OkStatus();
      });
  if (!st.ok()) return Annotate(st, "clean");
  ASSIGN_OR_RETURN(report.kept_parts, kept_writer->Finish());
  ASSIGN_OR_RETURN(report.reject_parts, reject_writer->Finish());
  progress.Finish();

  if (!report.counts.Balanced() || kept_writer->records() != report.counts.docs_out ||
      reject_writer->records() != report.counts.docs_rejected) {
    return absl::InternalError(absl::StrCat(
        "clean: document accounting does not balance: in=", report.counts.docs_in,
        " kept=", report.counts.docs_out, " rejected=", report.counts.docs_rejected,
        " written kept=", kept_writer->records(), " written rejected=", reject_writer->records()));
  }
  report.seconds = clock.Seconds();
  report.peak_rss_bytes = PeakRssBytes();
  report.options_json = OptionsJson(options);
  RETURN_IF_ERROR(WriteFileAtomic(
      env, JoinPath(output_dir, absl::StrCat("clean-report-", prefix.substr(5), ".json")),
      report.ToJson() + "\n"));
  return report;
}

}  // namespace grist::clean
