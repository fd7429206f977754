// The shared context of the dedup stages (dedup/*_stage.cc): the resolved options, the input
// splits, the work directory and its fingerprint, per-stage counters, and the helpers every stage
// uses to read documents and the intermediate files of the stage before it.
//
// Contract: a Ctx is made once per stage run by MakeCtx and used by one stage on one thread (its
// pool runs the stage's parallel parts). Every intermediate file a stage writes carries the Ctx's
// fingerprint (options, inputs and splits); a stage refuses files of another fingerprint with
// FailedPrecondition naming the file. Counters are written per task to work/stats and summed by
// the report stage. Private to grist::dedup.
#ifndef GRIST_DEDUP_INTERNAL_STAGE_CONTEXT_H_
#define GRIST_DEDUP_INTERNAL_STAGE_CONTEXT_H_

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "common/env.h"
#include "common/hash.h"
#include "common/progress.h"
#include "common/records.h"
#include "common/shared_work.h"
#include "common/rng.h"
#include "common/status_macros.h"
#include "common/sysinfo.h"
#include "common/thread_pool.h"
#include "dedup/dedup.h"
#include "dedup/dedup_format.h"
#include "dedup/internal/files.h"
#include "dedup/internal/shingle_cache.h"

namespace grist::dedup::internal {

using format::BucketRecord;
using format::ClusterRecord;
using format::EdgeRecord;
using format::Kind;
using format::LineRecord;
using format::PairKind;
using format::PairRecord;
using format::SigRecord;

enum StatSlot : size_t {
  kWallUs,
  kPeakRss,
  kInputBytes,
  kDocsIn,
  kDocsOut,
  kDocsRejected,
  kDocsRemoved,
  kBytesIn,
  kBytesOut,
  kRemovedExact,
  kRemovedNear,
  kRemovedLines,
  kLinesRemoved,
  kClusters,
  kCandidatePairs,
  kExactPairs,
  kVerifiedPairs,
  kDupLines,
  kVerifyPasses,
  kSpilledSetBytes,
  kMergeRounds,
  kSetsFromInput,
  kTrialSplits,
  kTrialCandidateSplits,
  kShinglesKept,
  kSplitsKept,
  kNumSlots,
};
// After kNumSlots: (cluster size, count) pairs (merge stage).

struct Ctx {
  Env* env;
  DedupOptions opt;  // resolved
  RunOptions run;
  std::string output_dir;
  std::string work;
  std::vector<InputFile> files;
  std::vector<InputSplit> splits;
  uint64_t fingerprint = 0;
  std::unique_ptr<ThreadPool> pool;
  // Set by RunDedup (all stages in this process) with near dedup and verification: the shingle
  // hashes the signatures stage keeps for the clusters stage, which frees it (shingle_cache.h).
  std::unique_ptr<ShingleCache> shingle_cache;
  // Whether the stages' work files are synced before they are renamed. RunDedup without keep_work
  // clears the work directory before its first stage and after its last, so no later run reads
  // them: they are then scratch (checksummed, not synced; docs/formats/dedup.md). The outputs
  // (the parts, the report) are synced either way.
  bool sync_work = true;

