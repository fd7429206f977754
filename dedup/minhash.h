// MinHash building blocks: shingling, signatures, LSH banding parameters and exact Jaccard.
//
// Everything here works on bytes: invalid UTF-8 is treated like any other bytes (validation is the
// clean stage's job), so no input can make these functions fail. All results are deterministic and
// identical on every machine and SIMD target (AVX-512, AVX2, SSE4, scalar).
//
// Shingle normalization (documented in docs/dedup.md):
//   - ASCII letters are lowercased; bytes >= 0x80 (UTF-8 multi-byte sequences) are word bytes,
//     passed through unchanged;
//   - ASCII punctuation !"#$%&'()*+,-./:;<=>?@[\]^_`{|}~ and ASCII whitespace / control bytes are
//     separators (punctuation folding); digits are word bytes;
//   - words are the maximal runs of word bytes, joined by one space.
// Word shingles are the n consecutive words of the normalized text ("a b c d e"); a document with
// at least one but fewer than n words has exactly one shingle (all its words); a document with no
// words has no shingles. Character shingles are the n-byte windows of the normalized text (one
// shingle for a shorter non-empty text). Each shingle is hashed once with XXH3-64 (seed 0); the
// set of a document's shingle hashes, sorted and without repeats, is what signatures and Jaccard
// use.
#ifndef GRIST_DEDUP_MINHASH_H_
#define GRIST_DEDUP_MINHASH_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace grist::dedup {

enum class ShingleKind { kWord, kChar };

struct ShingleOptions {
  ShingleKind kind = ShingleKind::kWord;
  int n = 5;  // words (kWord) or bytes (kChar) per shingle; >= 1
};

// Appends the normalized text of `text` (see above) to `*out`, after clearing it.
void NormalizeForShingles(std::string_view text, std::string* out);

// The sorted, distinct XXH3-64 hashes of the shingles of `text`. `scratch` is reused between calls
// to avoid allocation (may be null). Thread-compatible.
void ShingleHashes(std::string_view text, const ShingleOptions& options, std::vector<uint64_t>* out,
                   std::string* scratch = nullptr);

// The same hashes in text order with repeats kept: enough for a MinHash signature (a minimum does
// not care about order or repeats) and cheaper, as nothing is sorted.
void ShingleHashesUnordered(std::string_view text, const ShingleOptions& options,
                            std::vector<uint64_t>* out, std::string* scratch = nullptr);

// Exact Jaccard |A n B| / |A u B| of two sorted, distinct hash sets. Two empty sets give 0.
double JaccardSorted(const uint64_t* a, size_t na, const uint64_t* b, size_t nb);
inline double JaccardSorted(const std::vector<uint64_t>& a, const std::vector<uint64_t>& b) {
  return JaccardSorted(a.data(), a.size(), b.data(), b.size());
}

// MinHash with `num_perm` cheap permutations of one 64-bit shingle hash:
//   perm_i(h) = a_i * h + b_i  (mod 2^64),  a_i odd,
// with (a_i, b_i) drawn from grist's xoshiro256** seeded with `seed`. sig[i] = min over the
// shingle set of perm_i(h); an empty set gives UINT64_MAX in every slot. The estimate of the
// Jaccard similarity is the fraction of equal slots.
//
// Compute() runs a Highway kernel chosen at run time for the best SIMD target of this CPU (an
// AVX-512 build still runs on AVX2-only machines); every target gives the same bits.
// Immutable after construction: thread-safe.
class MinHasher {
 public:
  MinHasher(int num_perm, uint64_t seed);
  int num_perm() const { return num_perm_; }
  // sig must hold num_perm() values.
  void Compute(const uint64_t* hashes, size_t n, uint64_t* sig) const;
  void Compute(const std::vector<uint64_t>& hashes, uint64_t* sig) const {
    Compute(hashes.data(), hashes.size(), sig);
  }
  // The same function written as a plain scalar loop (one permutation at a time, no SIMD): the
  // reference the tests compare against and the benchmark's in-process peer.
  void ComputeScalar(const uint64_t* hashes, size_t n, uint64_t* sig) const;
  // Name of the SIMD target the dispatcher picks on this machine ("AVX3", "AVX2", ...).
  static std::string SimdTarget();

 private:
  int num_perm_;
  size_t padded_;                // num_perm rounded up to a multiple of 8
  std::vector<uint64_t> a_, b_;  // padded_ each
};

// Fraction of equal slots of two signatures of `num_perm` values.
double EstimateJaccard(const uint64_t* a, const uint64_t* b, int num_perm);

// Probability that two documents of Jaccard similarity s share at least one band:
// 1 - (1 - s^rows)^bands.
double LshProbability(double s, int bands, int rows);

struct LshParams {
  int bands = 0;
  int rows = 0;
  double false_positive_area = 0;  // integral of P(s) over [0, threshold]
  double false_negative_area = 0;  // integral of 1 - P(s) over [threshold, 1]
};

// Picks bands x rows (bands * rows <= num_perm) minimizing
//   fp_weight * FP area + fn_weight * FN area
// of the curve above for `threshold` in (0, 1) (datasketch's criterion; fixed-step Simpson
// integration, so the choice is deterministic). Ties go to fewer bands.
LshParams OptimalLshParams(double threshold, int num_perm, double fp_weight = 0.5,
                           double fn_weight = 0.5);
// The FP/FN areas of given bands x rows at `threshold`.
LshParams LshAreas(double threshold, int bands, int rows);

}  // namespace grist::dedup

#endif  // GRIST_DEDUP_MINHASH_H_
