// The dedup pipeline's clusters stage (see dedup/dedup.h for the stage contract).

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
#include "common/status_macros.h"
#include "common/sysinfo.h"
#include "common/thread_pool.h"
#include "dedup/dedup_format.h"
#include "dedup/internal/files.h"
#include "dedup/internal/minhash_kernel.h"
#include "dedup/internal/shingle_cache.h"

namespace grist::dedup::internal {

namespace {

// ---------------------------------------------------------------------------------------------
// clusters
//
// Bounded memory, whatever the number of duplicates:
//   1. the task's distinct pairs go to a temporary pairs file (sorted by (a, b)) and the keys of
//      the documents in near pairs to an external sorter;
//   2. the sets of those documents (sorted distinct shingle hashes, or signatures without
//      verification) are made from the shingle hashes the signatures stage kept (Ctx's
//      shingle_cache: all stages in one process, within an eighth of the budget) or recomputed
//      from the input, split by split, and held in key order in memory while they fit an eighth
//      of the budget, else spilled to a checksummed sets file (format::Kind::kShingleSets);
//   3. the pairs are verified block by block: a block of pairs is read, and one scan of the sets
//      loads the sets of the block's first documents (a) into a cache of an eighth of the
//      budget, and batches the sets of the second documents (b > a, so their a is already loaded
//      or known to be beyond the cache) to compute the similarities. Pairs whose a did not fit
//      stay for the next block (a block nested loop). Every scan of the file reads all of it, so
//      its checksum is checked each time.

// The candidates' sets, appended in key order as pieces of serialized kShingleSets records: the
// pieces are held in memory (as they came, no copy) while they fit `limit` bytes, else written to
// the sets file at `path` (those held first, then the rest). A limit of 0 writes every set to the
// file.
class SetsSink {
 public:
  SetsSink(const Ctx& c, std::string path, uint64_t limit)
      : c_(c), path_(std::move(path)), limit_(limit) {}

  absl::Status Add(std::string&& data, uint64_t records) {
    if (w_ == nullptr && held_bytes_ + data.size() <= limit_) {
      held_bytes_ += data.size();
      held_.push_back(std::move(data));
      held_records_.push_back(records);
      return absl::OkStatus();
    }
    if (w_ == nullptr) {
      ASSIGN_OR_RETURN(w_, FileWriter::Open(c_.env, path_,
                                            c_.Header(Kind::kShingleSets, 0,
                                                      c_.opt.verify ? 0 : c_.opt.num_perm),
                                            /*sync=*/false));
      for (size_t i = 0; i < held_.size(); ++i) {
        RETURN_IF_ERROR(w_->AddSerialized(held_[i], held_records_[i]));
        std::string().swap(held_[i]);
      }
      held_.clear();
      held_records_.clear();
    }
    return w_->AddSerialized(data, records);
  }
  absl::Status Finish() { return w_ != nullptr ? w_->Finish() : absl::OkStatus(); }
  // Bytes of the sets file (0 when the sets are held in memory).
  uint64_t spilled_bytes() const { return w_ != nullptr ? w_->bytes() : 0; }
  // What names the sets in an error.
  std::string name() const {
    return w_ != nullptr ? path_ : "the candidates' sets held in memory";
  }

