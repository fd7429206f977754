// The SIMD MinHash kernel (Highway, dynamic dispatch). Private to grist::dedup.
#ifndef GRIST_DEDUP_INTERNAL_MINHASH_KERNEL_H_
#define GRIST_DEDUP_INTERNAL_MINHASH_KERNEL_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace grist::dedup::internal {

// sig[p] = min_i (a[p] * hashes[i] + b[p]) mod 2^64 for p < num_perm (a multiple of 8);
// UINT64_MAX everywhere when n == 0.
void MinHashKernel(const uint64_t* hashes, size_t n, const uint64_t* a, const uint64_t* b,
                   size_t num_perm, uint64_t* sig);
std::string MinHashKernelTarget();

// Sorts 64-bit hashes ascending (repeats kept), the same order as std::sort, in place with
// Highway's vectorized quicksort (O(n log n) whatever the hashes, no buffer of their size).
// Defined in minhash.cc.
void SortHashes(std::vector<uint64_t>* v);

}  // namespace grist::dedup::internal

#endif  // GRIST_DEDUP_INTERNAL_MINHASH_KERNEL_H_
