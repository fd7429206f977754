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
  // Groups of equal (tag, hi, lo): for exact and band groups, a star of pairs from the group's
  // first document; for line groups, the line when two or more documents have it.
  bool have = false;
  BucketRecord first{};
  uint64_t last_doc = 0, distinct = 0;
  auto close_group = [&]() -> absl::Status {
    if (have && first.tag == 1 && distinct >= 2) {
      ++stats[kDupLines];
      RETURN_IF_ERROR(lines_w->Add(LineRecord{first.hi, first.lo, 0}));
    }
    return absl::OkStatus();
  };
  RETURN_IF_ERROR(sorter.Finish([&](const BucketRecord& r) -> absl::Status {
    if (!have || r.tag != first.tag || r.hi != first.hi || r.lo != first.lo) {
      RETURN_IF_ERROR(close_group());
      have = true;
      first = r;
      last_doc = r.doc;
      distinct = 1;
      return absl::OkStatus();
    }
    if (r.doc == last_doc) return absl::OkStatus();
    last_doc = r.doc;
    ++distinct;
    if (r.tag != 1) {
      uint32_t kind = static_cast<uint32_t>(r.tag == 0 ? PairKind::kExact : PairKind::kNear);
      RETURN_IF_ERROR(pairs.Add(PairRecord{first.doc, r.doc, kind, 0}));
    }
    return absl::OkStatus();
  }));
  RETURN_IF_ERROR(close_group());
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
