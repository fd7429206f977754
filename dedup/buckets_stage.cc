// The dedup pipeline's buckets stage (see dedup/dedup.h for the stage contract).

#include "dedup/internal/stage_context.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <queue>
#include <span>
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
#include "common/thread_pool.h"
#include "dedup/dedup_format.h"
#include "dedup/internal/files.h"

namespace grist::dedup::internal {

namespace {

// ---------------------------------------------------------------------------------------------
// buckets

// The pass over the sorted bucket records, group by group (equal tag, hi and lo): for an exact or
// band group, a star of pairs from its first document to each other distinct one; for a line
// group, the line once when two or more distinct documents have it. Fed the records of whole
// groups in sorted order; Close after the last.
class Grouper {
 public:
  // pair(PairRecord) and line(LineRecord) take what the records make, each returning a status.
  template <typename Pair, typename Line>
  absl::Status Feed(const BucketRecord& r, Pair&& pair, Line&& line) {
    if (!have_ || r.tag != first_.tag || r.hi != first_.hi || r.lo != first_.lo) {
      RETURN_IF_ERROR(Close(line));
      have_ = true;
      first_ = r;
      last_doc_ = r.doc;
      distinct_ = 1;
      return absl::OkStatus();
    }
    if (r.doc == last_doc_) return absl::OkStatus();
    last_doc_ = r.doc;
    ++distinct_;
    if (r.tag == 1) return absl::OkStatus();
    const auto kind = static_cast<uint32_t>(r.tag == 0 ? PairKind::kExact : PairKind::kNear);
    return pair(PairRecord{first_.doc, r.doc, kind, 0});
  }
  template <typename Line>
  absl::Status Close(Line&& line) {
    const bool dup_line = have_ && first_.tag == 1 && distinct_ >= 2;
    have_ = false;
    return dup_line ? line(LineRecord{first_.hi, first_.lo, 0}) : absl::OkStatus();
  }

