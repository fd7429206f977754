#include "tokenize/internal/bpe.h"

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>

#include "common/check.h"
#include "common/hash.h"
#include "common/utf8.h"

namespace grist::tokenize::internal {
namespace {

constexpr int kDead = -2;  // a symbol merged into its left neighbour
constexpr size_t kCacheKeyWords = 3;  // chunks of at most 24 bytes are cached
constexpr size_t kCacheKeyBytes = 8 * kCacheKeyWords;
constexpr size_t kCacheIds = 8;

// A cache slot: eight 64-bit words, read and written through std::atomic_ref as a seqlock.
// Word 0: the version (low 32 bits; odd while a writer fills the slot), the key's length (bits
// 32-39, 0 for an empty slot) and the id count (bits 40-47); words 1-3: the key, zero-padded;
// words 4-7: the ids, two per word.
constexpr size_t kSlotWords = 1 + kCacheKeyWords + kCacheIds / 2;
static_assert(kSlotWords * 8 == BpeEncoder::kCacheSlotBytes);

std::atomic<uint64_t> g_serial{0};

// Copies n ids (n <= kCacheIds) into the four id words of a slot.
inline void PackIds(const int* from, size_t n, uint64_t* words) {
  int32_t packed[kCacheIds] = {};
  std::copy(from, from + n, packed);
  std::memcpy(words, packed, sizeof(packed));
}

uint64_t Mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return x;
}

size_t TableSize(size_t n) {
  size_t c = 16;
  while (c < 2 * n + 2) c <<= 1;
  return c;
}

// Piece text -> id while the tables are built: open addressing over the pieces' own bytes (the
// model's storage), a hash and an id per slot. std::unordered_map's scattered nodes made the
// merge table's two lookups per split of every piece most of the encoder's build time.
class PieceIndex {
 public:
  // `pieces`: the model's pieces, which the ids inserted index (they must outlive the index).
  PieceIndex(size_t n, const std::vector<ModelPiece>* pieces)
      : slots_(TableSize(n)), mask_(slots_.size() - 1), pieces_(pieces) {}
  // False when `piece` is already present (the index keeps the first id).
  bool Insert(std::string_view piece, int id) {
    const uint64_t h = Hash64(piece);
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      Slot& s = slots_[i];
      if (s.id < 0) {
        s = {h, id};
        return true;
      }
      if (s.hash == h && (*pieces_)[s.id].piece == piece) return false;
    }
  }
  // The id of `piece`, -1 when absent.
  int Find(std::string_view piece) const {
    const uint64_t h = Hash64(piece);
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.id < 0) return -1;
      if (s.hash == h && (*pieces_)[s.id].piece == piece) return s.id;
    }
  }

 private:
  struct Slot {  // 16 bytes: a 32k vocabulary's index is 1 MiB, mostly in the core's cache
    uint64_t hash = 0;
    int64_t id = -1;
  };
  std::vector<Slot> slots_;
  size_t mask_;
  const std::vector<ModelPiece>* pieces_;
};

}  // namespace

struct BpeEncoder::Pair {
  int32_t id;
  float score;
};

// (left id, right id) -> the merged piece: open addressing, linear probing.
class BpeEncoder::PairTable {
 public:
  explicit PairTable(size_t n) : keys_(TableSize(n), kEmpty), vals_(keys_.size()) {
    mask_ = keys_.size() - 1;
  }
  static uint64_t Key(int l, int r) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(l)) << 32) | static_cast<uint32_t>(r);
  }
  void Insert(int l, int r, Pair p) {
    uint64_t k = Key(l, r);
    for (size_t i = Mix(k) & mask_;; i = (i + 1) & mask_) {
      if (keys_[i] == kEmpty || keys_[i] == k) {
        keys_[i] = k;
        vals_[i] = p;
        return;
      }
    }
  }
  const Pair* Find(int l, int r) const {
    if (l < 0 || r < 0) return nullptr;
    uint64_t k = Key(l, r);
    for (size_t i = Mix(k) & mask_;; i = (i + 1) & mask_) {
      if (keys_[i] == k) return &vals_[i];
      if (keys_[i] == kEmpty) return nullptr;
    }
  }

 private:
  static constexpr uint64_t kEmpty = ~uint64_t{0};
  std::vector<uint64_t> keys_;
  std::vector<Pair> vals_;
  size_t mask_;
};

