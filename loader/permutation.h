// A keyed pseudo-random bijection of [0, n): a balanced Feistel network over the smallest even-bit
// power-of-two domain that holds n, with cycle-walking back into [0, n) (Black and Rogaway 2002).
// Each lookup takes O(1) memory and on average fewer than 4 network evaluations; nothing is built
// up front, whatever n is. The output depends only on (n, key): the round function is grist's own
// SplitMix64, so it is the same on every machine and standard library.
//
// Thread safety: immutable after construction; Map/Inverse may be called from any thread.
#ifndef GRIST_LOADER_PERMUTATION_H_
#define GRIST_LOADER_PERMUTATION_H_

#include <cstdint>

namespace grist::loader {

class FeistelPermutation {
 public:
  static constexpr int kRounds = 6;

  // A permutation of [0, n) keyed by `key`. n may be 0 (empty) or 1 (identity).
  FeistelPermutation(uint64_t n, uint64_t key);

  uint64_t size() const { return n_; }
  // The image of i; i < size() (a programmer error otherwise: CHECK).
  uint64_t Map(uint64_t i) const;
  // The preimage of y; Inverse(Map(i)) == i.
  uint64_t Inverse(uint64_t y) const;

 private:
  uint64_t Forward(uint64_t x) const;
  uint64_t Backward(uint64_t x) const;
  uint64_t Round(int r, uint64_t half) const;

  uint64_t n_;
  int half_bits_;
  uint64_t half_mask_;
  uint64_t round_keys_[kRounds];
};

// The key of epoch `epoch`'s permutation for `seed`: every epoch is shuffled independently.
uint64_t EpochKey(uint64_t seed, uint64_t epoch);

}  // namespace grist::loader

#endif  // GRIST_LOADER_PERMUTATION_H_