 private:
  bool have_ = false;
  BucketRecord first_{};
  uint64_t last_doc_ = 0, distinct_ = 0;
};

bool SameGroup(const BucketRecord& a, const BucketRecord& b) {
  return a.tag == b.tag && a.hi == b.hi && a.lo == b.lo;
}

// What one range of whole groups made, kept for the in-order hand-over.
struct GroupOutput {
  std::vector<PairRecord> pairs;
  std::vector<LineRecord> lines;
};

// The group pass over `recs` (sorted, whole groups) on `pool`: cut into ranges of whole groups,
// each passed on its own thread into its GroupOutput; returned in range order, which is the order
// one Grouper over all of them makes them in. At 16 threads this pass, one thread over ~300 Ki
// records, was one of the stage's serial steps (about 2 ms on an H100 host, 2026-12-06).
std::vector<GroupOutput> GroupRanges(std::span<const BucketRecord> recs, ThreadPool* pool) {
  constexpr size_t kMinRange = 1 << 12;
  const size_t threads = pool != nullptr ? static_cast<size_t>(pool->size()) : 1;
  const size_t parts = std::clamp<size_t>(recs.size() / kMinRange, 1, 4 * threads);
  std::vector<size_t> cut(parts + 1, recs.size());
  cut[0] = 0;
  for (size_t k = 1; k < parts; ++k) {
    size_t c = std::max(cut[k - 1], recs.size() * k / parts);
    while (c > 0 && c < recs.size() && SameGroup(recs[c - 1], recs[c])) ++c;
    cut[k] = c;
  }
  std::vector<GroupOutput> out(parts);
  (void)ParallelFor(pool, parts, [&](size_t k) {
    GroupOutput& o = out[k];
    Grouper g;
    auto pair = [&](const PairRecord& p) {
      o.pairs.push_back(p);
      return absl::OkStatus();
    };
    auto line = [&](const LineRecord& l) {
      o.lines.push_back(l);
      return absl::OkStatus();
    };
    for (size_t i = cut[k]; i < cut[k + 1]; ++i) (void)g.Feed(recs[i], pair, line);
    (void)g.Close(line);
    return absl::OkStatus();
  });
  return out;
}

}  // namespace

absl::Status RunBuckets(Ctx& c) {
  Stopwatch sw;
  std::vector<uint64_t> stats = NewStats();
  const int J = c.run.task, M = c.run.tasks;
  const std::string dir = c.Dir("buckets");
  const std::string tmp = c.Dir("tmp");
  RETURN_IF_ERROR(c.env->CreateDirs(dir));
  RETURN_IF_ERROR(c.env->CreateDirs(tmp));
  for (const char* stem : {"pairs", "duplines"}) {
    RETURN_IF_ERROR(RemoveStaleTaskFiles(c.env, dir, stem, M));
  }
  const uint32_t rec_size = SigRecordSize(c);
  ASSIGN_OR_RETURN(auto sig_readers, OpenAll(c, "sig", "sig", DedupStage::kSignatures,
                                             Kind::kSignatures, rec_size));
  const int bands = SigBands(c);
  std::vector<std::unique_ptr<FileReader>> line_readers;
  if (c.opt.line_dedup) {
    ASSIGN_OR_RETURN(line_readers, OpenAll(c, "sig", "lines", DedupStage::kSignatures,
                                           Kind::kLineHashes, sizeof(LineRecord)));
  }
  // A quarter of the budget for the bucket records, an eighth for the pairs (the rest is the
  // process itself, the readers and writers, and the allocator's slack). The shingles the
  // signatures stage kept for the clusters stage (RunDedup: at most an eighth) come out of the
  // quarter: they stay only if the records, sorted in memory (a second buffer of their size),
  // fit beside them; else they are dropped, the sorter keeps its whole quarter, and the clusters
  // stage reads the candidates' splits again.
  uint64_t sorter_bytes = c.opt.memory_limit / 4;
  if (c.shingle_cache) {
    uint64_t records = 0;
    for (const auto& r : sig_readers) records += r->records() * (1 + static_cast<uint64_t>(bands));
    for (const auto& r : line_readers) records += r->records();
    const uint64_t need = 2 * records * sizeof(BucketRecord);
    const uint64_t held = c.shingle_cache->bytes();
    if (held < sorter_bytes && need <= sorter_bytes - held) {
      sorter_bytes -= held;
    } else {
      c.shingle_cache.reset();
    }
  }
  internal::ExternalSorter<BucketRecord> sorter(
      c.env, tmp, absl::StrFormat("buckets-%05d", J), sorter_bytes, c.pool.get());
  // The records to sort, made from the signature and line records a batch at a time: each batch
  // read in order by this thread, then cut into chunks that the pool's threads count, then make
  // straight into the sorter's buffer at once (ExternalSorter::AddChunks): the same records in the
  // same order as one thread making them. At 16 threads this loop, one thread making 315 Ki
  // records and faulting in their buffer, was most of the stage. A batch holds at most 4 MiB of
  // records (a 64th of a smaller budget), beside the sorter's.
  constexpr size_t kChunkRecords = 1024;
  const uint64_t batch_bytes = std::min<uint64_t>(4ull << 20, c.opt.memory_limit / 64);
  std::string batch;
  // make(record, out) makes the bucket records of one input record and returns how many: written
  // to out[0, n) unless out is null (counting).
  using Make = std::function<size_t(const char*, BucketRecord*)>;
  // Reads every record of `readers` (of `size` bytes each) and adds what make() makes of each.
  auto add_all = [&](std::vector<std::unique_ptr<FileReader>>& readers, size_t size,
                     const Make& make) -> absl::Status {
    const size_t per_batch =
        std::max<size_t>(kChunkRecords, batch_bytes / size / kChunkRecords * kChunkRecords);
    batch.resize(per_batch * size);
    for (auto& r : readers) {
      for (bool more = true; more;) {
        size_t n = 0;
        while (n < per_batch) {
          ASSIGN_OR_RETURN(more, r->Next(batch.data() + n * size));
          if (!more) break;
          ++n;
        }
        stats[kInputBytes] += n * size;
        const size_t chunks = (n + kChunkRecords - 1) / kChunkRecords;
        auto each = [&](size_t k, auto&& fn) {
          for (size_t i = k * kChunkRecords; i < std::min(n, (k + 1) * kChunkRecords); ++i) {
            fn(batch.data() + i * size);
          }
        };
        std::vector<size_t> counts(chunks, 0);
        RETURN_IF_ERROR(ParallelFor(c.pool.get(), chunks, [&](size_t k) {
          each(k, [&](const char* rec) { counts[k] += make(rec, nullptr); });
          return absl::OkStatus();
        }));
        RETURN_IF_ERROR(sorter.AddChunks(counts, [&](size_t k, BucketRecord* out) {
          each(k, [&](const char* rec) { out += make(rec, out); });
        }));
      }
    }
    return absl::OkStatus();
  };
  RETURN_IF_ERROR(add_all(sig_readers, rec_size, [&](const char* rec, BucketRecord* out) {
    SigRecord s;
    std::memcpy(&s, rec, sizeof(s));
    if (s.flags & format::kFlagBadRecord) return size_t{0};
    size_t made = 0;
    if (c.opt.exact && Partition(0, s.exact_hi, s.exact_lo, M) == static_cast<uint64_t>(J)) {
      if (out != nullptr) out[made] = BucketRecord{0, s.exact_hi, s.exact_lo, s.key};
      ++made;
    }
    if (s.flags & format::kFlagNoShingles) return made;
    const char* band_hashes = rec + sizeof(SigRecord);
    for (int b = 0; b < bands; ++b) {
      uint64_t h;
      std::memcpy(&h, band_hashes + 8 * static_cast<size_t>(b), 8);
      const uint64_t tag = 2 + static_cast<uint64_t>(b);
      if (Partition(tag, 0, h, M) == static_cast<uint64_t>(J)) {
        if (out != nullptr) out[made] = BucketRecord{tag, 0, h, s.key};
        ++made;
      }
    }
    return made;
  }));
  if (c.opt.line_dedup) {
    RETURN_IF_ERROR(add_all(line_readers, sizeof(LineRecord),
                            [&](const char* rec, BucketRecord* out) {
      LineRecord l;
      std::memcpy(&l, rec, sizeof(l));
      if (Partition(1, l.hi, l.lo, M) != static_cast<uint64_t>(J)) return size_t{0};
      if (out != nullptr) *out = BucketRecord{1, l.hi, l.lo, l.doc};
      return size_t{1};
    }));
  }
  internal::ExternalSorter<PairRecord> pairs(c.env, tmp, absl::StrFormat("pairs-%05d", J),
                                             c.opt.memory_limit / 8, c.pool.get());
  ASSIGN_OR_RETURN(auto lines_w, c.OpenWork(JoinPath(dir, TaskFileName("duplines", J, M)),
                                            Kind::kDupLines, sizeof(LineRecord)));
  // The groups (Grouper): in ranges on the pool's threads when the records are all in memory,
  // their pairs and lines then handed on in range order; else one pass as they are merged.
  auto add_pair = [&](const PairRecord& p) { return pairs.Add(p); };
  auto add_line = [&](const LineRecord& l) {
    ++stats[kDupLines];
    return lines_w->Add(l);
  };
  // The ranges' pairs wait in memory for their turn: a window of records at a time, of whole
  // groups, so about batch_bytes of pairs at most (each record makes at most one); a window widens
  // only to hold a larger group whole, whose records are in memory already.
  const size_t window = std::max<size_t>(1, batch_bytes / sizeof(PairRecord));
  Grouper grouper;
  RETURN_IF_ERROR(sorter.FinishWhole(
      [&](std::span<const BucketRecord> recs) -> absl::Status {
        for (size_t b = 0; b < recs.size();) {
          size_t e = std::min(recs.size(), b + window);
          while (e < recs.size() && SameGroup(recs[e - 1], recs[e])) ++e;
          for (const GroupOutput& o : GroupRanges(recs.subspan(b, e - b), c.pool.get())) {
            for (const PairRecord& p : o.pairs) RETURN_IF_ERROR(add_pair(p));
            for (const LineRecord& l : o.lines) RETURN_IF_ERROR(add_line(l));
          }
          b = e;
        }
        return absl::OkStatus();
      },
      [&](const BucketRecord& r) { return grouper.Feed(r, add_pair, add_line); }));
  RETURN_IF_ERROR(grouper.Close(add_line));
  RETURN_IF_ERROR(lines_w->Finish());
  ASSIGN_OR_RETURN(auto pairs_w, c.OpenWork(JoinPath(dir, TaskFileName("pairs", J, M)),
                                            Kind::kPairs, sizeof(PairRecord)));
  bool have_pair = false;
  PairRecord prev{};
  RETURN_IF_ERROR(pairs.Finish([&](const PairRecord& p) -> absl::Status {
    if (have_pair && p.a == prev.a && p.b == prev.b) return absl::OkStatus();
    have_pair = true;
    prev = p;
    return pairs_w->Add(p);
  }));
  RETURN_IF_ERROR(pairs_w->Finish());
  return WriteStats(c, DedupStage::kBuckets, std::move(stats), sw);
}


}  // namespace grist::dedup::internal