  // One scan of the sets in key order (after Finish): from memory, or reading the file again
  // (its header and checksum checked).
  class Scan {
   public:
    // The next set: *set views it, until the next call when read from the file, for the sink's
    // lifetime when held in memory (stable()).
    absl::StatusOr<bool> Next(uint64_t* key, std::span<const uint64_t>* set) {
      if (reader_ != nullptr) {
        ASSIGN_OR_RETURN(bool more, reader_->NextSet(key, &buffer_));
        *set = buffer_;
        return more;
      }
      while (piece_ < held_->size() && pos_ == (*held_)[piece_].size()) {
        ++piece_;
        pos_ = 0;
      }
      if (piece_ == held_->size()) return false;
      const std::string& p = (*held_)[piece_];
      format::SetRecord h;
      if (p.size() - pos_ < sizeof(h)) return absl::InternalError("dedup: short set record");
      std::memcpy(&h, p.data() + pos_, sizeof(h));
      pos_ += sizeof(h);
      if (uint64_t{h.count} * 8 > p.size() - pos_) {
        return absl::InternalError("dedup: short set record");
      }
      // Records are 16-byte headers and 8-byte values from the start of a heap buffer: aligned.
      *set = {reinterpret_cast<const uint64_t*>(p.data() + pos_), size_t{h.count}};
      pos_ += 8 * size_t{h.count};
      *key = h.key;
      return true;
    }
    // Whether the sets Next views stay where they are (held in memory, not read from the file).
    bool stable() const { return reader_ == nullptr; }

   private:
    friend class SetsSink;
    explicit Scan(const std::vector<std::string>* held) : held_(held) {}
    std::unique_ptr<FileReader> reader_;
    std::vector<uint64_t> buffer_;  // the set last read from the file
    const std::vector<std::string>* held_;
    size_t piece_ = 0, pos_ = 0;
  };
  absl::StatusOr<Scan> Open() const {
    Scan scan(&held_);
    if (w_ != nullptr) {
      ASSIGN_OR_RETURN(scan.reader_, FileReader::Open(c_.env, path_, Kind::kShingleSets, 0));
      RETURN_IF_ERROR(c_.CheckFingerprint(*scan.reader_, path_));
    }
    return scan;
  }

