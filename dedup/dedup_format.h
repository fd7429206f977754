// Constants of dedup's intermediate files. The format is specified in docs/formats/dedup.md.
#ifndef GRIST_DEDUP_DEDUP_FORMAT_H_
#define GRIST_DEDUP_DEDUP_FORMAT_H_

#include <cstddef>
#include <cstdint>

namespace grist::dedup::format {

// Every intermediate file: Header, records, Footer (all integers little-endian).
inline constexpr char kMagic[8] = {'G', 'R', 'D', 'E', 'D', 'U', 'P', '\0'};
inline constexpr char kFooterMagic[8] = {'G', 'R', 'D', 'D', 'E', 'N', 'D', '\0'};
inline constexpr uint32_t kVersion = 2;  // 2: signatures hold band hashes, not the MinHash
inline constexpr size_t kHeaderSize = 40;
inline constexpr size_t kFooterSize = 24;
// Variable-length records (kIds): u64 key, u32 length, bytes; lengths above this are corruption.
inline constexpr uint32_t kMaxIdBytes = 1u << 20;

// Variable-length records (kShingleSets): SetRecord, then `count` u64 values: the document's sorted
// distinct shingle hashes (header aux = 0, verification on) or its MinHash signature (aux =
// num_perm, verification off).
struct SetRecord {
  uint64_t key;
  uint32_t count;
  uint32_t reserved;  // 0
};
static_assert(sizeof(SetRecord) == 16);

enum class Kind : uint32_t {
  kSignatures = 1,  // per document: SigRecord + num_perm u64 min-hashes (aux = num_perm)
  kIds = 2,         // per document: key, document id string (variable length)
  kLineHashes = 3,  // per (document, distinct line): LineRecord
  kRun = 4,         // a sorted run of the external sort: BucketRecord
  kPairs = 5,       // candidate pairs: PairRecord, sorted by (a, b), distinct
  kDupLines = 6,    // line hashes that occur in more than one document: LineRecord (doc = 0)
  kEdges = 7,       // verified pairs: EdgeRecord, sorted by (a, b)
  kClusters = 8,    // removed documents: ClusterRecord, sorted by doc
  kStats = 9,       // a stage task's counters: u64 values (see dedup.cc StatSlot)
  kShingleSets = 10,  // clusters spill, per candidate document in key order: SetRecord + u64[count]
};

// Document key: (split index << 40) | ordinal of the record within its split. Keys order documents
// exactly as the input order, whatever the thread or task count.
inline constexpr int kOrdinalBits = 40;

// SigRecord flags.
inline constexpr uint32_t kFlagNoShingles = 1;  // no words: no signature, never a near duplicate
inline constexpr uint32_t kFlagBadRecord = 2;   // the reader reported an error: not deduplicated

struct SigRecord {  // followed by `bands` u64: the LSH band hashes (none without near dedup)
  uint64_t key;
  uint64_t exact_hi;
  uint64_t exact_lo;
  uint32_t shingles;  // shingles in the text, repeats included
  uint32_t flags;
};
static_assert(sizeof(SigRecord) == 32);

struct LineRecord {
  uint64_t hi;
  uint64_t lo;
  uint64_t doc;
};
static_assert(sizeof(LineRecord) == 24);

// Bucket record; tag 0 = exact text hash, 1 = line hash, 2 + b = band b's hash (in lo).
struct BucketRecord {
  uint64_t tag;
  uint64_t hi;
  uint64_t lo;
  uint64_t doc;
};
static_assert(sizeof(BucketRecord) == 32);

enum class PairKind : uint32_t { kExact = 0, kNear = 1 };

struct PairRecord {
  uint64_t a;  // earlier document (a < b)
  uint64_t b;
  uint32_t kind;  // PairKind
  uint32_t reserved;
};
static_assert(sizeof(PairRecord) == 24);

struct EdgeRecord {
  uint64_t a;
  uint64_t b;
  double similarity;
  uint32_t kind;
  uint32_t reserved;
};
static_assert(sizeof(EdgeRecord) == 32);

struct ClusterRecord {
  uint64_t doc;           // the removed document
  uint64_t kept;          // the cluster's kept document (its first in input order)
  uint64_t duplicate_of;  // its most similar partner earlier in input order (any partner if none)
  double similarity;      // of doc and duplicate_of (1 for exact)
  uint64_t cluster;       // cluster number, 0-based, in the order of the kept documents
  uint32_t kind;          // PairKind of that edge
  uint32_t cluster_size;
};
static_assert(sizeof(ClusterRecord) == 48);

// Sort orders used by the stages (field by field, as declared).
inline bool operator<(const BucketRecord& x, const BucketRecord& y) {
  if (x.tag != y.tag) return x.tag < y.tag;
  if (x.hi != y.hi) return x.hi < y.hi;
  if (x.lo != y.lo) return x.lo < y.lo;
  return x.doc < y.doc;
}
inline bool operator<(const PairRecord& x, const PairRecord& y) {
  if (x.a != y.a) return x.a < y.a;
  if (x.b != y.b) return x.b < y.b;
  return x.kind < y.kind;
}

}  // namespace grist::dedup::format

#endif  // GRIST_DEDUP_DEDUP_FORMAT_H_
