#include "dedup/internal/shingle_cache.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstring>
#include <utility>

namespace grist::dedup::internal {

namespace {

// Words a thread takes from the mapping at a time (a document with more takes its own block).
constexpr uint64_t kBlockWords = 8192;  // 64 KiB
// Address space beyond the bound, for the blocks' unfilled ends (never touched, so never resident).
constexpr uint64_t kSlackBytes = 256ull << 20;

std::atomic<uint64_t> next_cache_id{1};

// The block this thread fills, of the cache `id`.
struct ThreadBlock {
  uint64_t id = 0;
  uint64_t next = 0, end = 0;  // words
};
thread_local ThreadBlock thread_block;

}  // namespace

ShingleCache::ShingleCache(size_t splits, uint64_t max_bytes)
    : id_(next_cache_id.fetch_add(1, std::memory_order_relaxed)),
      max_bytes_(max_bytes),
      splits_(splits),
      kept_(splits, 0) {
  const uint64_t bytes = (2 * max_bytes + kSlackBytes + 4095) / 4096 * 4096;
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {
    Close();
    return;
  }
  base_ = static_cast<uint64_t*>(p);
  words_ = bytes / 8;
}

ShingleCache::~ShingleCache() {
  if (base_ != nullptr) ::munmap(base_, words_ * 8);
}

bool ShingleCache::Add(std::span<const uint64_t> hashes, DocSpan* span) {
  if (!open()) return false;
  const uint64_t n = hashes.size();
  const uint64_t cost = 8 * n + sizeof(DocSpan);
  if (charged_.fetch_add(cost, std::memory_order_relaxed) + cost > max_bytes_) return Close();
  ThreadBlock& b = thread_block;
  if (b.id != id_ || b.end - b.next < n) {
    const uint64_t take = std::max(kBlockWords, n);
    const uint64_t start = next_block_.fetch_add(take, std::memory_order_relaxed);
    if (start > words_ || words_ - start < take) return Close();
    b = ThreadBlock{id_, start, start + take};
  }
  if (n > 0) std::memcpy(base_ + b.next, hashes.data(), 8 * n);
  *span = DocSpan{b.next, n};
  b.next += n;
  return true;
}

void ShingleCache::Keep(size_t split, std::vector<DocSpan>&& docs) {
  if (split >= splits_.size()) return;
  if (kept_[split] == 0) ++count_;
  kept_[split] = 1;
  splits_[split] = std::move(docs);
}

}  // namespace grist::dedup::internal
