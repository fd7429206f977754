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
// built from 32-bit multiplies (Mul64 below), which every target has:
//   a * h = lo(a)lo(h) + ((hi(a)lo(h) + lo(a)hi(h)) << 32)   (mod 2^64).
// Both are the same product mod 2^64, so every target gives the same bits. Vector multiplies are
// what limits these loops on AVX2 (one port on AMD Zen 2), so Mul64 uses two, not three.
// Without AVX-512 there is no unsigned 64-bit minimum either: Highway builds it from a signed
// compare of both operands with their top bits flipped (two XORs more per vector and hash). So the
// non-AVX-512 loops keep the running minima flipped (x ^ 2^63, as int64) and compare them signed:
// a * h + (b ^ 2^63) is (a * h + b) ^ 2^63 (adding 2^63 mod 2^64 flips the top bit), the flip
// preserves the order (unsigned x < y iff signed x ^ 2^63 < y ^ 2^63), and the minima are flipped
// back once at the end: the same bits as the unsigned minimum.
#if HWY_TARGET != HWY_SCALAR && HWY_TARGET <= HWY_AVX3
#define GRIST_MINHASH_NATIVE_MUL64 1
#else
#define GRIST_MINHASH_NATIVE_MUL64 0
#endif
#if !GRIST_MINHASH_NATIVE_MUL64 && HWY_TARGET != HWY_SCALAR
// a * h (mod 2^64), from a and h as pairs of u32 lanes (a32, h32) and h with its halves swapped
// (hswap32): one 32 x 32 -> 32 multiply of a32 by hswap32 gives both cross products' low halves,
// lo(a)hi(h) in the low lane and hi(a)lo(h) in the high one; only their sum's low 32 bits reach the
// product, shifted up: (t << 32) + (t & 0xffffffff00000000). One 32 x 32 -> 64 multiply (MulEven)
// gives lo(a)lo(h).
template <class D, class V32, class V64>
HWY_INLINE auto Mul64(D d, V32 a32, V32 h32, V32 hswap32, V64 high_half) {
  const auto t = hn::BitCast(d, hn::Mul(a32, hswap32));
  return hn::Add(hn::MulEven(a32, h32), hn::Add(hn::ShiftLeft<32>(t), hn::And(t, high_half)));
}
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
  const hn::Repartition<int64_t, decltype(d)> di;
  const auto msb = hn::Set(d, uint64_t{1} << 63);
  const auto high_half = hn::Set(d, uint64_t{0xffffffff} << 32);
  // A flipped minimum back to the unsigned value.
  const auto Unflip = [&](auto vm) { return hn::Xor(hn::BitCast(d, vm), msb); };
