#include "loader/permutation.h"

#include "common/check.h"
#include "common/rng.h"

namespace grist::loader {

FeistelPermutation::FeistelPermutation(uint64_t n, uint64_t key) : n_(n) {
  int bits = 0;
  while (bits < 64 && (uint64_t{1} << bits) < n) ++bits;
  if (bits < 2) bits = 2;
  half_bits_ = (bits + 1) / 2;
  half_mask_ = half_bits_ >= 64 ? ~uint64_t{0} : (uint64_t{1} << half_bits_) - 1;
  uint64_t k = key;
  for (int r = 0; r < kRounds; ++r) {
    k = SplitMix64(k ^ (0x6a09e667f3bcc909ULL + static_cast<uint64_t>(r)));
    round_keys_[r] = k;
  }
}

uint64_t FeistelPermutation::Round(int r, uint64_t half) const {
  return SplitMix64(half ^ round_keys_[r]) & half_mask_;
}

uint64_t FeistelPermutation::Forward(uint64_t x) const {
  uint64_t left = (x >> half_bits_) & half_mask_;
  uint64_t right = x & half_mask_;
  for (int r = 0; r < kRounds; ++r) {
    uint64_t next = left ^ Round(r, right);
    left = right;
    right = next;
  }
  return (left << half_bits_) | right;
}

uint64_t FeistelPermutation::Backward(uint64_t x) const {
  uint64_t left = (x >> half_bits_) & half_mask_;
  uint64_t right = x & half_mask_;
  for (int r = kRounds - 1; r >= 0; --r) {
    uint64_t prev = right ^ Round(r, left);
    right = left;
    left = prev;
  }
  return (left << half_bits_) | right;
}

uint64_t FeistelPermutation::Map(uint64_t i) const {
  GRIST_CHECK(i < n_, "FeistelPermutation::Map index out of range");
  uint64_t x = Forward(i);
  while (x >= n_) x = Forward(x);  // cycle-walking: ends because Forward permutes the domain
  return x;
}

uint64_t FeistelPermutation::Inverse(uint64_t y) const {
  GRIST_CHECK(y < n_, "FeistelPermutation::Inverse index out of range");
  uint64_t x = Backward(y);
  while (x >= n_) x = Backward(x);
  return x;
}

uint64_t EpochKey(uint64_t seed, uint64_t epoch) {
  return SplitMix64(SplitMix64(seed ^ 0x243f6a8885a308d3ULL) + epoch);
}

}  // namespace grist::loader