 private:
  const Ctx& c_;
  const std::string path_;
  const uint64_t limit_;
  std::unique_ptr<FileWriter> w_;
  std::vector<std::string> held_;       // pieces of serialized records
  std::vector<uint64_t> held_records_;  // the records in each
  uint64_t held_bytes_ = 0;
};

// Documents (sorted keys) of one input split whose sets are spilled.
struct KeyGroup {
  size_t split = 0;
  std::vector<uint64_t> keys;
};

// Appends the sets of the documents of `groups` (in key order) to `w`.
absl::Status SpillSets(const Ctx& c, const MinHasher& hasher, const std::vector<KeyGroup>& groups,
                       SetsSink* w, std::atomic<uint64_t>* bytes_read,
                       std::atomic<uint64_t>* from_input) {
  struct Out {
    std::string data;
    uint64_t records = 0;
  };
  const size_t window = SplitWindow(c, 1);
  std::vector<size_t> order;
  for (const KeyGroup& g : groups) {
    if (g.split < c.splits.size()) order.push_back(g.split);
  }
  const std::unique_ptr<SplitDecoders> decoders = PassDecoders(c, order);
  return OrderedParallel<Out>(
      c.pool.get(), groups.size(), window,
      [&](size_t g) -> absl::StatusOr<Out> {
        const KeyGroup& group = groups[g];
        if (group.split >= c.splits.size()) {
          return absl::DataLossError(absl::StrCat("dedup: document key ", group.keys[0],
                                                  " names split ", group.split,
                                                  " beyond the input plan"));
        }
        Out out;
        size_t next = 0;
        std::vector<uint64_t> set, shingles;
        std::string scratch;
        ShingleCache::SplitView kept;
        if (c.shingle_cache && c.shingle_cache->Find(group.split, &kept)) {
          // Room for every set at once (at most their hashes' size): the records are appended
          // without the string growing by copies into fresh memory.
          size_t room = 0;
          for (uint64_t key : group.keys) {
            const uint64_t ordinal = key & ((uint64_t{1} << format::kOrdinalBits) - 1);
            if (ordinal < kept.docs()) {
              room += sizeof(format::SetRecord) + 8 * kept.Doc(ordinal).size();
            }
          }
          out.data.reserve(room);
          for (uint64_t key : group.keys) {
            const uint64_t ordinal = key & ((uint64_t{1} << format::kOrdinalBits) - 1);
            if (ordinal >= kept.docs()) {
              return absl::DataLossError(absl::StrCat("dedup: document key ", key,
                                                      " is beyond the ", kept.docs(),
                                                      " documents of split ", group.split));
            }
            const std::span<const uint64_t> doc = kept.Doc(ordinal);
            set.assign(doc.begin(), doc.end());
            SortHashes(&set);
            set.erase(std::unique(set.begin(), set.end()), set.end());
            internal::AppendSetRecord(&out.data, key, set);
            ++out.records;
          }
          return out;
        }
        from_input->fetch_add(group.keys.size(), std::memory_order_relaxed);
        uint64_t split_bytes = 0;
        RETURN_IF_ERROR(ForEachWantedDoc(
            c, group.split, group.keys, [&](uint64_t key, const Document& doc) -> absl::Status {
              set.clear();
              if (doc.error.empty()) {
                if (c.opt.verify) {
                  ShingleHashes(doc.text, c.opt.shingle, &set, &scratch);
                } else {
                  ShingleHashesUnordered(doc.text, c.opt.shingle, &shingles, &scratch);
                  set.resize(static_cast<size_t>(c.opt.num_perm));
                  hasher.Compute(shingles, set.data());
                }
              }
              internal::AppendSetRecord(&out.data, key, set);
              ++out.records;
              return absl::OkStatus();
            }, &split_bytes, &next, decoders.get()));
        bytes_read->fetch_add(split_bytes, std::memory_order_relaxed);
        if (next != group.keys.size()) {
          return absl::FailedPreconditionError(absl::StrCat(
              "dedup: the input changed since the signatures stage (document ", group.keys[next],
              " not found)"));
        }
        return out;
      },
      [&](size_t, Out&& out) -> absl::Status { return w->Add(std::move(out.data), out.records); });
}

// Reusable buffers of the verification (reserved once: pages are touched only as they fill).
// Sets read from the sets file are copied into them; sets held in memory are used where they
// are, the same words counted against the same bounds (so the blocks and scans are the same).
struct VerifyBuffers {
  std::vector<uint64_t> a_arena;  // sets of loaded first documents
  std::vector<uint64_t> b_arena;  // sets of the batch of second documents
  uint64_t a_words = 0, b_words = 0;
};

// Where a loaded set lies: `ptr` when the scan's sets stay put, else at `offset` in an arena.
struct SetRef {
  const uint64_t* ptr = nullptr;
  uint64_t offset = 0, length = 0;
  const uint64_t* data(const std::vector<uint64_t>& arena) const {
    return ptr != nullptr ? ptr : arena.data() + offset;
  }
};

// Computes (*sims)[i] for the near pairs of `block` (sorted by (a, b)) with one scan of the sets
// file, and returns how many pairs of `block` (a prefix) are resolved: those whose first document
// fit in the cache, and the exact pairs among them.
absl::StatusOr<size_t> VerifyBlock(const Ctx& c, const SetsSink& sets,
                                   const std::vector<PairRecord>& block, std::vector<double>* sims,
                                   VerifyBuffers* buf, uint64_t* bytes_read) {
  const uint32_t kNear = static_cast<uint32_t>(PairKind::kNear);
  std::vector<uint64_t> a_keys;       // distinct first documents of the near pairs, sorted
  std::vector<uint32_t> a_of(block.size(), 0);
  std::vector<uint32_t> by_b;         // near pairs ordered by (b, a)
  for (size_t i = 0; i < block.size(); ++i) {
    if (block[i].kind != kNear) continue;
    if (a_keys.empty() || a_keys.back() != block[i].a) a_keys.push_back(block[i].a);
    a_of[i] = static_cast<uint32_t>(a_keys.size() - 1);
    by_b.push_back(static_cast<uint32_t>(i));
  }
  std::stable_sort(by_b.begin(), by_b.end(),
                   [&](uint32_t x, uint32_t y) { return block[x].b < block[y].b; });
  std::vector<SetRef> a_span(a_keys.size());
  size_t a_loaded = 0;  // a_keys[0, a_loaded) are in the cache
  bool a_full = false;  // a key did not fit: a_keys[a_loaded] and later wait for the next block
  uint64_t a_used = 0, b_used = 0;  // words loaded (in the arenas or counted as if)
  struct BItem {
    size_t begin, end;  // into by_b
    SetRef set;
  };
  std::vector<BItem> batch;
  buf->a_arena.clear();
  buf->b_arena.clear();
  auto flush = [&]() -> absl::Status {
    constexpr size_t kChunk = 64;
    RETURN_IF_ERROR(ParallelFor(c.pool.get(), (batch.size() + kChunk - 1) / kChunk,
                                [&](size_t chunk) -> absl::Status {
      for (size_t k = chunk * kChunk; k < std::min(batch.size(), (chunk + 1) * kChunk); ++k) {
        const BItem& item = batch[k];
        const uint64_t* y = item.set.data(buf->b_arena);
        const uint64_t ylen = item.set.length;
        for (size_t j = item.begin; j < item.end; ++j) {
          const uint32_t i = by_b[j];
          if (a_of[i] >= a_loaded) continue;  // deferred to the next block
          const SetRef& a = a_span[a_of[i]];
          const uint64_t* x = a.data(buf->a_arena);
          const uint64_t len = a.length;
          if (c.opt.verify) {
            (*sims)[i] = JaccardSorted(x, len, y, ylen);
          } else {
            (*sims)[i] = (len == 0 || ylen == 0) ? 0.0 : EstimateJaccard(x, y, c.opt.num_perm);
          }
        }
      }
      return absl::OkStatus();
    }));
    batch.clear();
    buf->b_arena.clear();
    b_used = 0;
    return absl::OkStatus();
  };
  auto missing = [&](uint64_t key) {
    return absl::DataLossError(absl::StrCat(
        sets.name(), ": corrupt dedup intermediate file: no set for candidate document ", key));
  };
  ASSIGN_OR_RETURN(SetsSink::Scan reader, sets.Open());
  const bool in_place = reader.stable();
  // Where a set just read is kept: where it is, or copied to the end of `arena`.
  auto load = [&](std::span<const uint64_t> set, std::vector<uint64_t>* arena) {
    SetRef ref;
    ref.length = set.size();
    if (in_place) {
      ref.ptr = set.data();
    } else {
      ref.offset = arena->size();
      arena->insert(arena->end(), set.begin(), set.end());
    }
    return ref;
  };
  size_t b_next = 0;
  uint64_t key = 0;
  std::span<const uint64_t> set;
  while (true) {
    ASSIGN_OR_RETURN(bool more, reader.Next(&key, &set));
    if (!more) break;
    *bytes_read += sizeof(format::SetRecord) + 8 * set.size();
    if (b_next < by_b.size() && block[by_b[b_next]].b < key) return missing(block[by_b[b_next]].b);
    if (b_next < by_b.size() && block[by_b[b_next]].b == key) {
      const size_t begin = b_next;
      while (b_next < by_b.size() && block[by_b[b_next]].b == key) ++b_next;
      if (!batch.empty() && b_used + set.size() > buf->b_words) RETURN_IF_ERROR(flush());
      batch.push_back(BItem{begin, b_next, load(set, &buf->b_arena)});
      b_used += set.size();
    }
    if (!a_full && a_loaded < a_keys.size()) {
      if (a_keys[a_loaded] < key) return missing(a_keys[a_loaded]);
      if (a_keys[a_loaded] == key) {
        if (a_loaded > 0 && a_used + set.size() > buf->a_words) {
          a_full = true;
        } else {
          a_span[a_loaded] = load(set, &buf->a_arena);
          a_used += set.size();
          ++a_loaded;
        }
      }
    }
  }
  RETURN_IF_ERROR(flush());
  if (b_next < by_b.size()) return missing(block[by_b[b_next]].b);
  if (!a_full && a_loaded < a_keys.size()) return missing(a_keys[a_loaded]);
  if (a_loaded == a_keys.size()) return block.size();
  const uint64_t cutoff = a_keys[a_loaded];
  return static_cast<size_t>(
      std::lower_bound(block.begin(), block.end(), cutoff,
                       [](const PairRecord& p, uint64_t k) { return p.a < k; }) -
      block.begin());
}

}  // namespace

absl::Status RunClusters(Ctx& c) {
  Stopwatch sw;
  std::vector<uint64_t> stats = NewStats();
  const int K = c.run.task, L = c.run.tasks;
  const uint64_t budget = c.opt.memory_limit;
  const std::string dir = c.Dir("clusters");
  const std::string tmp = c.Dir("tmp");
  RETURN_IF_ERROR(c.env->CreateDirs(dir));
  RETURN_IF_ERROR(c.env->CreateDirs(tmp));
  RETURN_IF_ERROR(RemoveStaleTaskFiles(c.env, dir, "edges", L));
  const std::string pairs_path = JoinPath(tmp, absl::StrFormat("verify-%05d-pairs.bin", K));
  const std::string sets_path = JoinPath(tmp, absl::StrFormat("verify-%05d-sets.bin", K));
  struct RemoveOnExit {
    Env* env;
    std::vector<std::string> paths;
    ~RemoveOnExit() {
      for (const std::string& p : paths) {
        if (env->FileExists(p)) (void)env->RemoveFile(p);
      }
    }
  } cleanup{c.env, {pairs_path, sets_path}};
  // The candidates' sets stay in memory while they fit an eighth of the budget (the verification
  // then holds at most three eighths: them, and its blocks and caches below), else go to the file.
  SetsSink sets(c, sets_path, c.opt.force_spilled_sets ? 0 : budget / 8);

  // 1. Distinct pairs of this task's partition -> pairs file; candidate documents -> key sorter.
  {
    ASSIGN_OR_RETURN(auto readers, OpenAll(c, "buckets", "pairs", DedupStage::kBuckets,
                                           Kind::kPairs, sizeof(PairRecord)));
    internal::ExternalSorter<PairRecord> sorter(c.env, tmp, absl::StrFormat("cpairs-%05d", K),
                                                budget / 4);
    for (auto& r : readers) {
      PairRecord p;
      while (true) {
        ASSIGN_OR_RETURN(bool more, r->Next(&p));
        if (!more) break;
        stats[kInputBytes] += sizeof(p);
        if (Partition(3, p.a, p.b, L) == static_cast<uint64_t>(K)) RETURN_IF_ERROR(sorter.Add(p));
      }
    }
    internal::ExternalSorter<uint64_t> keys(c.env, tmp, absl::StrFormat("ckeys-%05d", K),
                                            budget / 8);
    ASSIGN_OR_RETURN(auto pairs_w, FileWriter::Open(c.env, pairs_path,
                                                    c.Header(Kind::kPairs, sizeof(PairRecord)),
                                                    /*sync=*/false));
    bool have = false;
    PairRecord prev{};
    RETURN_IF_ERROR(sorter.Finish([&](const PairRecord& p) -> absl::Status {
      if (have && prev.a == p.a && prev.b == p.b) return absl::OkStatus();
      have = true;
      prev = p;
      if (p.kind == static_cast<uint32_t>(PairKind::kExact)) {
        ++stats[kExactPairs];
      } else {
        ++stats[kCandidatePairs];
        RETURN_IF_ERROR(keys.Add(p.a));
        RETURN_IF_ERROR(keys.Add(p.b));
      }
      return pairs_w->Add(p);
    }));
    RETURN_IF_ERROR(pairs_w->Finish());

    // 2. The sets of the candidate documents -> memory or the sets file, in key order.
    if (stats[kCandidatePairs] > 0) {
      const MinHasher hasher(c.opt.num_perm, c.opt.seed);
      const size_t window = SplitWindow(c, 1);
      std::atomic<uint64_t> bytes{0}, from_input{0};
      std::vector<KeyGroup> groups;
      bool any = false;
      uint64_t last = 0;
      RETURN_IF_ERROR(keys.Finish([&](uint64_t key) -> absl::Status {
        if (any && key == last) return absl::OkStatus();
        any = true;
        last = key;
        if (groups.empty() || groups.back().split != SplitOfKey(key)) {
          if (groups.size() == window) {
            RETURN_IF_ERROR(SpillSets(c, hasher, groups, &sets, &bytes, &from_input));
            groups.clear();
          }
          groups.push_back(KeyGroup{SplitOfKey(key), {}});
        }
        groups.back().keys.push_back(key);
        return absl::OkStatus();
      }));
      if (!groups.empty()) {
        RETURN_IF_ERROR(SpillSets(c, hasher, groups, &sets, &bytes, &from_input));
      }
      stats[kSpilledSetBytes] = sets.spilled_bytes();
      RETURN_IF_ERROR(sets.Finish());
      stats[kInputBytes] += bytes.load();
      stats[kSetsFromInput] = from_input.load();
    }
  }

  c.shingle_cache.reset();  // its memory is the verification's now

  // 3. Verify block by block; edges in (a, b) order.
  ASSIGN_OR_RETURN(auto pairs_r,
                   FileReader::Open(c.env, pairs_path, Kind::kPairs, sizeof(PairRecord)));
  ASSIGN_OR_RETURN(auto edges_w, c.OpenWork(JoinPath(dir, TaskFileName("edges", K, L)),
                                            Kind::kEdges, sizeof(EdgeRecord)));
  // Per pair in a block: the record, its similarity, two u32 indices and a share of a_keys/a_span
  // (64 bytes): a sixteenth of the budget; the first documents' sets an eighth, the batch of second
  // documents' sets a sixteenth.
  const size_t block_cap = static_cast<size_t>(std::max<uint64_t>(1024, budget / 16 / 64));
  VerifyBuffers buf;
  buf.a_words = budget / 8 / 8;
  buf.b_words = budget / 16 / 8;
  std::vector<PairRecord> block;
  block.reserve(block_cap);
  std::vector<double> sims;
  bool pairs_done = false;
  while (true) {
    while (!pairs_done && block.size() < block_cap) {
      PairRecord p;
      ASSIGN_OR_RETURN(bool more, pairs_r->Next(&p));
      if (!more) {
        pairs_done = true;
        break;
      }
      block.push_back(p);
    }
    if (block.empty()) break;
    sims.assign(block.size(), 1.0);
    size_t resolved = block.size();
    const bool any_near = std::any_of(block.begin(), block.end(), [](const PairRecord& p) {
      return p.kind == static_cast<uint32_t>(PairKind::kNear);
    });
    if (any_near) {
      if (buf.a_arena.capacity() == 0) {
        buf.a_arena.reserve(buf.a_words);
        buf.b_arena.reserve(buf.b_words);
      }
      ASSIGN_OR_RETURN(resolved, VerifyBlock(c, sets, block, &sims, &buf,
                                             &stats[kInputBytes]));
      ++stats[kVerifyPasses];
    }
    for (size_t i = 0; i < resolved; ++i) {
      const PairRecord& p = block[i];
      if (p.kind != static_cast<uint32_t>(PairKind::kExact)) {
        if (c.opt.verify && sims[i] < c.opt.threshold) continue;
        ++stats[kVerifiedPairs];
      }
      RETURN_IF_ERROR(edges_w->Add(EdgeRecord{p.a, p.b, sims[i], p.kind, 0}));
    }
    block.erase(block.begin(), block.begin() + static_cast<ptrdiff_t>(resolved));
  }
  RETURN_IF_ERROR(edges_w->Finish());
  return WriteStats(c, DedupStage::kClusters, std::move(stats), sw);
}


}  // namespace grist::dedup::internal