#endif
  const size_t N = hn::Lanes(d);
  // Four vectors of permutations per pass over the hashes, each in a variable of its own (not an
  // array), so that -O2, which does not unroll a loop over an array of vectors, still keeps the
  // accumulators in registers instead of storing and reloading them per hash.
  constexpr size_t kUnroll = 4;
  size_t p = 0;
  for (; p + kUnroll * N <= num_perm; p += kUnroll * N) {
    const auto va0 = hn::LoadU(d, a + p), va1 = hn::LoadU(d, a + p + N);
    const auto va2 = hn::LoadU(d, a + p + 2 * N), va3 = hn::LoadU(d, a + p + 3 * N);
#if GRIST_MINHASH_NATIVE_MUL64
    const auto vb0 = hn::LoadU(d, b + p), vb1 = hn::LoadU(d, b + p + N);
    const auto vb2 = hn::LoadU(d, b + p + 2 * N), vb3 = hn::LoadU(d, b + p + 3 * N);
    auto vm0 = hn::Set(d, ~uint64_t{0});
    auto vm1 = vm0, vm2 = vm0, vm3 = vm0;
    for (size_t i = 0; i < n; ++i) {
      const auto h = hn::Set(d, hashes[i]);
      vm0 = hn::Min(vm0, hn::Add(hn::Mul(va0, h), vb0));
      vm1 = hn::Min(vm1, hn::Add(hn::Mul(va1, h), vb1));
      vm2 = hn::Min(vm2, hn::Add(hn::Mul(va2, h), vb2));
      vm3 = hn::Min(vm3, hn::Add(hn::Mul(va3, h), vb3));
    }
    hn::StoreU(vm0, d, sig + p);
    hn::StoreU(vm1, d, sig + p + N);
    hn::StoreU(vm2, d, sig + p + 2 * N);
    hn::StoreU(vm3, d, sig + p + 3 * N);
#else
    // b and the minima with their top bits flipped (see the top of the file).
    const auto vb0 = hn::Xor(hn::LoadU(d, b + p), msb), vb1 = hn::Xor(hn::LoadU(d, b + p + N), msb);
    const auto vb2 = hn::Xor(hn::LoadU(d, b + p + 2 * N), msb);
    const auto vb3 = hn::Xor(hn::LoadU(d, b + p + 3 * N), msb);
    auto vm0 = hn::Set(di, INT64_MAX);
    auto vm1 = vm0, vm2 = vm0, vm3 = vm0;
    const auto a0 = hn::BitCast(d32, va0), a1 = hn::BitCast(d32, va1);
    const auto a2 = hn::BitCast(d32, va2), a3 = hn::BitCast(d32, va3);
    for (size_t i = 0; i < n; ++i) {
      const uint64_t x = hashes[i];
      const auto h32 = hn::BitCast(d32, hn::Set(d, x));
      const auto hs32 = hn::BitCast(d32, hn::Set(d, (x << 32) | (x >> 32)));
      vm0 = hn::Min(vm0, hn::BitCast(di, hn::Add(Mul64(d, a0, h32, hs32, high_half), vb0)));
      vm1 = hn::Min(vm1, hn::BitCast(di, hn::Add(Mul64(d, a1, h32, hs32, high_half), vb1)));
      vm2 = hn::Min(vm2, hn::BitCast(di, hn::Add(Mul64(d, a2, h32, hs32, high_half), vb2)));
      vm3 = hn::Min(vm3, hn::BitCast(di, hn::Add(Mul64(d, a3, h32, hs32, high_half), vb3)));
    }
    hn::StoreU(Unflip(vm0), d, sig + p);
    hn::StoreU(Unflip(vm1), d, sig + p + N);
    hn::StoreU(Unflip(vm2), d, sig + p + 2 * N);
    hn::StoreU(Unflip(vm3), d, sig + p + 3 * N);
#endif
  }
  for (; p < num_perm; p += N) {
    const auto va = hn::LoadU(d, a + p);
#if GRIST_MINHASH_NATIVE_MUL64
    const auto vb = hn::LoadU(d, b + p);
    auto vm = hn::Set(d, ~uint64_t{0});
    for (size_t i = 0; i < n; ++i) {
      vm = hn::Min(vm, hn::Add(hn::Mul(va, hn::Set(d, hashes[i])), vb));
    }
    hn::StoreU(vm, d, sig + p);
#else
    const auto a32 = hn::BitCast(d32, va);
    const auto vb = hn::Xor(hn::LoadU(d, b + p), msb);  // flipped, as above
    auto vm = hn::Set(di, INT64_MAX);
    for (size_t i = 0; i < n; ++i) {
      const uint64_t x = hashes[i];
      const auto h32 = hn::BitCast(d32, hn::Set(d, x));
      const auto hs32 = hn::BitCast(d32, hn::Set(d, (x << 32) | (x >> 32)));
      vm = hn::Min(vm, hn::BitCast(di, hn::Add(Mul64(d, a32, h32, hs32, high_half), vb)));
    }
    hn::StoreU(Unflip(vm), d, sig + p);
#endif
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
