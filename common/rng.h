// grist's own deterministic PRNGs. std:: distributions differ between standard libraries, so all
// randomness in grist comes from these, seeded from the config.
#ifndef GRIST_COMMON_RNG_H_
#define GRIST_COMMON_RNG_H_

#include <cstdint>

namespace grist {

// SplitMix64 step: a good 64-bit mixer (Steele, Lea, Flood 2014). Also a stateless hash of `x`.
constexpr uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// xoshiro256** (Blackman, Vigna), seeded through SplitMix64.
class Rng {
 public:
  explicit Rng(uint64_t seed) {
    uint64_t x = seed;
    for (auto& w : s_) {
      x += 0x9e3779b97f4a7c15ULL;
      w = SplitMix64(x);
    }
  }
  uint64_t Next() {
    const uint64_t result = Rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = Rotl(s_[3], 45);
    return result;
  }
  // Uniform in [0, n) without modulo bias (Lemire's method with rejection). n > 0.
  uint64_t Uniform(uint64_t n) {
    while (true) {
      unsigned __int128 m = static_cast<unsigned __int128>(Next()) * n;
      uint64_t low = static_cast<uint64_t>(m);
      if (low >= n || low >= (-n) % n) return static_cast<uint64_t>(m >> 64);
    }
  }
  // Uniform double in [0, 1) with 53 bits.
  double UniformDouble() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }

 private:
  static constexpr uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];
};

}  // namespace grist

#endif  // GRIST_COMMON_RNG_H_