// One character (1 to 4 bytes) -> its piece id.
class BpeEncoder::CharTable {
 public:
  explicit CharTable(size_t n) : keys_(TableSize(n), 0), vals_(keys_.size(), -1) {
    mask_ = keys_.size() - 1;
  }
  static uint64_t Key(std::string_view c) {
    uint32_t v = 0;
    std::memcpy(&v, c.data(), c.size());
    return (static_cast<uint64_t>(c.size()) << 32) | v;
  }
  void Insert(std::string_view c, int id) {
    uint64_t k = Key(c);
    for (size_t i = Mix(k) & mask_;; i = (i + 1) & mask_) {
      if (keys_[i] == 0 || keys_[i] == k) {
        keys_[i] = k;
        vals_[i] = id;
        return;
      }
    }
  }
  int Find(std::string_view c) const {
    uint64_t k = Key(c);
    for (size_t i = Mix(k) & mask_;; i = (i + 1) & mask_) {
      if (keys_[i] == k) return vals_[i];
      if (keys_[i] == 0) return -1;
    }
  }

 private:
  std::vector<uint64_t> keys_;
  std::vector<int> vals_;
  size_t mask_;
};

struct BpeEncoder::Scratch {
  struct Sym {
    int id;  // piece id; -1 a character outside the vocabulary; kDead merged away
    int prev, next;
    uint32_t begin, len;
  };
  struct Cand {
    float score;
    int left, right;
    int lid, rid, mid;
  };
  std::string norm;
  // The thread's front cache (bpe.h): kFrontSlots slots laid out as the shared cache's, in plain
  // memory, word 0 holding only the key's length and the id count; front_owner is the serial of
  // the encoder that filled it (0: none).
  std::unique_ptr<uint64_t[]> front;
  uint64_t front_owner = 0;
  std::vector<Sym> syms;
  std::vector<Cand> heap;
};

// The encoder's chunk cache, shared by every thread that encodes with it (bpe.h): a direct-mapped
// table of seqlocked slots. A reader copies a slot and keeps it only if its version was even and
// unchanged around the copy, so it never uses a slot being written; a writer takes a slot by
// moving its version from even to odd and gives up if another writer holds it. Every slot holds
// the exact ids of its key (see Encode), so what the cache holds changes speed, never ids.
class BpeEncoder::ChunkCache {
 public:
  // Anonymous pages: zero until touched, faulted in by the threads that touch them rather than
  // zeroed up front by the first encoding thread while the others wait for it. Shared, not
  // private: a slot is read (Find) before it is written (Store), and a private page first read
  // is the kernel's zero page, so the first write to each of the 4096 pages was a copy-on-write
  // that flushes the page from every CPU running one of the process's threads (an interrupt to
  // each, under the page table's lock): in a 16-thread build on the GPU host, 46% of the CPU
  // samples of tokenize's first 10 ms were in those flushes and a kernel spin lock. A shared
  // anonymous page is a real page at its first touch, mapped writable, so no write faults again.
  // (A child forked while the cache exists shares it; its entries are exact, so that is
  // harmless.)
  ChunkCache() {
    void* p = ::mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    GRIST_CHECK(p != MAP_FAILED, "BPE chunk cache: out of memory");
    words_ = static_cast<uint64_t*>(p);
  }
  ~ChunkCache() { ::munmap(words_, kBytes); }
  ChunkCache(const ChunkCache&) = delete;
  ChunkCache& operator=(const ChunkCache&) = delete;