  std::string Dir(const char* sub) const { return JoinPath(work, sub); }
  // A writer of a work file of this run: synced unless the work is scratch (sync_work).
  absl::StatusOr<std::unique_ptr<FileWriter>> OpenWork(const std::string& path, Kind kind,
                                                       uint32_t record_size,
                                                       uint32_t aux = 0) const {
    return FileWriter::Open(env, path, Header(kind, record_size, aux), sync_work);
  }
  FileHeader Header(Kind kind, uint32_t record_size, uint32_t aux = 0) const {
    FileHeader h;
    h.kind = kind;
    h.record_size = record_size;
    h.aux = aux;
    h.task = static_cast<uint32_t>(run.task);
    h.tasks = static_cast<uint32_t>(run.tasks);
    h.fingerprint = fingerprint;
    return h;
  }
  absl::Status CheckFingerprint(const FileReader& r, const std::string& path) const {
    if (r.header().fingerprint != fingerprint) {
      return absl::FailedPreconditionError(absl::StrCat(
          path, " was written for different inputs or dedup options; clear the work directory ",
          work, " or use the options of that run"));
    }
    return absl::OkStatus();
  }
};


uint64_t OptionsFingerprint(const DedupOptions& o);

absl::StatusOr<Ctx> MakeCtx(Env* env, const std::vector<std::string>& inputs,
                            const std::string& output_dir, const DedupOptions& options,
                            const RunOptions& run);

// How many input splits the stages that read documents (signatures, the verification spill,
// filter) keep in flight: two per thread, but at most a quarter of the budget's worth of input
// (the largest planned split each, split_bytes at most), and at least one.
size_t SplitWindow(const Ctx& c, int per_thread);

// Global indices of the splits task `task` of `tasks` processes.
std::vector<size_t> TaskSplitIndices(const Ctx& c, int task, int tasks);

inline uint64_t MakeKey(size_t split, uint64_t ordinal) {
  return (static_cast<uint64_t>(split) << format::kOrdinalBits) | ordinal;
}
inline size_t SplitOfKey(uint64_t key) { return static_cast<size_t>(key >> format::kOrdinalBits); }

// The part of `parts` that a key (tag, hi, lo) belongs to. One part (an unstaged run, a run of
// one task) needs no hashing: the buckets stage asks twice per band of each signature, and the
// three mixes and the 64-bit division took most of its CPU time.
inline uint64_t Partition(uint64_t tag, uint64_t hi, uint64_t lo, int parts) {
  if (parts == 1) return 0;
  uint64_t x = SplitMix64(SplitMix64(tag ^ 0x9e37) ^ hi) ^ lo;
  return SplitMix64(x) % static_cast<uint64_t>(parts);
}

// The SplitDecoders of a pass over the splits `indices` (ascending) of c.splits, holding at most
// an eighth of the memory budget of decoded pieces (common/split_decoders.h).
std::unique_ptr<SplitDecoders> PassDecoders(const Ctx& c, const std::vector<size_t>& indices);

// A reader of split `split_index` of the context's inputs (through `decoders` when given).
inline absl::StatusOr<std::unique_ptr<RecordReader>> OpenSplitReader(const Ctx& c,
                                                                     size_t split_index,
                                                                     SplitDecoders* decoders) {
  const InputSplit& split = c.splits[split_index];
  return OpenRecordReader(c.env, c.files[split.file_index], split, c.opt.input, decoders);
}

// The key of record `ordinal` of split `split_index`, or ResourceExhausted naming the file when
// the split holds more records than a key can number.
inline absl::StatusOr<uint64_t> SplitKey(const Ctx& c, size_t split_index, uint64_t ordinal) {
  if (ordinal >= (uint64_t{1} << format::kOrdinalBits)) {
    return absl::ResourceExhaustedError(absl::StrCat(
        c.files[c.splits[split_index].file_index].path, ": too many records in one split"));
  }
  return MakeKey(split_index, ordinal);
}

// Adds a split's bytes to a Progress as its reader consumes them, never more than the split's.
class SplitProgress {
 public:
  SplitProgress(Progress* progress, uint64_t split_bytes)
      : progress_(progress), split_bytes_(split_bytes) {}
  // The reader has consumed `upto` bytes (the split's size at its end).
  void Report(uint64_t upto) {
    upto = std::min(upto, split_bytes_);
    if (progress_ != nullptr && upto > reported_) progress_->Add(upto - reported_);
    reported_ = std::max(reported_, upto);
  }

