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
  if (abandoned_ || split >= splits_.size()) return;
  if (kept_[split] == 0) ++count_;
  kept_[split] = 1;
  splits_[split] = std::move(docs);
}

void ShingleCache::Abandon() {
  Close();
  abandoned_ = true;
  std::vector<std::vector<DocSpan>>(splits_.size()).swap(splits_);
  count_ = 0;
}

void KeepTrial::AddDoc(uint64_t exact_hi, uint64_t exact_lo, const void* band_hashes, int bands) {
  if (verdict_ != Verdict::kUndecided) return;
  if (!exact_.insert(exact_hi ^ (exact_lo * 0x9e3779b97f4a7c15ull)).second) return;  // a copy
  const size_t current = splits_.size();
  bool candidate = false;
  for (int b = 0; b < bands; ++b) {
    uint64_t h;
    std::memcpy(&h, static_cast<const char*>(band_hashes) + 8 * static_cast<size_t>(b), 8);
    // Band b's hash, told apart from the same value in another band.
    const uint64_t key = h ^ ((static_cast<uint64_t>(b) + 1) * 0xc2b2ae3d27d4eb4full);
    const auto [it, fresh] = bands_.try_emplace(key, static_cast<uint32_t>(current));
    if (!fresh) {
      if (it->second < current) Hit(it->second);
      candidate = true;
    }
  }
  if (candidate) current_hit_ = true;
}

void KeepTrial::Hit(size_t split) {
  if (!splits_[split].hit) ++hit_count_;
  splits_[split].hit = true;
}

KeepTrial::Verdict KeepTrial::EndSplit(uint64_t bytes, size_t file, bool stream) {
  if (verdict_ != Verdict::kUndecided) return verdict_;
  Split sp;
  sp.bytes = bytes;
  sp.file = file;
  sp.stream = stream;
  sp.file_bytes = (file_bytes_[file] += bytes);
  splits_.push_back(sp);
  if (current_hit_) Hit(splits_.size() - 1);
  current_hit_ = false;
  bytes_ += bytes;
  if (bytes_ < trial_bytes_) return verdict_;
  // What reading the candidates' splits again would take: each one's bytes, and for a stream
  // file its bytes up to its last such split (decoded from the start of the file).
  absl::flat_hash_map<size_t, uint64_t> stream_reach;
  for (const Split& t : splits_) {
    if (!t.hit) continue;
    if (t.stream) {
      uint64_t& reach = stream_reach[t.file];
      reach = std::max(reach, t.file_bytes);
    } else {
      reread_bytes_ += t.bytes;
    }
  }
  for (const auto& [f, reach] : stream_reach) reread_bytes_ += reach;
  verdict_ = 2 * reread_bytes_ >= bytes_ ? Verdict::kKeep : Verdict::kAbandon;
  // What the trial held is not needed any more.
  absl::flat_hash_set<uint64_t>().swap(exact_);
  absl::flat_hash_map<uint64_t, uint32_t>().swap(bands_);
  absl::flat_hash_map<size_t, uint64_t>().swap(file_bytes_);
  return verdict_;
}

}  // namespace grist::dedup::internal