  // Appends the cached ids of the chunk whose zero-padded key words are `key` (length `len`,
  // hash `h`) to *ids; false on a miss.
  bool Find(uint64_t h, const uint64_t* key, size_t len, std::vector<int>* ids) const {
    uint64_t* slot = words_ + (h & (kCacheSlots - 1)) * kSlotWords;
    const uint64_t w0 = std::atomic_ref<uint64_t>(slot[0]).load(std::memory_order_acquire);
    if ((w0 & 1) != 0 || ((w0 >> 32) & 0xff) != len) return false;
    // Acquire loads (plain loads on x86): the second read of word 0 cannot move before them, and
    // a word a writer stored after taking the slot makes that read see the odd version or later.
    // No fences: GCC's ThreadSanitizer does not support them.
    uint64_t copy[kSlotWords - 1];
    for (size_t i = 1; i < kSlotWords; ++i) {
      copy[i - 1] = std::atomic_ref<uint64_t>(slot[i]).load(std::memory_order_acquire);
    }
    if (std::atomic_ref<uint64_t>(slot[0]).load(std::memory_order_relaxed) != w0) return false;
    for (size_t i = 0; i < kCacheKeyWords; ++i) {
      if (copy[i] != key[i]) return false;
    }
    const size_t n = (w0 >> 40) & 0xff;
    int32_t got[kCacheIds];
    std::memcpy(got, copy + kCacheKeyWords, sizeof(got));
    ids->insert(ids->end(), got, got + n);
    return true;
  }

  // Asks for the slot of hash `h` ahead of its Find (a slot is one cache line).
  void Prefetch(uint64_t h) const {
    __builtin_prefetch(words_ + (h & (kCacheSlots - 1)) * kSlotWords);
  }

  // Stores ids[0, n) (n <= kCacheIds) for the key, unless another writer holds the slot.
  void Store(uint64_t h, const uint64_t* key, size_t len, const int* from, size_t n) {
    uint64_t* slot = words_ + (h & (kCacheSlots - 1)) * kSlotWords;
    std::atomic_ref<uint64_t> head(slot[0]);
    uint64_t w0 = head.load(std::memory_order_relaxed);
    if ((w0 & 1) != 0) return;
    const uint32_t version = static_cast<uint32_t>(w0);
    if (!head.compare_exchange_strong(w0, (w0 & ~uint64_t{0xffffffff}) | (version + 1),
                                      std::memory_order_acquire, std::memory_order_relaxed)) {
      return;
    }
    // Release stores: taking the slot (the odd version) is ordered before each of them.
    uint64_t idw[kCacheIds / 2];
    PackIds(from, n, idw);
    for (size_t i = 0; i < kCacheKeyWords; ++i) {
      std::atomic_ref<uint64_t>(slot[1 + i]).store(key[i], std::memory_order_release);
    }
    for (size_t i = 0; i < kCacheIds / 2; ++i) {
      std::atomic_ref<uint64_t>(slot[1 + kCacheKeyWords + i])
          .store(idw[i], std::memory_order_release);
    }
    head.store(static_cast<uint32_t>(version + 2) | (uint64_t{len} << 32) | (uint64_t{n} << 40),
               std::memory_order_release);
  }

 private:
  static constexpr size_t kBytes = kCacheSlots * kSlotWords * 8;
  uint64_t* words_ = nullptr;
};

BpeEncoder::BpeEncoder() = default;
BpeEncoder::~BpeEncoder() = default;