 private:
  Progress* progress_;
  uint64_t split_bytes_;
  uint64_t reported_ = 0;
};

// Reads every document of split `split_index`, calling fn(key, doc) (through `decoders`, the
// pass's PassDecoders, when given); fn may take the Document (moving from it leaves a Document
// that fn must reset, e.g. `doc = Document()`). With `progress`, adds the
// split's bytes as stored (compressed bytes of a compressed input, what a progress total made of
// split sizes counts): the reader's consumed bytes as it goes, capped, the rest at the end.
template <typename Fn>
absl::Status ForEachDoc(const Ctx& c, size_t split_index, Fn fn, Progress* progress = nullptr,
                        SplitDecoders* decoders = nullptr) {
  const InputSplit& split = c.splits[split_index];
  ASSIGN_OR_RETURN(auto reader, OpenSplitReader(c, split_index, decoders));
  Document doc;
  uint64_t ordinal = 0;
  SplitProgress report(progress, split.bytes);
  while (true) {
    ASSIGN_OR_RETURN(bool more, reader->Next(&doc));
    report.Report(more ? reader->bytes_consumed() : split.bytes);
    if (!more) break;
    ASSIGN_OR_RETURN(const uint64_t key, SplitKey(c, split_index, ordinal));
    RETURN_IF_ERROR(fn(key, doc));
    ++ordinal;
  }
  return absl::OkStatus();
}

// As ForEachDoc, a batch of documents at a time: fn(keys, docs, n) with the batch in the first n
// of `*keys` and `*docs` (the caller's, refilled batch after batch: a Document keeps its
// buffers), about kSharedWorkBatchBytes of text each (common/shared_work.h). A read error is
// returned before the documents read with it are handed over.
template <typename Fn>
absl::Status ForEachDocBatch(const Ctx& c, size_t split_index, std::vector<uint64_t>* keys,
                             std::vector<Document>* docs, Fn fn, Progress* progress = nullptr,
                             SplitDecoders* decoders = nullptr) {
  const InputSplit& split = c.splits[split_index];
  ASSIGN_OR_RETURN(auto reader, OpenSplitReader(c, split_index, decoders));
  uint64_t ordinal = 0;
  SplitProgress report(progress, split.bytes);
  for (bool more = true; more;) {
    size_t n = 0;
    uint64_t bytes = 0;
    while (bytes < kSharedWorkBatchBytes) {
      if (docs->size() <= n) docs->emplace_back();
      if (keys->size() <= n) keys->emplace_back();
      ASSIGN_OR_RETURN(more, reader->Next(&(*docs)[n]));
      report.Report(more ? reader->bytes_consumed() : split.bytes);
      if (!more) break;
      ASSIGN_OR_RETURN((*keys)[n], SplitKey(c, split_index, ordinal));
      bytes += (*docs)[n].text.size();
      ++ordinal;
      ++n;
    }
    if (n > 0) RETURN_IF_ERROR(fn(*keys, *docs, n));
  }
  return absl::OkStatus();
}

// As ForEachDoc, but a record whose line is exactly the record as grist writes it comes as that
// line, unparsed (RecordReader::NextLineOrDoc): line_fn(key, line) for those, doc_fn(key, doc) for
// the others.
template <typename LineFn, typename DocFn>
absl::Status ForEachLineOrDoc(const Ctx& c, size_t split_index, LineFn line_fn, DocFn doc_fn,
                              Progress* progress = nullptr, SplitDecoders* decoders = nullptr) {
  const InputSplit& split = c.splits[split_index];
  ASSIGN_OR_RETURN(auto reader, OpenSplitReader(c, split_index, decoders));
  Document doc;
  RecordReader::Line line;
  uint64_t ordinal = 0;
  SplitProgress report(progress, split.bytes);
  while (true) {
    bool as_line = false;
    ASSIGN_OR_RETURN(bool more, reader->NextLineOrDoc(&line, &doc, &as_line));
    report.Report(more ? reader->bytes_consumed() : split.bytes);
    if (!more) break;
    ASSIGN_OR_RETURN(const uint64_t key, SplitKey(c, split_index, ordinal));
    if (as_line) {
      RETURN_IF_ERROR(line_fn(key, line));
    } else {
      RETURN_IF_ERROR(doc_fn(key, doc));
    }
    ++ordinal;
  }
  return absl::OkStatus();
}

// As ForEachDoc without progress, for the documents of `keys` alone (sorted keys of split
// `split_index`): `fn(key, doc)` sees each of them in order, and the split's other records are
// passed over without being parsed (RecordReader::Skip). *input_bytes gets the input bytes of
// every record of the split, read or passed over; *found the number of keys found (fewer than
// keys.size() if the split does not hold them all: the caller's error).
template <typename Fn>
absl::Status ForEachWantedDoc(const Ctx& c, size_t split_index, const std::vector<uint64_t>& keys,
                              Fn fn, uint64_t* input_bytes, size_t* found,
                              SplitDecoders* decoders = nullptr) {
  ASSIGN_OR_RETURN(auto reader, OpenSplitReader(c, split_index, decoders));
  Document doc;
  uint64_t ordinal = 0;
  *found = 0;
  while (true) {
    // The key the next record would have (its split and ordinal; checked once it is read).
    const bool wanted = *found < keys.size() && keys[*found] == MakeKey(split_index, ordinal);
    uint64_t bytes = 0;
    bool more = false;
    if (wanted) {
      ASSIGN_OR_RETURN(more, reader->Next(&doc));
      bytes = doc.input_bytes;
    } else {
      ASSIGN_OR_RETURN(more, reader->Skip(&bytes));
    }
    if (!more) break;
    ASSIGN_OR_RETURN(const uint64_t key, SplitKey(c, split_index, ordinal));
    *input_bytes += bytes;
    if (wanted) {
      RETURN_IF_ERROR(fn(key, doc));
      ++*found;
    }
    ++ordinal;
  }
  return absl::OkStatus();
}

// Removes outputs "<stem>-IIIII-of-MMMMM.bin" of an earlier run of this stage with another task
// count M != tasks (they would make the next stage's task set ambiguous).
absl::Status RemoveStaleTaskFiles(Env* env, const std::string& dir, const std::string& stem,
                                  int tasks);

// The name of an exact-normalization mode as the config spells it (none, whitespace, lower).
const char* ExactNormalizeName(ExactNormalize m);

inline std::vector<uint64_t> NewStats() { return std::vector<uint64_t>(kNumSlots, 0); }

// Writes this task's counters of `stage` (wall time and peak RSS filled in) to work/stats.
absl::Status WriteStats(const Ctx& c, DedupStage stage, std::vector<uint64_t> stats,
                        const Stopwatch& sw);

// Every task's counters of `stage`, in task order.
absl::StatusOr<std::vector<std::vector<uint64_t>>> ReadStats(const Ctx& c, DedupStage stage);

// Opens every task output `stem` of the producing stage in `dir`, checking the fingerprint.
absl::StatusOr<std::vector<std::unique_ptr<FileReader>>> OpenAll(const Ctx& c, const char* sub,
                                                                const std::string& stem,
                                                                DedupStage producer, Kind kind,
                                                                uint32_t record_size);

// The LSH bands a signatures record holds: the resolved bands with near dedup, else none.
int SigBands(const Ctx& c);
// Bytes of one signatures record: SigRecord and SigBands(c) band hashes. The signatures stage
// hashes each band of the MinHash as it computes it, so the buckets stage reads 8 bytes per band
// instead of the whole MinHash (896 bytes at 112 permutations) and hashes nothing.
uint32_t SigRecordSize(const Ctx& c);
// The hash of band `band` (rows `rows`) of a MinHash signature: its bucket in that band.
uint64_t BandHash(const uint64_t* signature, int band, int rows);

inline bool IsAsciiSpace(unsigned char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

// Hash128Of(NormalizeForExact(text, mode)), without building a new string per document: the
// normalized text goes to `scratch` (grown, never shrunk), branch-free per byte; kNone hashes the
// text itself.
Hash128 ExactHash(std::string_view text, ExactNormalize mode, std::string* scratch);

// Calls fn(line) for each '\n'-terminated line of text (the last one may lack the newline). The
// view excludes the newline.
template <typename Fn>
void ForEachLine(std::string_view text, Fn fn) {
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    size_t end = nl == std::string_view::npos ? text.size() : nl;
    fn(text.substr(pos, end - pos), nl != std::string_view::npos);
    pos = end + 1;
  }
}

inline bool IsBlank(std::string_view line) {
  for (unsigned char ch : line) {
    if (!IsAsciiSpace(ch)) return false;
  }
  return true;
}

// The stages, each over a Ctx made for it (dedup/<name>_stage.cc).
absl::Status RunSignatures(Ctx& c);
absl::Status RunBuckets(Ctx& c);
absl::Status RunClusters(Ctx& c);
absl::Status RunMerge(Ctx& c);
absl::Status RunFilter(Ctx& c);
absl::StatusOr<DedupReport> RunReport(Ctx& c);
// The report's parameters (permutations, bands, rows, threshold, budget, SIMD target).
void FillReportParams(const Ctx& c, DedupReport* r);
// Removes what the stages write in `work` (and `work` itself when that leaves it empty); anything
// else a user put there is left alone.
absl::Status ClearWork(Env* env, const std::string& work);

}  // namespace grist::dedup::internal

#endif  // GRIST_DEDUP_INTERNAL_STAGE_CONTEXT_H_
