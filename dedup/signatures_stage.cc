// The dedup pipeline's signatures stage (see dedup/dedup.h for the stage contract).

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
#include "common/shared_work.h"
#include "common/status_macros.h"
#include "common/sysinfo.h"
#include "common/thread_pool.h"
#include "dedup/dedup_format.h"
#include "dedup/internal/files.h"

namespace grist::dedup::internal {

namespace {

// ---------------------------------------------------------------------------------------------
// signatures

}  // namespace

absl::Status RunSignatures(Ctx& c) {
  Stopwatch sw;
  std::vector<uint64_t> stats = NewStats();
  const std::string dir = c.Dir("sig");
  RETURN_IF_ERROR(c.env->CreateDirs(dir));
  for (const char* stem : {"sig", "ids", "lines"}) {
    RETURN_IF_ERROR(RemoveStaleTaskFiles(c.env, dir, stem, c.run.tasks));
  }
  const uint32_t rec_size = SigRecordSize(c);
  const int bands = SigBands(c);
  const std::string sig_path = JoinPath(dir, TaskFileName("sig", c.run.task, c.run.tasks));
  const std::string ids_path = JoinPath(dir, TaskFileName("ids", c.run.task, c.run.tasks));
  ASSIGN_OR_RETURN(auto sig_w,
                   c.OpenWork(sig_path, Kind::kSignatures, rec_size, static_cast<uint32_t>(bands)));
  ASSIGN_OR_RETURN(auto ids_w, c.OpenWork(ids_path, Kind::kIds, 0));
  std::unique_ptr<FileWriter> lines_w;
  if (c.opt.line_dedup) {
    ASSIGN_OR_RETURN(lines_w, c.OpenWork(JoinPath(dir, TaskFileName("lines", c.run.task,
                                                                    c.run.tasks)),
                                         Kind::kLineHashes, sizeof(LineRecord)));
  }
  const std::vector<size_t> mine = TaskSplitIndices(c, c.run.task, c.run.tasks);
  uint64_t total_bytes = 0;
  for (size_t i : mine) total_bytes += c.splits[i].bytes;
  Progress progress("dedup signatures", total_bytes, Progress::Unit::kBytes, !c.run.progress);
  const MinHasher hasher(c.opt.num_perm, c.opt.seed);

  struct SplitOut {
    std::string sigs;
    std::vector<std::pair<uint64_t, std::string>> ids;
    std::vector<LineRecord> lines;
    uint64_t docs = 0, bad = 0, bytes = 0;
    std::vector<ShingleCache::DocSpan> shingles;  // in c.shingle_cache, by ordinal
    bool gathered = false;
  };
  ShingleCache* const cache = c.shingle_cache.get();
  // Whether keeping the shingles pays, unless told to keep them: decided over the first splits,
  // an eighth of the task's input and at most a 64th of the budget in bytes of its files.
  std::optional<KeepTrial> trial;
  if (cache != nullptr && c.opt.keep_shingles == DedupOptions::KeepShingles::kDecide) {
    trial.emplace(std::max<uint64_t>(1, std::min(total_bytes / 8, c.opt.memory_limit / 64)));
  }
  const std::unique_ptr<SplitDecoders> decoders = PassDecoders(c, mine);
  const size_t window = SplitWindow(c, 2);
  SharedWork shared;  // the last wave's documents, computed by threads with no split to start
  RETURN_IF_ERROR(OrderedParallel<SplitOut>(
      c.pool.get(), mine.size(), window,
      [&](size_t i) -> absl::StatusOr<SplitOut> {
        SplitOut out;
        out.gathered = cache != nullptr && cache->open();
        // Adds this document's shingles to the cache; the split is not kept once one does not fit.
        auto gather = [&](std::span<const uint64_t> hashes) {
          ShingleCache::DocSpan span;
          if (cache->Add(hashes, &span)) {
            out.shingles.push_back(span);
          } else {
            out.gathered = false;
            out.shingles = {};
          }
        };
        // A document's record as computed (by this thread or a helper), then accounted here.
        struct DocSig {
          SigRecord r{};
          std::vector<uint64_t> bands;
          std::vector<uint64_t> shingles;
          std::vector<std::pair<uint64_t, uint64_t>> lines;
        };
        // Computes the record of `doc` into *d: on whichever thread runs it, with that thread's
        // scratch.
        auto compute = [&](const Document& doc, uint64_t key, DocSig* d) {
          thread_local std::string scratch, exact_scratch;
          thread_local std::vector<uint64_t> sig;
          sig.resize(c.opt.num_perm);
          d->bands.resize(static_cast<size_t>(bands));
          d->r = SigRecord{};
          d->r.key = key;
          d->lines.clear();
          if (!doc.error.empty()) {
            d->r.flags = format::kFlagBadRecord;
            std::fill(d->bands.begin(), d->bands.end(), ~uint64_t{0});
            return;
          }
          Hash128 h = ExactHash(doc.text, c.opt.exact_normalize, &exact_scratch);
          d->r.exact_hi = h.high;
          d->r.exact_lo = h.low;
          if (c.opt.near) {
            ShingleHashesUnordered(doc.text, c.opt.shingle, &d->shingles, &scratch);
          } else {
            d->shingles.clear();
          }
          d->r.shingles = static_cast<uint32_t>(std::min<size_t>(d->shingles.size(), UINT32_MAX));
          if (d->shingles.empty()) {
            d->r.flags |= format::kFlagNoShingles;
            std::fill(d->bands.begin(), d->bands.end(), ~uint64_t{0});
          } else {
            hasher.Compute(d->shingles, sig.data());
            for (int b = 0; b < bands; ++b) d->bands[b] = BandHash(sig.data(), b, c.opt.rows);
          }
          if (c.opt.line_dedup) {
            ForEachLine(doc.text, [&](std::string_view line, bool) {
              if (IsBlank(line)) return;
              Hash128 lh = Hash128Of(line);
              d->lines.emplace_back(lh.high, lh.low);
            });
            std::sort(d->lines.begin(), d->lines.end());
            d->lines.erase(std::unique(d->lines.begin(), d->lines.end()), d->lines.end());
          }
        };
        // Adds a computed document to the split's output, in input order.
        auto account = [&](const Document& doc, uint64_t key, const DocSig& d) {
          ++out.docs;
          out.bytes += doc.input_bytes;
          out.ids.emplace_back(key, doc.id());
          if (!doc.error.empty()) {
            if (out.gathered) gather({});
            ++out.bad;
          } else {
            if (out.gathered) gather(d.shingles);
            for (const auto& [hi, lo] : d.lines) out.lines.push_back(LineRecord{hi, lo, key});
          }
          out.sigs.append(reinterpret_cast<const char*>(&d.r), sizeof(d.r));
          out.sigs.append(reinterpret_cast<const char*>(d.bands.data()), 8 * d.bands.size());
        };
        // The split's documents a batch at a time through `shared` (common/shared_work.h): this
        // thread from the first, threads with no split left to start (the last wave) from the
        // last, into `helped` by document; every record is added here, in input order.
        thread_local std::vector<Document> docs;
        thread_local std::vector<uint64_t> keys;
        thread_local std::vector<DocSig> helped;
        DocSig own;
        RETURN_IF_ERROR(ForEachDocBatch(
            c, mine[i], &keys, &docs,
            [&](const std::vector<uint64_t>& ks, const std::vector<Document>& ds,
                size_t n) -> absl::Status {
              const uint64_t* const batch_keys = ks.data();  // this thread's, for a helper too
              const Document* const batch = ds.data();
              return RunInOrder(
                  &shared, n, &own, &helped,
                  [&](size_t k, DocSig* d, bool) { compute(batch[k], batch_keys[k], d); },
                  [&](size_t k, const DocSig& d) {
                    account(batch[k], batch_keys[k], d);
                    return absl::OkStatus();
                  });
            },
            &progress, decoders.get()));
        return out;
      },
      [&](size_t i, SplitOut&& out) -> absl::Status {
        const size_t n = out.sigs.size() / rec_size;
        for (size_t k = 0; k < n; ++k) {
          RETURN_IF_ERROR(sig_w->AddRecord(out.sigs.data() + k * rec_size, rec_size));
        }
        for (const auto& [key, id] : out.ids) RETURN_IF_ERROR(ids_w->AddId(key, id));
        if (lines_w) {
          for (const LineRecord& l : out.lines) RETURN_IF_ERROR(lines_w->Add(l));
        }
        if (trial && trial->verdict() == KeepTrial::Verdict::kUndecided) {
          for (size_t k = 0; k < n; ++k) {
            const char* rec = out.sigs.data() + k * rec_size;
            SigRecord r;
            std::memcpy(&r, rec, sizeof(r));
            if ((r.flags & (format::kFlagBadRecord | format::kFlagNoShingles)) != 0) continue;
            trial->AddDoc(r.exact_hi, r.exact_lo, rec + sizeof(r), bands);
          }
          const InputSplit& sp = c.splits[mine[i]];
          if (trial->EndSplit(sp.bytes, sp.file_index, sp.stream_stride > 0) ==
              KeepTrial::Verdict::kAbandon) {
            cache->Abandon();
          }
        }
        if (out.gathered) cache->Keep(mine[i], std::move(out.shingles));
        stats[kDocsIn] += out.docs;
        stats[kDocsRejected] += out.bad;
        stats[kBytesIn] += out.bytes;
        stats[kInputBytes] += out.bytes;
        return absl::OkStatus();
      },
      [&] { return shared.Help(absl::Milliseconds(1)); }));
  if (cache != nullptr) {
    if (trial) {
      stats[kTrialSplits] = trial->splits();
      stats[kTrialCandidateSplits] = trial->candidate_splits();
    }
    stats[kShinglesKept] = cache->abandoned() ? 0 : 1;
    stats[kSplitsKept] = cache->splits_kept();
    if (cache->abandoned()) c.shingle_cache.reset();  // its memory back now
  }
  RETURN_IF_ERROR(sig_w->Finish());
  RETURN_IF_ERROR(ids_w->Finish());
  if (lines_w) RETURN_IF_ERROR(lines_w->Finish());
  progress.Finish();
  return WriteStats(c, DedupStage::kSignatures, std::move(stats), sw);
}


}  // namespace grist::dedup::internal