std::unique_ptr<BpeEncoder> BpeEncoder::Create(std::string_view serialized, std::string* why_not) {
  ModelFacts f;
  if (!ParseModelFacts(serialized, &f)) {
    *why_not = "the model's protobuf does not parse";
    return nullptr;
  }
  if (f.odd_enum) {
    *why_not = "the model holds an enum value SentencePiece's proto does not define";
    return nullptr;
  }
  if (f.model_type != 2) {
    *why_not = "not a BPE model";
    return nullptr;
  }
  if (!f.escape_whitespaces) {
    // SentencePiece's BPE trainer refuses this setting, so no trained model has it to test on.
    *why_not = "escape_whitespaces is off";
    return nullptr;
  }
  auto e = std::unique_ptr<BpeEncoder>(new BpeEncoder());
  e->serial_ = ++g_serial;
  e->byte_fallback_ = f.byte_fallback;
  e->space_ = f.escape_whitespaces ? kSpaceSymbol : std::string_view(" ");
  const int n = static_cast<int>(f.pieces.size());
  // NORMAL and USER_DEFINED pieces (SentencePiece's pieces_), by text and in id order; every piece.
  PieceIndex normal(n, &f.pieces), all(n, &f.pieces);
  std::vector<std::pair<std::string_view, int>> normal_ids;
  std::vector<std::string> user_strings;
  e->unk_id_ = -1;
  e->is_user_.assign(n, false);
  for (int i = 0; i < n; ++i) {
    const ModelPiece& p = f.pieces[i];
    if (p.piece.empty()) {
      *why_not = "an empty piece";
      return nullptr;
    }
    if (!all.Insert(p.piece, i)) {
      *why_not = "piece '" + p.piece + "' is given twice";
      return nullptr;
    }
    if (std::isnan(p.score)) {
      *why_not = "a piece scores NaN";
      return nullptr;
    }
    const bool one_char = OneCharLen(static_cast<unsigned char>(p.piece[0])) == p.piece.size();
    switch (p.type) {
      case PieceType::kUnused:
        *why_not = "the model has UNUSED pieces";
        return nullptr;
      case PieceType::kNormal:
        normal.Insert(p.piece, i);
        normal_ids.emplace_back(p.piece, i);
        break;
      case PieceType::kUserDefined:
        normal.Insert(p.piece, i);
        normal_ids.emplace_back(p.piece, i);
        e->is_user_[i] = true;
        user_strings.push_back(p.piece);
        break;
      case PieceType::kUnknown:
        if (e->unk_id_ < 0) e->unk_id_ = i;
        [[fallthrough]];
      case PieceType::kControl:
      case PieceType::kByte:
        if (one_char) {
          *why_not = "reserved piece '" + p.piece + "' is one character";
          return nullptr;
        }
        break;
    }
  }
  if (e->unk_id_ < 0) {
    *why_not = "no <unk> piece";
    return nullptr;
  }
  for (const auto& u : user_strings) {
    if (u.find('\0') != std::string::npos || !IsValidUtf8(u)) {
      *why_not = "a user-defined symbol is not valid UTF-8 text";
      return nullptr;
    }
  }
  e->users_ = std::make_unique<UserSymbols>(user_strings);
  e->normalizer_ = Normalizer::Create(f, e->users_.get(), why_not);
  if (e->normalizer_ == nullptr) return nullptr;

  // Byte fallback ids: PieceToId("<0xNN>"), <unk> when absent.
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    const int id = all.Find(name);
    e->byte_id_[b] = id < 0 ? e->unk_id_ : id;
  }
  size_t single = 0;
  for (int c = 0; c < 128; ++c) {
    char ch = static_cast<char>(c);
    e->ascii_id_[c] = normal.Find(std::string_view(&ch, 1));
  }
  for (const auto& [s, id] : normal_ids) single += s.size() <= 4;
  e->chars_ = std::make_unique<CharTable>(single);
  for (const auto& [s, id] : normal_ids) {
    if (s.size() <= 4 && OneCharLen(static_cast<unsigned char>(s[0])) == s.size()) {
      e->chars_->Insert(s, id);
    }
  }

  // The merge table: every split of a piece into two pieces at a character boundary. Collected
  // first, so the table is sized by the pairs found rather than by every cut tried, on up to 8
  // threads over contiguous ranges of the pieces (half the tables' time for a 32k model on one):
  // each range's merges in piece order, the ranges joined in order, so the list, the first
  // refusal and the table are those of one pass.
  struct Merge {
    int left, right, id;
  };
  struct Range {
    std::vector<Merge> merges;
    bool cache_ok = true;
    std::string why_not;  // the range's first refusal
  };
  const std::string_view sp = e->space_;
  auto is_char = [](std::string_view x) {
    return OneCharLen(static_cast<unsigned char>(x[0])) == x.size();
  };
  const size_t hw = std::max(1u, std::thread::hardware_concurrency());
  const size_t parts = std::clamp<size_t>(normal_ids.size() / 4096, 1, std::min<size_t>(8, hw));
  std::vector<Range> ranges(parts);
  auto scan = [&](size_t r) {
    Range& out = ranges[r];
    const size_t begin = normal_ids.size() * r / parts, end = normal_ids.size() * (r + 1) / parts;
    out.merges.reserve((end - begin) * 2);
    for (size_t k = begin; k < end; ++k) {
      const std::string_view s = normal_ids[k].first;
      const int id = normal_ids[k].second;
      for (size_t pos = s.find(sp, 1); pos != std::string_view::npos; pos = s.find(sp, pos + 1)) {
        if (pos < sp.size() || s.compare(pos - sp.size(), sp.size(), sp) != 0) out.cache_ok = false;
      }
      // A user-defined piece is never the result of a merge: where the text holds it, the prefix
      // matcher has already made it one frozen symbol (a merge starts at an unfrozen symbol, where
      // no user-defined symbol is a prefix of the text).
      if (e->is_user_[id]) continue;
      for (size_t cut = OneCharLen(static_cast<unsigned char>(s[0])); cut < s.size();
           cut += OneCharLen(static_cast<unsigned char>(s[cut]))) {
        std::string_view a = s.substr(0, cut), b = s.substr(cut);
        const int ia = normal.Find(a);
        // Neither a merge nor a character outside the vocabulary.
        if (ia < 0 && !is_char(a)) continue;
        const int ib = normal.Find(b);
        if (ia >= 0 && ib >= 0) {
          if (!e->is_user_[ia] && !e->is_user_[ib]) out.merges.push_back({ia, ib, id});
        } else if (ib >= 0 || is_char(b)) {
          out.why_not =
              "piece '" + std::string(s) + "' merges from a character outside the vocabulary";
          return;
        }
      }
    }
  };
  {
    std::vector<std::jthread> helpers;
    for (size_t r = 1; r < parts; ++r) helpers.emplace_back(scan, r);
    scan(0);
  }
  bool cache_ok = true;
  size_t total = 0;
  for (const Range& r : ranges) {
    if (!r.why_not.empty()) {
      *why_not = r.why_not;
      return nullptr;
    }
    cache_ok &= r.cache_ok;
    total += r.merges.size();
  }
  e->pairs_ = std::make_unique<PairTable>(total);
  for (const Range& r : ranges) {
    for (const Merge& m : r.merges) {
      const float score = f.pieces[m.id].score;
      e->pairs_->Insert(m.left, m.right, Pair{m.id, score});
      e->scan_ok_ &= score > -std::numeric_limits<float>::infinity();
    }
  }
  e->chunk_cache_ = cache_ok;
  e->use_cache_ = cache_ok;
  for (const auto& u : user_strings) e->user_ids_.emplace(u, normal.Find(u));
  return e;
}

