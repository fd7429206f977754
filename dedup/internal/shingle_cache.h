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
// Private to grist::dedup.
#ifndef GRIST_DEDUP_INTERNAL_SHINGLE_CACHE_H_
#define GRIST_DEDUP_INTERNAL_SHINGLE_CACHE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

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

  // Keeps `docs` (spans given by Add, by ordinal) as split `split`'s. One thread, not
  // concurrently with Find.
  void Keep(size_t split, std::vector<DocSpan>&& docs);

  // Split `split`'s documents, or nothing if they were not kept.
  bool Find(size_t split, SplitView* view) const {
    if (split >= kept_.size() || kept_[split] == 0) return false;
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
  std::atomic<bool> open_{true};
};

}  // namespace grist::dedup::internal

#endif  // GRIST_DEDUP_INTERNAL_SHINGLE_CACHE_H_
