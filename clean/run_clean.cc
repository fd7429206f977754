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
#include "common/shared_work.h"
#include "common/status_macros.h"
#include "common/task_parts.h"
#include "common/sysinfo.h"
#include "common/thread_pool.h"

namespace grist::clean {

std::string TaskPrefix(int task, int tasks) { return TaskPartName(kPartStem, task, tasks); }

std::string TaskReportName(int task, int tasks) {
  return TaskPartName(kReportStem, task, tasks) + kReportSuffix;
}

namespace {

struct SplitResult {
  // The records, serialized by the worker as it cleans, so the writer thread only compresses.
  RecordBatch kept, rejected;
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

// Sets *s to a reject record's extra members: "reasons":[...] (+ "error").
void ReasonsJson(const std::vector<std::string>& reasons, const std::string& error, std::string* s) {
  s->assign("\"reasons\":[");
  for (size_t i = 0; i < reasons.size(); ++i) {
    if (i) s->push_back(',');
    AppendJsonString(s, reasons[i]);
  }
  s->push_back(']');
  if (!error.empty()) {
    s->append(",\"error\":");
    AppendJsonString(s, error);
  }
}

// Cleans one split's documents a batch at a time through `shared`: this thread from the first,
// threads with no split left to start (the stage's last wave) from the last; every document is
// accounted and serialized here, in input order, whoever cleaned it.
absl::StatusOr<SplitResult> ProcessSplit(Env* env, const InputFile& file, const InputSplit& split,
                                         const CleanOptions& options, CleanerPool* pool,
                                         SplitDecoders* decoders, SharedWork* shared) {
  SplitResult out;
  CleanReport& rep = out.partial;
  auto file_error = [&](const absl::Status& s, uint64_t last_line) -> absl::Status {
    if (options.on_file_error == FileErrorPolicy::kStop) return s;
    out.file_error = FileError{file.path, last_line, std::string(s.message())};
    return absl::OkStatus();
  };
  auto reader_or = OpenRecordReader(env, file, split, options.input, decoders);
  if (!reader_or.ok()) {
    RETURN_IF_ERROR(file_error(reader_or.status(), 0));
    return out;
  }
  std::unique_ptr<RecordReader> reader = std::move(*reader_or);
  std::unique_ptr<Cleaner> cleaner = pool->Take();
  // Reused from split to split on this thread (the reader refills every field of a document).
  thread_local std::vector<Document> docs;
  thread_local std::vector<CleanResult> helped;
  CleanResult result;
  std::string extra;
  uint64_t last_line = 0;
  absl::Status status;
  // Counts document `doc`, cleaned into `r` (unless a bad record), and adds it to the kept or the
  // rejected records.
  auto account = [&](Document& doc, CleanResult& r) {
    ++rep.counts.docs_in;
    rep.counts.bytes_in += doc.text.size();
    rep.record_bytes += doc.input_bytes;
    if (!doc.error.empty()) {
      ++rep.bad_records;
      rep.normalize.invalid_utf8_sequences += doc.invalid_utf8;
      ++rep.counts.docs_rejected;
      rep.bytes_rejected += doc.text.size();
      ++rep.reasons["bad_record"];
      ReasonsJson({"bad_record"}, doc.error, &extra);
      out.rejected.Add(doc, extra);
      return;
    }
    // The JSONL reader already replaced invalid UTF-8 (to parse the line): apply the policy here.
    r.counters.invalid_utf8_sequences += doc.invalid_utf8;
    if (doc.invalid_utf8 > 0 && options.utf8 == Utf8Policy::kReject &&
        (r.reasons.empty() || r.reasons[0] != "invalid_utf8")) {
      r.reasons.insert(r.reasons.begin(), "invalid_utf8");
      r.reason_filters.insert(r.reason_filters.begin(), 0);
    }
    rep.normalize.Add(r.counters);
    if (r.keep()) {
      ++rep.counts.docs_out;
      rep.counts.bytes_out += r.text.size();
      doc.text.swap(r.text);
      out.kept.Add(doc);
    } else {
      ++rep.counts.docs_rejected;
      rep.bytes_rejected += doc.text.size();
      for (size_t i = 0; i < r.reasons.size(); ++i) {
        ++rep.reasons[r.reasons[i]];
        ++rep.filter_rejected[r.reason_filters[i]];
      }
      ++rep.first_filter_rejected[r.reason_filters[0]];
      ReasonsJson(r.reasons, "", &extra);
      doc.text.swap(r.text);
      out.rejected.Add(doc, extra);
    }
  };
  bool more = true;
  while (more) {
    size_t n = 0;
    uint64_t batch_bytes = 0;
    while (batch_bytes < kSharedWorkBatchBytes) {
      if (docs.size() <= n) docs.emplace_back();
      absl::StatusOr<bool> next = reader->Next(&docs[n]);
      if (!next.ok()) {
        // The documents read before it are cleaned and kept first, as one by one.
        status = file_error(next.status(), last_line);
        more = false;
        break;
      }
      more = *next;
      if (!more) break;
      last_line = docs[n].line;
      batch_bytes += docs[n].text.size();
      ++n;
    }
    Document* const batch = docs.data();  // this thread's, for a helper too
    RETURN_IF_ERROR(RunInOrder(
        shared, n, &result, &helped,
        [&](size_t k, CleanResult* r, bool by_owner) {
          if (!batch[k].error.empty()) return;  // a bad record: nothing to clean
          if (by_owner) {
            cleaner->Clean(batch[k].text, r);
            return;
          }
          std::unique_ptr<Cleaner> own = pool->Take();
          own->Clean(batch[k].text, r);
          pool->Give(std::move(own));
        },
        [&](size_t k, CleanResult& r) {
          account(batch[k], r);
          return absl::OkStatus();
        }));
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
  CleanOptions::Table().WriteJson(o, &w);
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
  if (run.tasks < 1 || run.task < 0 || run.task >= run.tasks) {
    return absl::InvalidArgumentError(
        absl::StrCat("task ", run.task, " of ", run.tasks, ": need 0 <= task < tasks"));
  }
  if (output_dir.empty()) return absl::InvalidArgumentError("clean: no output directory given");
  ASSIGN_OR_RETURN(std::vector<InputFile> files, ListInputs(env, inputs));
  return RunCleanFiles(env, files, output_dir, options, run);
}

absl::StatusOr<CleanReport> RunCleanFiles(Env* env, const std::vector<InputFile>& files,
                                          const std::string& output_dir,
                                          const CleanOptions& options, const RunOptions& run) {
  Stopwatch clock;
  if (run.tasks < 1 || run.task < 0 || run.task >= run.tasks) {
    return absl::InvalidArgumentError(
        absl::StrCat("task ", run.task, " of ", run.tasks, ": need 0 <= task < tasks"));
  }
  if (output_dir.empty()) return absl::InvalidArgumentError("clean: no output directory given");
  ThreadPool pool(run.threads);
  ASSIGN_OR_RETURN(std::vector<InputSplit> all,
                   PlanSplits(env, files, BalancedSplitBytes(files, options.split_bytes, run.tasks), &pool,
                              options.input));
  std::vector<InputSplit> splits = SelectTaskSplits(all, run.task, run.tasks);
  SplitDecoders decoders(env, files, splits, options.input,
                         SplitDecoders::DefaultChunksInFlight(pool.size()));

  const std::string prefix = TaskPrefix(run.task, run.tasks);
  const std::string reject_dir = JoinPath(output_dir, "rejects");
  RETURN_IF_ERROR(env->CreateDirs(reject_dir));
  RETURN_IF_ERROR(RemoveStaleParts(env, output_dir, prefix));
  RETURN_IF_ERROR(RemoveStaleParts(env, reject_dir, prefix));
  OutputOptions output = options.output;
  output.compress_threads = pool.size();  // the parts' zstd off the single writer's path
  ASSIGN_OR_RETURN(std::unique_ptr<RecordWriter> kept_writer,
                   RecordWriter::Open(env, output_dir, prefix, output));
  ASSIGN_OR_RETURN(std::unique_ptr<RecordWriter> reject_writer,
                   RecordWriter::Open(env, reject_dir, prefix, output));

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

  SharedWork shared;  // the last wave's documents, cleaned by threads with no split to start
  absl::Status st = OrderedParallel<SplitResult>(
      &pool, splits.size(), 2 * static_cast<size_t>(pool.size()),
      [&](size_t i) -> absl::StatusOr<SplitResult> {
        return ProcessSplit(env, files[splits[i].file_index], splits[i], options, &cleaners,
                            &decoders, &shared);
      },
      [&](size_t i, SplitResult&& r) -> absl::Status {
        RETURN_IF_ERROR(kept_writer->AppendBatch(r.kept));
        RETURN_IF_ERROR(reject_writer->AppendBatch(r.rejected));
        Merge(r.partial, &report);
        if (r.file_error) report.file_errors.push_back(std::move(*r.file_error));
        progress.Add(splits[i].bytes);
        return absl::OkStatus();
      },
      [&] { return shared.Help(absl::Milliseconds(1)); });
  if (!st.ok()) return Annotate(st, "clean");
  ASSIGN_OR_RETURN(auto parts, FinishAll({kept_writer.get(), reject_writer.get()}));
  report.kept_parts = std::move(parts[0]);
  report.reject_parts = std::move(parts[1]);
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
      env, JoinPath(output_dir, TaskReportName(run.task, run.tasks)),
      report.ToJson() + "\n"));
  return report;
}

}  // namespace grist::clean