int BpeEncoder::SymbolId(std::string_view ch) const {
  if (ch.size() == 1 && static_cast<unsigned char>(ch[0]) < 0x80) {
    return ascii_id_[static_cast<unsigned char>(ch[0])];
  }
  return ch.size() <= 4 ? chars_->Find(ch) : -1;
}

void BpeEncoder::EncodeSpan(std::string_view s, Scratch* sc, std::vector<int>* ids,
                            bool* prev_unk) const {
  auto& syms = sc->syms;
  syms.clear();
  const bool users = !users_->empty();
  for (size_t i = 0; i < s.size();) {
    size_t len = 0;
    int id;
    if (users && (len = users_->Match(s.substr(i))) > 0) {
      id = user_ids_.at(std::string(s.substr(i, len)));
    } else {
      len = std::min(OneCharLen(static_cast<unsigned char>(s[i])), s.size() - i);
      id = SymbolId(s.substr(i, len));
    }
    const int k = static_cast<int>(syms.size());
    syms.push_back({id, k - 1, k + 1, static_cast<uint32_t>(i), static_cast<uint32_t>(len)});
    i += len;
  }
  if (syms.empty()) return;
  syms.back().next = -1;

  if (scan_ok_ && syms.size() <= kScanSymbols) {
    MergeByScan(sc);
  } else {
    MergeByHeap(sc);
  }

  for (int k = 0; k != -1; k = syms[k].next) {
    const auto& y = syms[k];
    if (y.id >= 0) {
      ids->push_back(y.id);
      *prev_unk = false;
    } else if (byte_fallback_) {
      for (uint32_t b = 0; b < y.len; ++b) {
        ids->push_back(byte_id_[static_cast<unsigned char>(s[y.begin + b])]);
      }
    } else {
      if (!*prev_unk) ids->push_back(unk_id_);
      *prev_unk = true;
    }
  }
}

