// The shingle hashes the signatures stage computed, kept in memory for the clusters stage of the
// same process (RunDedup), so that verifying the candidate pairs does not read, parse and shingle
// the input a second time.
//
// Contract: the signatures stage's workers add each document's hashes (Add, any thread) while
// the cache is open, and its ordered consumer keeps a split whose every document was added (Keep,
// one thread). An Add that would take the cache past the byte bound given at construction fails
// and closes the cache; the split it belonged to is not kept. So the cache never holds more than
// the bound (hashes and per-document spans). Which splits are kept may depend on timing; no
// output does: the clusters stage reads the cache (Find, many threads, no writer then) and reads
// the input again for a split that is not kept, which gives the same hashes.
//
// The hashes live in one anonymous mapping of address space reserved up front (pages are touched
// only as they fill) and given back whole when the cache is destroyed: a stage's memory leaves the
// process with it, rather than staying in malloc's heap. Transparent huge pages are not asked for:
// where the kernel compacts memory on a huge page's fault (defrag "madvise", Debian's default),
// the signatures stage spent 0.1-0.25 s more in the kernel on 94 MB of input than with small pages
// (docs/dedup.md). Each thread fills a block of the mapping at a time, so adding takes no lock.
//
// Whether keeping pays is decided per run by a KeepTrial (below): a cache the trial finds not
// worth it is abandoned, and no split is found in it afterwards. Private to grist::dedup.
#ifndef GRIST_DEDUP_INTERNAL_SHINGLE_CACHE_H_
#define GRIST_DEDUP_INTERNAL_SHINGLE_CACHE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"

namespace grist::dedup::internal {

class ShingleCache {
 public:
  // Where one document's hashes lie in the cache (in 8-byte words).
  struct DocSpan {
    uint64_t offset = 0;
    uint64_t length = 0;
  };
  // One kept split: its documents' spans, by ordinal.
  class SplitView {
   public:
    SplitView() = default;
    size_t docs() const { return docs_->size(); }
    // Document `ordinal`'s hashes (ordinal < docs()).
    std::span<const uint64_t> Doc(size_t ordinal) const {
      const DocSpan& d = (*docs_)[ordinal];
      return {base_ + d.offset, static_cast<size_t>(d.length)};
    }

   private:
    friend class ShingleCache;
    SplitView(const uint64_t* base, const std::vector<DocSpan>* docs) : base_(base), docs_(docs) {}
    const uint64_t* base_ = nullptr;
    const std::vector<DocSpan>* docs_ = nullptr;
  };

  // `splits`: the number of input splits; `max_bytes`: the bound on what the cache holds. With no
  // address space for the mapping, the cache is closed from the start.
  ShingleCache(size_t splits, uint64_t max_bytes);
  ~ShingleCache();
  ShingleCache(const ShingleCache&) = delete;
  ShingleCache& operator=(const ShingleCache&) = delete;

  // Whether adding is still worth it (false once an Add failed). Any thread.
  bool open() const { return open_.load(std::memory_order_relaxed); }

  // Copies one document's hashes into the cache and sets *span; false, closing the cache, when
  // they do not fit. Any thread.
  bool Add(std::span<const uint64_t> hashes, DocSpan* span);

  // Keeps `docs` (spans given by Add, by ordinal) as split `split`'s; nothing once abandoned.
  // One thread, not concurrently with Find.
  void Keep(size_t split, std::vector<DocSpan>&& docs);

  // Closes the cache and forgets every split kept: Find finds none from now on, Add and Keep do
  // nothing. Its memory goes with the cache. The thread that calls Keep, not concurrently with it.
  void Abandon();
  bool abandoned() const { return abandoned_; }

  // Split `split`'s documents, or nothing if they were not kept.
  bool Find(size_t split, SplitView* view) const {
    if (abandoned_ || split >= kept_.size() || kept_[split] == 0) return false;
    *view = SplitView(base_, &splits_[split]);
    return true;
  }

  size_t splits_kept() const { return count_; }
  // Bytes of hashes and spans added (what the cache holds, give or take a failed Add's).
  uint64_t bytes() const { return charged_.load(std::memory_order_relaxed); }

