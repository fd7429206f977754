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
#include "common/documents_format.h"
#include "common/env.h"
#include "common/hash.h"
#include "common/json_writer.h"
#include "common/ordered.h"
#include "common/progress.h"
#include "common/record_writer.h"
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
  // A document as the worker leaves it for the single consumer, which merge-joins it with the
  // removed documents. A kept document is only its serialized record, in its split's `records`
  // buffer (so the single writer only compresses); the Document itself is kept only where the
  // consumer may need it: rejected, emptied by line dedup, or with line dedup's text (written
  // with its original text if the consumer finds it removed as a duplicate).
  struct Out {
    uint64_t key = 0;
    uint64_t input_bytes = 0;
    int where = 0;  // 0 kept, 1 removed (duplicate), 2 rejected, 3 removed (lines)
    int reason = 0;
    uint64_t lines_removed = 0;
    bool text_changed = false;
    size_t record_begin = 0, record_end = 0;  // the record as kept, in SplitOut::records
    uint64_t kept_text_bytes = 0;
    std::string extra;
    std::unique_ptr<Document> doc;
  };
  // A frame of the input part whose records all stay as they were read, as the worker found it: if
  // the consumer finds none of them removed either, the frame's compressed bytes go to the output
  // as they are (RecordWriter::AppendFrame), which saves compressing them again; the records are
  // in `records` too, for the consumer that finds one removed.
  struct PassFrame {
    size_t out_begin = 0, out_end = 0;  // its documents in SplitOut::outs
    CheckedFrame frame;
  };
  // One split's documents. Split outputs are recycled (their buffers keep their capacity): the
  // workers' allocations per document made glibc grow 16 arenas a few KiB at a time, each growth
  // an mprotect under the process's mmap lock, which took half the stage's CPU time in the kernel
  // at 16 threads on the GPU host.
  struct SplitOut {
    std::vector<Out> outs;
    std::string records;  // the kept records, each followed by '\n'
    std::vector<PassFrame> frames;
    size_t num_frames = 0;  // frames[0, num_frames) hold this split's (the rest keep capacity)
  };
  absl::Mutex pool_mu;
  std::vector<std::unique_ptr<SplitOut>> free_outs;  // guarded by pool_mu
  auto take_out = [&]() {
    {
      absl::MutexLock l(&pool_mu);
      if (!free_outs.empty()) {
        std::unique_ptr<SplitOut> o = std::move(free_outs.back());
        free_outs.pop_back();
        return o;
      }
    }
    return std::make_unique<SplitOut>();
  };
  // The frame index of each input part that has one (docs/formats/documents.md): a split of such
  // a part is a run of whole frames, each of which may pass through.
  std::vector<std::optional<std::vector<ZstdFrame>>> frame_index(c.files.size());
  {
    std::vector<bool> seen(c.files.size(), false);
    for (size_t i : mine) {
      const InputSplit& sp = c.splits[i];
      if (sp.stream_stride != 0 || seen[sp.file_index]) continue;
      seen[sp.file_index] = true;
      if (c.files[sp.file_index].format != InputFormat::kJsonlZstd) continue;
      ASSIGN_OR_RETURN(auto f, c.env->NewRandomAccessFile(c.files[sp.file_index].path));
      ASSIGN_OR_RETURN(frame_index[sp.file_index], ReadZstdFrameIndex(*f));
    }
  }
  // Finds the frames of split `i` whose documents all stay as read; keeps their compressed bytes.
  auto find_pass_frames = [&](size_t i, SplitOut* split) -> absl::Status {
    const InputSplit& sp = c.splits[i];
    const auto& index = frame_index[sp.file_index];
    if (!index.has_value()) return absl::OkStatus();
    std::unique_ptr<RandomAccessFile> file;
    size_t k = 0;  // the frame's first document in outs
    for (const ZstdFrame& fr : *index) {
      if (fr.offset < sp.begin || fr.offset >= sp.end) continue;
      const size_t end = k + fr.records;
      if (end > split->outs.size()) break;  // not one document per record line: none passes
      bool as_read = fr.records > 0;
      for (size_t j = k; j < end && as_read; ++j) {
        const Out& o = split->outs[j];
        as_read = o.where == 0 && !o.text_changed &&
                  (j == k || o.record_begin == split->outs[j - 1].record_end + 1);
      }
      if (as_read) {
        if (file == nullptr) {
          ASSIGN_OR_RETURN(file, c.env->NewRandomAccessFile(c.files[sp.file_index].path));
        }
        std::string bytes(fr.bytes, '\0');
        ASSIGN_OR_RETURN(size_t got, file->ReadAt(fr.offset, bytes.data(), fr.bytes));
        const size_t begin = split->outs[k].record_begin;
        const std::string_view content(split->records.data() + begin,
                                       split->outs[end - 1].record_end + 1 - begin);
        // The frame as read now must decode to exactly the records the filter would write (the
        // part unchanged since it was read, and its records as grist serializes them).
        absl::StatusOr<CheckedFrame> checked =
            got == fr.bytes ? CheckDataFrame(std::move(bytes), content)
                            : absl::DataLossError("short read");
        if (checked.ok()) {
          if (split->frames.size() <= split->num_frames) split->frames.emplace_back();
          PassFrame& pf = split->frames[split->num_frames++];
          pf.out_begin = k;
          pf.out_end = end;
          pf.frame = std::move(*checked);
        }
      }
      k = end;
    }
    return absl::OkStatus();
  };
  const std::unique_ptr<SplitDecoders> decoders = PassDecoders(c, mine);
  const size_t window = SplitWindow(c, 2);
  RETURN_IF_ERROR(OrderedParallel<std::unique_ptr<SplitOut>>(
      c.pool.get(), mine.size(), window,
      [&](size_t i) -> absl::StatusOr<std::unique_ptr<SplitOut>> {
        std::unique_ptr<SplitOut> split = take_out();
        split->outs.clear();
        split->records.clear();
        split->num_frames = 0;
        std::string text;
        // A record whose line is already the record as written here is copied as it is (line
        // dedup may change its text: every record is then parsed).
        auto on_line = [&](uint64_t key, const RecordReader::Line& line) -> absl::Status {
          Out& o = split->outs.emplace_back();
          o.key = key;
          o.input_bytes = line.input_bytes;
          o.record_begin = split->records.size();
          split->records.append(line.bytes);
          o.record_end = split->records.size();
          split->records.push_back('\n');
          o.kept_text_bytes = line.text_bytes;
          return absl::OkStatus();
        };
        auto on_doc = [&](uint64_t key, Document& doc) -> absl::Status {
          Out& o = split->outs.emplace_back();
          o.key = key;
          o.input_bytes = doc.input_bytes;
          if (!doc.error.empty()) {
            o.where = 2;
            o.extra = "\"dedup\":{\"reason\":\"rejected\",\"error\":";
            AppendJsonString(&o.extra, doc.error);
            o.extra += "}";
            o.doc = std::make_unique<Document>(doc);
            return absl::OkStatus();
          }
          if (!dup_lines.empty()) {
            text.clear();
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
                o.doc = std::make_unique<Document>(doc);
                return absl::OkStatus();
              }
              o.text_changed = true;
              o.doc = std::make_unique<Document>(doc);  // the original text, if found removed
              std::swap(doc.text, text);
            }
          }
          o.record_begin = split->records.size();
          AppendRecord(&split->records, doc);
          o.record_end = split->records.size();
          split->records.push_back('\n');
          o.kept_text_bytes = doc.text.size();
          return absl::OkStatus();
        };
        if (dup_lines.empty()) {
          RETURN_IF_ERROR(ForEachLineOrDoc(c, mine[i], on_line, on_doc, &progress,
                                           decoders.get()));
        } else {
          RETURN_IF_ERROR(ForEachDoc(c, mine[i], on_doc, &progress, decoders.get()));
        }
        RETURN_IF_ERROR(find_pass_frames(mine[i], split.get()));
        return split;
      },
      [&](size_t, std::unique_ptr<SplitOut>&& split) -> absl::Status {
        const std::string& records = split->records;
        size_t next_frame = 0;
        for (size_t i = 0; i < split->outs.size(); ++i) {
          if (next_frame < split->num_frames && split->frames[next_frame].out_begin == i) {
            PassFrame& pf = split->frames[next_frame++];
            while (have_removed && next_removed.doc < split->outs[i].key) {
              RETURN_IF_ERROR(advance_removed());
            }
            const Out& last = split->outs[pf.out_end - 1];
            if (!have_removed || next_removed.doc > last.key) {  // every document kept
              for (size_t j = i; j < pf.out_end; ++j) {
                const Out& o = split->outs[j];
                ++stats[kDocsIn];
                stats[kBytesIn] += o.input_bytes;
                stats[kInputBytes] += o.input_bytes;
                ++stats[kDocsOut];
                stats[kBytesOut] += o.kept_text_bytes;
              }
              RETURN_IF_ERROR(kept_w->AppendFrame(std::move(pf.frame)));
              i = pf.out_end - 1;
              continue;
            }
          }
          Out& o = split->outs[i];
          const std::string_view record(records.data() + o.record_begin,
                                        o.record_end - o.record_begin);
          while (have_removed && next_removed.doc < o.key) RETURN_IF_ERROR(advance_removed());
          if (have_removed && next_removed.doc == o.key) {
            if (o.where != 2) {
              o.where = 1;
              o.lines_removed = 0;
              o.reason = static_cast<int>(next_removed.kind);
              ASSIGN_OR_RETURN(std::string kept_id, id_streams[0].Of(next_removed.doc));
              ASSIGN_OR_RETURN(std::string dup_id, id_streams[1].Of(next_removed.doc));
              o.extra = RemovedJson(next_removed, kept_id, dup_id);
            }
            RETURN_IF_ERROR(advance_removed());
          }
          ++stats[kDocsIn];
          stats[kBytesIn] += o.input_bytes;
          stats[kInputBytes] += o.input_bytes;
          switch (o.where) {
            case 0:
              ++stats[kDocsOut];
              stats[kBytesOut] += o.kept_text_bytes;
              stats[kLinesRemoved] += o.lines_removed;
              RETURN_IF_ERROR(kept_w->AppendSerialized(record));
              break;
            case 1:
              ++stats[kDocsRemoved];
              ++stats[o.reason == static_cast<int>(PairKind::kExact) ? kRemovedExact : kRemovedNear];
              if (o.doc == nullptr) {  // the record as kept is the document as read
                RETURN_IF_ERROR(removed_w->AppendSerialized(WithExtra(record, o.extra)));
              } else {
                RETURN_IF_ERROR(removed_w->Append(*o.doc, o.extra));
              }
              break;
            case 2:
              ++stats[kDocsRejected];
              RETURN_IF_ERROR(removed_w->Append(*o.doc, o.extra));
              break;
            default:
              ++stats[kDocsRemoved];
              ++stats[kRemovedLines];
              stats[kLinesRemoved] += o.lines_removed;
              RETURN_IF_ERROR(removed_w->Append(*o.doc, o.extra));
              break;
          }
        }
        absl::MutexLock l(&pool_mu);
        free_outs.push_back(std::move(split));
        return absl::OkStatus();
      }));
  // Read the rest, so that every task checks the whole file's checksum.
  while (have_removed) RETURN_IF_ERROR(advance_removed());
  for (IdStream& st : id_streams) {
    while (st.valid) RETURN_IF_ERROR(st.Advance());
  }
  RETURN_IF_ERROR(FinishAll({kept_w.get(), removed_w.get()}).status());
  progress.Finish();
  if (stats[kDocsIn] != stats[kDocsOut] + stats[kDocsRemoved] + stats[kDocsRejected]) {
    return absl::InternalError("dedup filter: documents in != kept + removed + rejected");
  }
  return WriteStats(c, DedupStage::kFilter, std::move(stats), sw);
}

}  // namespace grist::dedup::internal