// Both merge the symbols of sc->syms as SentencePiece's agenda does: the adjacent pair whose merged
// piece has the highest score first, of equal scores the leftmost, until no adjacent pair merges.
// A merge joins a symbol with the next one: the left one takes the merged id, the right one dies.

// A short span (most chunks: a word and its spaces) by scanning its pairs for the best each round:
// each symbol keeps the score of the pair it starts (-inf: none, or the symbol merged away),
// updated for the two pairs a merge changes, and the scan runs over the symbols in text order, so
// the first of the highest scores (strict >) is the pair the heap would pop: the leftmost. Only
// where every merge scores above -inf (scan_ok_). For a few symbols this is cheaper than the
// heap's pushes, pops and stale entries.
void BpeEncoder::MergeByScan(Scratch* sc) const {
  constexpr float kNone = -std::numeric_limits<float>::infinity();
  auto& syms = sc->syms;
  const int n = static_cast<int>(syms.size());
  float score[kScanSymbols];
  int merged[kScanSymbols];
  auto rate = [&](int k) {
    const int r = syms[k].next;
    const Pair* p = r < 0 ? nullptr : pairs_->Find(syms[k].id, syms[r].id);
    score[k] = p == nullptr ? kNone : p->score;
    merged[k] = p == nullptr ? 0 : p->id;
  };
  for (int k = 0; k < n; ++k) rate(k);
  while (true) {
    int best = -1;
    float top = kNone;
    for (int k = 0; k < n; ++k) {
      if (score[k] > top) {
        top = score[k];
        best = k;
      }
    }
    if (best < 0) return;
    auto& l = syms[best];
    const int right = l.next;
    auto& r = syms[right];
    l.id = merged[best];
    l.len += r.len;
    l.next = r.next;
    if (r.next >= 0) syms[r.next].prev = best;
    r.id = kDead;
    score[right] = kNone;
    rate(best);
    if (l.prev >= 0) rate(l.prev);
  }
}

// Any span, by SentencePiece's own agenda: a heap of candidate pairs, stale ones skipped.
void BpeEncoder::MergeByHeap(Scratch* sc) const {
  auto& syms = sc->syms;
  // SentencePiece's agenda: highest score first; equal scores, the leftmost pair.
  auto& heap = sc->heap;
  heap.clear();
  auto less = [](const Scratch::Cand& a, const Scratch::Cand& b) {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  };
  auto add = [&](int l, int r) {
    if (l < 0 || r < 0) return;
    const Pair* p = pairs_->Find(syms[l].id, syms[r].id);
    if (p == nullptr) return;
    heap.push_back({p->score, l, r, syms[l].id, syms[r].id, p->id});
    std::push_heap(heap.begin(), heap.end(), less);
  };
  for (size_t i = 1; i < syms.size(); ++i) add(static_cast<int>(i - 1), static_cast<int>(i));
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), less);
    const Scratch::Cand c = heap.back();
    heap.pop_back();
    auto& l = syms[c.left];
    auto& r = syms[c.right];
    if (l.id != c.lid || r.id != c.rid || l.next != c.right) continue;  // stale
    l.id = c.mid;
    l.len += r.len;
    l.next = r.next;
    if (r.next >= 0) syms[r.next].prev = c.left;
    r.id = kDead;
    add(l.prev, c.left);
    add(c.left, l.next);
  }
}