 private:
  bool Close() {
    open_.store(false, std::memory_order_relaxed);
    return false;
  }

  const uint64_t id_;  // tells this cache's per-thread block from another's
  uint64_t* base_ = nullptr;
  uint64_t words_ = 0;  // words of address space mapped at base_
  uint64_t max_bytes_;
  std::atomic<uint64_t> charged_{0};     // bytes of hashes and spans added
  std::atomic<uint64_t> next_block_{0};  // first word not yet handed to a thread
  std::vector<std::vector<DocSpan>> splits_;
  std::vector<uint8_t> kept_;
  size_t count_ = 0;
  bool abandoned_ = false;
  std::atomic<bool> open_{true};
};

// Decides whether keeping the shingles pays, from the first documents of a task seen in split
// order (the signatures stage's ordered consumer): deterministic for any thread count.
//
// Keeping costs fresh memory for every document (about 1.3 bytes per input byte, and first touch
// is slow on VMs); it saves reading again, decoding, parsing and shingling each split that holds
// a candidate document (the clusters stage reads a whole split for one, and a stream split of a
// compressed file without a frame index after decoding the file up to it). So the trial covers
// the first splits, up to `trial_bytes` (at least one split), and finds the documents among them
// whose band hashes equal an earlier document's (LSH candidates; a document whose exact hash was
// seen before is an exact copy, verified without sets, and is left out). It keeps if the bytes
// that reading the candidates' splits again would take (a stream file's up to its last such
// split) are at least half the trial's bytes, else the cache is abandoned: a run where keeping
// does not pay pays for the trial's shingles at most. Pairs with one document beyond the trial
// are not seen, so where duplicates lie far apart the trial may abandon a cache that would have
// paid: the run then reads those splits again, as without a cache.
class KeepTrial {
 public:
  enum class Verdict { kUndecided, kKeep, kAbandon };
  // `trial_bytes`: where the trial ends (a split that takes the bytes seen to it or past is the
  // trial's last).
  explicit KeepTrial(uint64_t trial_bytes) : trial_bytes_(trial_bytes) {}

  // One document of the current split: its exact hash and its `bands` band hashes (8 bytes each,
  // native order, as a signature record holds them: any alignment).
  void AddDoc(uint64_t exact_hi, uint64_t exact_lo, const void* band_hashes, int bands);
  // Ends the current split: its (planned) bytes, its file, and whether it is a stream split.
  // The verdict once the trial is over, kUndecided before.
  Verdict EndSplit(uint64_t bytes, size_t file, bool stream);

  Verdict verdict() const { return verdict_; }
  uint64_t splits() const { return splits_.size(); }
  // Splits of the trial that hold a candidate document (found within the trial).
  uint64_t candidate_splits() const { return hit_count_; }
  // Bytes of the trial, and those reading the candidates' splits again would take.
  uint64_t bytes() const { return bytes_; }
  uint64_t reread_bytes() const { return reread_bytes_; }

 private:
  struct Split {
    uint64_t bytes = 0;
    uint64_t file_bytes = 0;  // the trial's bytes of its file up to and including it
    size_t file = 0;
    bool stream = false;
    bool hit = false;
  };
  void Hit(size_t split);

  const uint64_t trial_bytes_;
  uint64_t bytes_ = 0, reread_bytes_ = 0;
  uint64_t hit_count_ = 0;
  bool current_hit_ = false;  // the current split holds a candidate
  Verdict verdict_ = Verdict::kUndecided;
  std::vector<Split> splits_;                      // the splits ended, in order
  absl::flat_hash_set<uint64_t> exact_;            // exact hashes seen (folded to 64 bits)
  absl::flat_hash_map<uint64_t, uint32_t> bands_;  // (band, hash) folded -> first split
  absl::flat_hash_map<size_t, uint64_t> file_bytes_;  // the trial's bytes of each file so far
};

}  // namespace grist::dedup::internal

#endif  // GRIST_DEDUP_INTERNAL_SHINGLE_CACHE_H_
