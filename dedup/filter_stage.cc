// The dedup pipeline's filter stage (see dedup/dedup.h for the stage contract).

#include "dedup/internal/stage_context.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <queue>
#include <string>
#include <tuple>
#include <utility>
#include <vector>
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "common/config.h"
#include "common/env.h"
#include "common/hash.h"
#include "common/json_writer.h"
#include "common/ordered.h"
#include "common/progress.h"
#include "common/rng.h"
#include "common/status_macros.h"
#include "common/sysinfo.h"
#include "common/task_parts.h"
#include "common/thread_pool.h"
#include "dedup/dedup_format.h"
#include "dedup/internal/files.h"

namespace grist::dedup::internal {

namespace {

// ---------------------------------------------------------------------------------------------
// filter

std::string RemovedJson(const ClusterRecord& r, const std::string& kept_id,
                        const std::string& dup_id) {
  std::string s = "\"dedup\":{\"reason\":";
  s += r.kind == static_cast<uint32_t>(PairKind::kExact) ? "\"exact\"" : "\"near\"";
  absl::StrAppend(&s, ",\"cluster\":", r.cluster, ",\"cluster_size\":", r.cluster_size,
                  ",\"kept\":");
  AppendJsonString(&s, kept_id);
  s += ",\"duplicate_of\":";
  AppendJsonString(&s, dup_id);
  s += ",\"similarity\":";
  s += JsonDouble(r.similarity);
  s += "}";
  return s;
}

// A record serialized without extra members (AppendRecord), with `extra_json` added: the bytes
// AppendRecord writes with it (the extra members come last, before the closing brace).
std::string WithExtra(std::string_view record, std::string_view extra_json) {
  std::string out(record.substr(0, record.size() - 1));
  out.push_back(',');
  out.append(extra_json);
  out.push_back('}');
  return out;
}

}  // namespace

absl::Status RunFilter(Ctx& c) {
  Stopwatch sw;
  std::vector<uint64_t> stats = NewStats();
  const std::string merge_dir = c.Dir("merge");
  const std::string clusters_path = JoinPath(merge_dir, TaskFileName("clusters", 0, 1));
  const std::string kept_ids_path = JoinPath(merge_dir, TaskFileName("kept-ids", 0, 1));
  const std::string dup_ids_path = JoinPath(merge_dir, TaskFileName("dup-ids", 0, 1));
  if (!c.env->FileExists(clusters_path) || !c.env->FileExists(kept_ids_path) ||
      !c.env->FileExists(dup_ids_path)) {
    return absl::FailedPreconditionError(
        absl::StrCat("no merge output in ", merge_dir, ": run the 'merge' stage first"));
  }
  {
    ASSIGN_OR_RETURN(auto r, FileReader::Open(c.env, clusters_path, Kind::kClusters,
                                              sizeof(ClusterRecord)));
    RETURN_IF_ERROR(c.CheckFingerprint(*r, clusters_path));
  }
  // The removed documents, sorted by document: merge-joined in the consumer below, which sees this
  // task's documents in input order; records of other tasks' splits are read past (and checked).
  ASSIGN_OR_RETURN(auto removed, FileReader::Open(c.env, clusters_path, Kind::kClusters,
                                                  sizeof(ClusterRecord)));
  ClusterRecord next_removed{};
  bool have_removed = false;
  uint64_t last_removed = 0, read_removed = 0;
  auto advance_removed = [&]() -> absl::Status {
    ASSIGN_OR_RETURN(have_removed, removed->Next(&next_removed));
    if (have_removed) {
      if (read_removed++ > 0 && next_removed.doc <= last_removed) {
        return absl::DataLossError(absl::StrCat(clusters_path, ": removed documents out of order"));
      }
      last_removed = next_removed.doc;
    }
    return absl::OkStatus();
  };
  RETURN_IF_ERROR(advance_removed());
  // The ids written into the removed records, sorted by the removed document, streamed alike.
  struct IdStream {
    std::string path;
    std::unique_ptr<FileReader> reader;
    uint64_t key = 0;
    std::string id;
    bool valid = false;
    absl::Status Advance() {
      const uint64_t last = key;
      const bool first = !valid;
      ASSIGN_OR_RETURN(valid, reader->NextId(&key, &id));
      if (valid && !first && key <= last) {
        return absl::DataLossError(absl::StrCat(path, ": ids out of order"));
      }
      return absl::OkStatus();
    }
    // The id recorded for removed document `doc` ("" if none, as for a document without an id).
    absl::StatusOr<std::string> Of(uint64_t doc) {
      while (valid && key < doc) RETURN_IF_ERROR(Advance());
      return valid && key == doc ? id : std::string();
    }
  };
  IdStream id_streams[2];
  for (int i = 0; i < 2; ++i) {
    IdStream& st = id_streams[i];
    st.path = i == 0 ? kept_ids_path : dup_ids_path;
    ASSIGN_OR_RETURN(st.reader, FileReader::Open(c.env, st.path, Kind::kIds, 0));
    RETURN_IF_ERROR(c.CheckFingerprint(*st.reader, st.path));
    RETURN_IF_ERROR(st.Advance());
  }
  std::vector<std::pair<uint64_t, uint64_t>> dup_lines;
  if (c.opt.line_dedup) {
    ASSIGN_OR_RETURN(auto readers, OpenAll(c, "buckets", "duplines", DedupStage::kBuckets,
                                           Kind::kDupLines, sizeof(LineRecord)));
    for (auto& r : readers) {
      LineRecord l;
      while (true) {
        ASSIGN_OR_RETURN(bool more, r->Next(&l));
        if (!more) break;
        dup_lines.emplace_back(l.hi, l.lo);
      }
    }
    std::sort(dup_lines.begin(), dup_lines.end());
  }
  // The kept and removed documents: "dedup-NNNNN.jsonl.zst" from one task, else
  // TaskPartName("dedup", I, N) + "-NNNNN.jsonl.zst" (common/task_parts.h).
  constexpr char kStem[] = "dedup";
  const std::string prefix =
      c.run.tasks == 1 ? std::string(kStem) : TaskPartName(kStem, c.run.task, c.run.tasks);
  const std::string removed_dir = JoinPath(c.output_dir, "removed");
  RETURN_IF_ERROR(c.env->CreateDirs(c.output_dir));
  RETURN_IF_ERROR(c.env->CreateDirs(removed_dir));
  // Parts of an earlier run: this task's own, and any written with another task count.
  for (const std::string& d : {c.output_dir, removed_dir}) {
    ASSIGN_OR_RETURN(std::vector<std::string> names, c.env->ListDir(d));
    for (const std::string& n : names) {
      if (n.rfind(absl::StrCat(kStem, "-"), 0) != 0) continue;
      const std::optional<TaskPart> p = ParseTaskPart(n, kStem);
      const bool own = n.rfind(prefix + "-", 0) == 0;
      const bool other_count = c.run.tasks == 1 || !p || p->tasks != c.run.tasks;
      if (own || other_count) RETURN_IF_ERROR(c.env->RemoveFile(JoinPath(d, n)));
    }
  }
  OutputOptions output = c.opt.output;
  // The parts' zstd off the single writer's path, one compressing thread per 64 MiB of the
  // budget: a second thread raised the filter's peak RSS by about 15 MB (its frames in flight and
  // zstd contexts in each of the two writers; Wikinews x4, 2 threads), which at --memory-limit 64
  // took the stage to 1.13x the budget. Below 128 MiB the writers compress on their own thread.
  output.compress_threads = static_cast<int>(
      std::clamp<uint64_t>(c.opt.memory_limit / (64ull << 20), 1, std::max(1, c.pool->size())));
  ASSIGN_OR_RETURN(auto kept_w, RecordWriter::Open(c.env, c.output_dir, prefix, output));
  ASSIGN_OR_RETURN(auto removed_w, RecordWriter::Open(c.env, removed_dir, prefix, output));

  const std::vector<size_t> mine = TaskSplitIndices(c, c.run.task, c.run.tasks);
  uint64_t total_bytes = 0;
  for (size_t i : mine) total_bytes += c.splits[i].bytes;
  Progress progress("dedup filter", total_bytes, Progress::Unit::kBytes, !c.run.progress);
  struct Out {
    uint64_t key = 0;
    Document doc;
    std::string extra;
    int where = 0;  // 0 kept, 1 removed (duplicate), 2 rejected, 3 removed (lines)
    int reason = 0;
    uint64_t lines_removed = 0;
    // Line dedup's text, used unless the consumer finds the document removed as a duplicate.
    std::string lined_text;
    bool text_changed = false;
    // The record as kept (line dedup's text if it changed), serialized by the worker so that the
    // single writer only compresses, and the size of its text. Where the text is unchanged the
    // worker drops doc.text (text_dropped): a document the consumer then finds removed is written
    // as this record with the removal's members added (WithExtra), the same bytes as Append.
    std::string kept_record;
    uint64_t kept_text_bytes = 0;
    bool text_dropped = false;
  };
  const std::unique_ptr<SplitDecoders> decoders = PassDecoders(c, mine);
  const size_t window = SplitWindow(c, 2);
  RETURN_IF_ERROR(OrderedParallel<std::vector<Out>>(
      c.pool.get(), mine.size(), window,
      [&](size_t i) -> absl::StatusOr<std::vector<Out>> {
        std::vector<Out> outs;
        RETURN_IF_ERROR(ForEachDoc(c, mine[i], [&](uint64_t key, Document& read) -> absl::Status {
          Out o;
          o.key = key;
          o.doc = std::move(read);
          read = Document();  // the reader fills the next record into a valid Document
          const Document& doc = o.doc;
          if (!doc.error.empty()) {
            o.where = 2;
            o.extra = "\"dedup\":{\"reason\":\"rejected\",\"error\":";
            AppendJsonString(&o.extra, doc.error);
            o.extra += "}";
          } else if (!dup_lines.empty()) {
            std::string text;
            text.reserve(doc.text.size());
            uint64_t dropped = 0;
            ForEachLine(doc.text, [&](std::string_view line, bool newline) {
              if (!IsBlank(line)) {
                Hash128 h = Hash128Of(line);
                if (std::binary_search(dup_lines.begin(), dup_lines.end(),
                                       std::make_pair(h.high, h.low))) {
                  ++dropped;
                  return;
                }
              }
              text.append(line);
              if (newline) text.push_back('\n');
            });
            if (dropped > 0) {
              o.lines_removed = dropped;
              if (IsBlank(text)) {
                o.where = 3;
                o.extra = absl::StrCat("\"dedup\":{\"reason\":\"lines\",\"lines_removed\":",
                                       dropped, "}");
              } else {
                o.lined_text = std::move(text);
                o.text_changed = true;
              }
            }
          }
          if (o.where == 0) {
            if (o.text_changed) std::swap(o.doc.text, o.lined_text);
            AppendRecord(&o.kept_record, o.doc);
            o.kept_text_bytes = o.doc.text.size();
            if (o.text_changed) {
              std::swap(o.doc.text, o.lined_text);
            } else {
              o.doc.text = std::string();
              o.text_dropped = true;
            }
          }
          outs.push_back(std::move(o));
          return absl::OkStatus();
        }, &progress, decoders.get()));
        return outs;
      },
      [&](size_t, std::vector<Out>&& outs) -> absl::Status {
        for (Out& o : outs) {
          while (have_removed && next_removed.doc < o.key) RETURN_IF_ERROR(advance_removed());
          if (have_removed && next_removed.doc == o.key) {
            if (o.where != 2) {
              o.where = 1;
              o.lines_removed = 0;
              o.text_changed = false;
              o.reason = static_cast<int>(next_removed.kind);
              ASSIGN_OR_RETURN(std::string kept_id, id_streams[0].Of(next_removed.doc));
              ASSIGN_OR_RETURN(std::string dup_id, id_streams[1].Of(next_removed.doc));
              o.extra = RemovedJson(next_removed, kept_id, dup_id);
            }
            RETURN_IF_ERROR(advance_removed());
          }
          ++stats[kDocsIn];
          stats[kBytesIn] += o.doc.input_bytes;
          stats[kInputBytes] += o.doc.input_bytes;
          switch (o.where) {
            case 0:
              ++stats[kDocsOut];
              stats[kBytesOut] += o.kept_text_bytes;
              stats[kLinesRemoved] += o.lines_removed;
              RETURN_IF_ERROR(kept_w->AppendSerialized(o.kept_record));
              break;
            case 1:
              ++stats[kDocsRemoved];
              ++stats[o.reason == static_cast<int>(PairKind::kExact) ? kRemovedExact : kRemovedNear];
              if (o.text_dropped) {
                RETURN_IF_ERROR(removed_w->AppendSerialized(WithExtra(o.kept_record, o.extra)));
              } else {
                RETURN_IF_ERROR(removed_w->Append(o.doc, o.extra));
              }
              break;
            case 2:
              ++stats[kDocsRejected];
              RETURN_IF_ERROR(removed_w->Append(o.doc, o.extra));
              break;
            default:
              ++stats[kDocsRemoved];
              ++stats[kRemovedLines];
              stats[kLinesRemoved] += o.lines_removed;
              RETURN_IF_ERROR(removed_w->Append(o.doc, o.extra));
              break;
          }
        }
        return absl::OkStatus();
      }));
  // Read the rest, so that every task checks the whole file's checksum.
  while (have_removed) RETURN_IF_ERROR(advance_removed());
  for (IdStream& st : id_streams) {
    while (st.valid) RETURN_IF_ERROR(st.Advance());
  }
  RETURN_IF_ERROR(kept_w->Finish().status());
  RETURN_IF_ERROR(removed_w->Finish().status());
  progress.Finish();
  if (stats[kDocsIn] != stats[kDocsOut] + stats[kDocsRemoved] + stats[kDocsRejected]) {
    return absl::InternalError("dedup filter: documents in != kept + removed + rejected");
  }
  return WriteStats(c, DedupStage::kFilter, std::move(stats), sw);
}

}  // namespace grist::dedup::internal