bool BpeEncoder::Encode(std::string_view text, std::vector<int>* ids) const {
  thread_local std::unique_ptr<Scratch> owned;
  if (owned == nullptr) owned = std::make_unique<Scratch>();
  Scratch* sc = owned.get();
  if (!normalizer_->Normalize(text, &sc->norm)) return false;
  const std::string_view s = sc->norm;
  bool prev_unk = false;
  if (!use_cache_) {
    EncodeSpan(s, sc, ids, &prev_unk);
    return true;
  }
  std::call_once(cache_once_, [this] { cache_ = std::make_unique<ChunkCache>(); });
  ChunkCache& cache = *cache_;
  if (sc->front == nullptr) sc->front.reset(new uint64_t[kFrontSlots * kSlotWords]);
  if (sc->front_owner != serial_) {
    std::fill_n(sc->front.get(), kFrontSlots * kSlotWords, uint64_t{0});
    sc->front_owner = serial_;
  }
  // Fills a front slot with the key and the ids just appended at `from`.
  auto fill_front = [](uint64_t* f, const uint64_t* key, size_t len, const int* from, size_t n) {
    f[0] = len | (n << 8);
    std::copy(key, key + kCacheKeyWords, f + 1);
    PackIds(from, n, f + 1 + kCacheKeyWords);
  };
  const std::string_view sp = space_;
  const size_t L = sp.size();
  // Where the chunk starting at `pos` ends: a run of whitespace symbols, then everything up to the
  // next one.
  auto chunk_end = [&](size_t pos) {
    size_t q = pos;
    while (q + L <= s.size() && std::memcmp(s.data() + q, sp.data(), L) == 0) q += L;
    if (q < s.size()) {
      const char* from = s.data() + q;
      const char* end = s.data() + s.size();
      while (true) {
        const char* hit = static_cast<const char*>(std::memchr(from, sp[0], end - from));
        if (hit == nullptr) break;
        if (static_cast<size_t>(end - hit) >= L && std::memcmp(hit, sp.data(), L) == 0) {
          return static_cast<size_t>(hit - s.data());
        }
        from = hit + 1;
      }
    }
    return s.size();
  };
  // The chunks are found one ahead of their encoding, and the two cache slots of the next one asked
  // for (prefetched) before this one is encoded: a lookup in the shared cache is a miss to memory
  // (most of Encode's time went to waiting for the slot's first word), and the front cache's
  // 256 KiB are not all in the core's nearest cache.
  auto hash_of = [&](size_t begin, size_t end) -> uint64_t {
    if (end - begin > kCacheKeyBytes) return 0;
    const uint64_t h = Hash64(s.substr(begin, end - begin));
    __builtin_prefetch(sc->front.get() + (h & (kFrontSlots - 1)) * kSlotWords);
    cache.Prefetch(h);
    return h;
  };
  size_t pos = 0;
  size_t next = s.empty() ? 0 : chunk_end(0);
  uint64_t next_h = s.empty() ? 0 : hash_of(0, next);
  while (pos < s.size()) {
    const std::string_view chunk = s.substr(pos, next - pos);
    const uint64_t h = next_h;
    pos = next;
    if (pos < s.size()) {
      next = chunk_end(pos);
      next_h = hash_of(pos, next);
    }
    if (chunk.size() > kCacheKeyBytes) {
      EncodeSpan(chunk, sc, ids, &prev_unk);
      continue;
    }
    uint64_t key[kCacheKeyWords] = {};
    std::memcpy(key, chunk.data(), chunk.size());
    uint64_t* f = sc->front.get() + (h & (kFrontSlots - 1)) * kSlotWords;
    if ((f[0] & 0xff) == chunk.size() && f[1] == key[0] && f[2] == key[1] && f[3] == key[2]) {
      int32_t got[kCacheIds];
      std::memcpy(got, f + 1 + kCacheKeyWords, sizeof(got));
      ids->insert(ids->end(), got, got + ((f[0] >> 8) & 0xff));
      prev_unk = false;
      continue;
    }
    const size_t found_at = ids->size();
    if (cache.Find(h, key, chunk.size(), ids)) {
      fill_front(f, key, chunk.size(), ids->data() + found_at, ids->size() - found_at);
      prev_unk = false;
      continue;
    }
    const bool unk_before = prev_unk;
    const size_t before = ids->size();
    EncodeSpan(chunk, sc, ids, &prev_unk);
    const size_t got = ids->size() - before;
    if (got > kCacheIds) continue;
    if (!byte_fallback_) {
      if (unk_before) continue;
      if (std::find(ids->begin() + before, ids->end(), unk_id_) != ids->end()) continue;
    }
    cache.Store(h, key, chunk.size(), ids->data() + before, got);
    fill_front(f, key, chunk.size(), ids->data() + before, got);
  }
  return true;
}

}  // namespace grist::tokenize::internal
