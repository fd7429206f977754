#include "dedup/minhash.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "hwy/contrib/sort/vqsort.h"

#include "common/hash.h"
#include "common/rng.h"
#include "dedup/internal/minhash_kernel.h"

namespace grist::dedup {
namespace {

// The byte a text byte becomes in the normalized text: ASCII letters lowercased, other word bytes
// (digits, bytes >= 0x80) unchanged, 0 for a separator (no word byte maps to 0).
struct ByteTable {
  unsigned char to[256];
  constexpr ByteTable() : to() {
    for (int c = 0; c < 256; ++c) {
      const bool is_word = c >= 0x80 || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
                           (c >= 'A' && c <= 'Z');
      to[c] = static_cast<unsigned char>(!is_word ? 0 : (c >= 'A' && c <= 'Z') ? c + ('a' - 'A') : c);
    }
  }
};
constexpr ByteTable kBytes;

// Writes the normalized text of `text` to `out` (room for text.size() + 1 bytes) and returns its
// length; with kStarts also the offset of each word in `starts` (room for text.size() / 2 + 1)
// and their count in `*words`. Branch-free per byte: every byte is stored, and the output position
// advances only over what is kept (a space before every word but the first, the word bytes), so
// the word lengths of real text cost no mispredicted branches. The output never gets ahead of the
// input: a space is written only in place of the separator bytes before it.
template <bool kStarts>
size_t Normalize(std::string_view text, char* out, uint32_t* starts, size_t* words) {
  const unsigned char* p = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  // The loop-carried chains are one operation each (o, w, any, in_word): the position of this
  // byte's output is computed off the chain from o, and o advances by one add.
  size_t o = 0, w = 0;
  size_t in_word = 0, any = 0;  // any: some word byte already written
  for (size_t i = 0; i < n; ++i) {
    const unsigned char t = kBytes.to[p[i]];
    const size_t is_word = t != 0;
    const size_t start = is_word & (in_word ^ 1);
    const size_t space = start & any;
    out[o] = ' ';
    const size_t at = o + space;
    if constexpr (kStarts) {
      starts[w] = static_cast<uint32_t>(at);
      w += start;
    }
    out[at] = static_cast<char>(t);
    o += space + is_word;
    in_word = is_word;
    any |= is_word;
  }
  if constexpr (kStarts) *words = w;
  return o;
}

inline uint64_t ShingleHash(const char* data, size_t n) { return XXH3_64bits(data, n); }

}  // namespace

void NormalizeForShingles(std::string_view text, std::string* out) {
  out->resize(text.size() + 1);
  out->resize(Normalize<false>(text, out->data(), nullptr, nullptr));
}

void ShingleHashesUnordered(std::string_view text, const ShingleOptions& options,
                            std::vector<uint64_t>* out, std::string* scratch) {
  std::string local;
  std::string& norm = scratch ? *scratch : local;
  out->clear();
  const size_t n = static_cast<size_t>(std::max(1, options.n));
  // Grown, never shrunk: no allocation per document once the largest one has been seen.
  if (norm.size() < text.size() + 1) norm.resize(text.size() + 1);
  char* const s = norm.data();
  if (options.kind == ShingleKind::kChar) {
    const size_t len = Normalize<false>(text, s, nullptr, nullptr);
    if (len == 0) return;
    if (len <= n) {
      out->push_back(ShingleHash(s, len));
    } else {
      out->resize(len - n + 1);
      uint64_t* h = out->data();
      for (size_t i = 0; i + n <= len; ++i) h[i] = ShingleHash(s + i, n);
    }
    return;
  }
  // Word starts in the normalized text (words are separated by exactly one space). Room for the
  // most words a text can have, not zero-filled: only the pages of the starts written are touched
  // (4 bytes a word, as a vector of the starts would take), and a buffer grown past 16 MB for a
  // huge document is given back afterwards rather than kept by the thread.
  thread_local std::unique_ptr<uint32_t[]> starts_buf;
  thread_local size_t starts_cap = 0;
  const size_t need = text.size() / 2 + 2;
  if (starts_cap < need) {
    starts_buf.reset(new uint32_t[need]);
    starts_cap = need;
  }
  struct Release {
    ~Release() {
      if (starts_cap > (size_t{4} << 20)) {
        starts_buf.reset();
        starts_cap = 0;
      }
    }
  } release;
  uint32_t* const starts = starts_buf.get();
  size_t words = 0;
  const size_t len = Normalize<true>(text, s, starts, &words);
  if (len == 0) return;
  if (words <= n) {
    out->push_back(ShingleHash(s, len));
    return;
  }
  // The end of shingle i is the start of word i + n minus its space; the last ends the text.
  starts[words] = static_cast<uint32_t>(len + 1);
  out->resize(words - n + 1);
  uint64_t* h = out->data();
  const uint32_t* st = starts;
  for (size_t i = 0; i + n <= words; ++i) h[i] = ShingleHash(s + st[i], st[i + n] - 1 - st[i]);
}

namespace internal {

void SortHashes(std::vector<uint64_t>* v) {
  // Highway's vectorized quicksort (sorting networks for small sets, in place for any size): about
  // 6 ns a hash on the dev VM's AVX-512 against 10 for a bucket sort by the top bits and 9-19 for
  // std::sort, at the clusters stage's 50-4,000 hashes a set. A sorted set of integers is the same
  // whatever sorts it. A sorter per thread (it holds the quicksort's scratch and pivot state).
  if (v->size() < 2) return;
  thread_local hwy::Sorter sorter;
  sorter(v->data(), v->size(), hwy::SortAscending());
}

}  // namespace internal

void ShingleHashes(std::string_view text, const ShingleOptions& options, std::vector<uint64_t>* out,
                   std::string* scratch) {
  ShingleHashesUnordered(text, options, out, scratch);
  internal::SortHashes(out);
  out->erase(std::unique(out->begin(), out->end()), out->end());
}

double JaccardSorted(const uint64_t* a, size_t na, const uint64_t* b, size_t nb) {
  if (na == 0 && nb == 0) return 0.0;
  size_t i = 0, j = 0, inter = 0;
  while (i < na && j < nb) {
    if (a[i] < b[j]) {
      ++i;
    } else if (b[j] < a[i]) {
      ++j;
    } else {
      ++inter;
      ++i;
      ++j;
    }
  }
  const size_t uni = na + nb - inter;
  return static_cast<double>(inter) / static_cast<double>(uni);
}

MinHasher::MinHasher(int num_perm, uint64_t seed) : num_perm_(std::max(1, num_perm)) {
  padded_ = (static_cast<size_t>(num_perm_) + 7) / 8 * 8;
  a_.resize(padded_);
  b_.resize(padded_);
  Rng rng(seed);
  for (size_t i = 0; i < padded_; ++i) {
    a_[i] = rng.Next() | 1;
    b_[i] = rng.Next();
  }
}

void MinHasher::Compute(const uint64_t* hashes, size_t n, uint64_t* sig) const {
  if (padded_ == static_cast<size_t>(num_perm_)) {
    internal::MinHashKernel(hashes, n, a_.data(), b_.data(), padded_, sig);
    return;
  }
  thread_local std::vector<uint64_t> tmp;
  tmp.resize(padded_);
  internal::MinHashKernel(hashes, n, a_.data(), b_.data(), padded_, tmp.data());
  std::copy(tmp.begin(), tmp.begin() + num_perm_, sig);
}

void MinHasher::ComputeScalar(const uint64_t* hashes, size_t n, uint64_t* sig) const {
  for (int p = 0; p < num_perm_; ++p) {
    uint64_t m = std::numeric_limits<uint64_t>::max();
    for (size_t i = 0; i < n; ++i) m = std::min(m, a_[p] * hashes[i] + b_[p]);
    sig[p] = m;
  }
}

std::string MinHasher::SimdTarget() { return internal::MinHashKernelTarget(); }

double EstimateJaccard(const uint64_t* a, const uint64_t* b, int num_perm) {
  int eq = 0;
  for (int i = 0; i < num_perm; ++i) eq += a[i] == b[i];
  return num_perm > 0 ? static_cast<double>(eq) / num_perm : 0.0;
}

double LshProbability(double s, int bands, int rows) {
  return 1.0 - std::pow(1.0 - std::pow(s, rows), bands);
}

namespace {

// Simpson's rule with a fixed, even number of intervals.
template <typename F>
double Integrate(F f, double lo, double hi) {
  constexpr int kSteps = 200;
  const double h = (hi - lo) / kSteps;
  double sum = f(lo) + f(hi);
  for (int i = 1; i < kSteps; ++i) sum += f(lo + i * h) * ((i % 2) ? 4.0 : 2.0);
  return sum * h / 3.0;
}

}  // namespace

LshParams LshAreas(double threshold, int bands, int rows) {
  LshParams p;
  p.bands = bands;
  p.rows = rows;
  p.false_positive_area =
      Integrate([&](double s) { return LshProbability(s, bands, rows); }, 0.0, threshold);
  p.false_negative_area =
      Integrate([&](double s) { return 1.0 - LshProbability(s, bands, rows); }, threshold, 1.0);
  return p;
}

LshParams OptimalLshParams(double threshold, int num_perm, double fp_weight, double fn_weight) {
  LshParams best;
  double best_err = std::numeric_limits<double>::infinity();
  for (int b = 1; b <= num_perm; ++b) {
    for (int r = 1; b * r <= num_perm; ++r) {
      LshParams p = LshAreas(threshold, b, r);
      double err = fp_weight * p.false_positive_area + fn_weight * p.false_negative_area;
      if (err < best_err - 1e-15) {
        best_err = err;
        best = p;
      }
    }
  }
  return best;
}

}  // namespace grist::dedup
