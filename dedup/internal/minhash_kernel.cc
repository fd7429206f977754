// Highway dynamic dispatch: this file is compiled once per SIMD target via foreach_target.h.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "dedup/internal/minhash_kernel.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

#include <cstddef>
#include <cstdint>
#include <string>

#include "dedup/internal/minhash_kernel.h"

HWY_BEFORE_NAMESPACE();
namespace grist::dedup::internal {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Lanes are permutations; the inner loop broadcasts one shingle hash at a time. AVX-512 targets
// (AVX3 and later) have the 64 x 64 -> 64 bit product in one instruction (vpmullq); elsewhere it is
// built from three 32 x 32 -> 64 multiplies (MulEven), which every target has:
//   a * h = lo(a)lo(h) + ((hi(a)lo(h) + lo(a)hi(h)) << 32)   (mod 2^64).
// Both are the same product mod 2^64, so every target gives the same bits.
#if HWY_TARGET != HWY_SCALAR && HWY_TARGET <= HWY_AVX3
#define GRIST_MINHASH_NATIVE_MUL64 1
#else
#define GRIST_MINHASH_NATIVE_MUL64 0
#endif
void MinHashKernelImpl(const uint64_t* HWY_RESTRICT hashes, size_t n,
                       const uint64_t* HWY_RESTRICT a, const uint64_t* HWY_RESTRICT b,
                       size_t num_perm, uint64_t* HWY_RESTRICT sig) {
#if HWY_TARGET == HWY_SCALAR
  for (size_t p = 0; p < num_perm; ++p) {
    uint64_t m = ~uint64_t{0};
    for (size_t i = 0; i < n; ++i) {
      const uint64_t v = a[p] * hashes[i] + b[p];
      m = v < m ? v : m;
    }
    sig[p] = m;
  }
#else
  const hn::ScalableTag<uint64_t> d;
#if !GRIST_MINHASH_NATIVE_MUL64
  const hn::Repartition<uint32_t, decltype(d)> d32;
#endif
  const size_t N = hn::Lanes(d);
  constexpr size_t kUnroll = 4;
  size_t p = 0;
  for (; p + kUnroll * N <= num_perm; p += kUnroll * N) {
    decltype(hn::Zero(d)) va[kUnroll], vb[kUnroll], vm[kUnroll];
#if !GRIST_MINHASH_NATIVE_MUL64
    decltype(hn::Zero(d)) vah[kUnroll];
#endif
    for (size_t u = 0; u < kUnroll; ++u) {
      va[u] = hn::LoadU(d, a + p + u * N);
#if !GRIST_MINHASH_NATIVE_MUL64
      vah[u] = hn::ShiftRight<32>(va[u]);
#endif
      vb[u] = hn::LoadU(d, b + p + u * N);
      vm[u] = hn::Set(d, ~uint64_t{0});
    }
    for (size_t i = 0; i < n; ++i) {
      const auto h = hn::Set(d, hashes[i]);
#if GRIST_MINHASH_NATIVE_MUL64
      for (size_t u = 0; u < kUnroll; ++u) {
        vm[u] = hn::Min(vm[u], hn::Add(hn::Mul(va[u], h), vb[u]));
      }
#else
      const auto h32 = hn::BitCast(d32, h);
      const auto hh32 = hn::BitCast(d32, hn::ShiftRight<32>(h));
      for (size_t u = 0; u < kUnroll; ++u) {
        const auto a32 = hn::BitCast(d32, va[u]);
        const auto lo = hn::MulEven(a32, h32);
        const auto cross = hn::Add(hn::MulEven(hn::BitCast(d32, vah[u]), h32),
                                   hn::MulEven(a32, hh32));
        const auto prod = hn::Add(lo, hn::ShiftLeft<32>(cross));
        vm[u] = hn::Min(vm[u], hn::Add(prod, vb[u]));
      }
#endif
    }
    for (size_t u = 0; u < kUnroll; ++u) hn::StoreU(vm[u], d, sig + p + u * N);
  }
  for (; p < num_perm; p += N) {
    const auto va = hn::LoadU(d, a + p);
#if !GRIST_MINHASH_NATIVE_MUL64
    const auto a32 = hn::BitCast(d32, va);
    const auto ah32 = hn::BitCast(d32, hn::ShiftRight<32>(va));
#endif
    const auto vb = hn::LoadU(d, b + p);
    auto vm = hn::Set(d, ~uint64_t{0});
    for (size_t i = 0; i < n; ++i) {
      const auto h = hn::Set(d, hashes[i]);
#if GRIST_MINHASH_NATIVE_MUL64
      vm = hn::Min(vm, hn::Add(hn::Mul(va, h), vb));
#else
      const auto h32 = hn::BitCast(d32, h);
      const auto hh32 = hn::BitCast(d32, hn::ShiftRight<32>(h));
      const auto cross = hn::Add(hn::MulEven(ah32, h32), hn::MulEven(a32, hh32));
      const auto prod = hn::Add(hn::MulEven(a32, h32), hn::ShiftLeft<32>(cross));
      vm = hn::Min(vm, hn::Add(prod, vb));
#endif
    }
    hn::StoreU(vm, d, sig + p);
  }
#endif
}

const char* TargetNameImpl() { return hwy::TargetName(HWY_TARGET); }
#undef GRIST_MINHASH_NATIVE_MUL64

}  // namespace HWY_NAMESPACE
}  // namespace grist::dedup::internal
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace grist::dedup::internal {

HWY_EXPORT(MinHashKernelImpl);
HWY_EXPORT(TargetNameImpl);

void MinHashKernel(const uint64_t* hashes, size_t n, const uint64_t* a, const uint64_t* b,
                   size_t num_perm, uint64_t* sig) {
  HWY_DYNAMIC_DISPATCH(MinHashKernelImpl)(hashes, n, a, b, num_perm, sig);
}

std::string MinHashKernelTarget() { return HWY_DYNAMIC_DISPATCH(TargetNameImpl)(); }

}  // namespace grist::dedup::internal
#endif  // HWY_ONCE
