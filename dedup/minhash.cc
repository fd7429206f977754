#include "dedup/minhash.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/hash.h"
#include "common/rng.h"
#include "dedup/internal/minhash_kernel.h"

namespace grist::dedup {
namespace {

// 0 = separator, 1 = word byte; lowercase mapping applied separately.
struct ByteTable {
  bool word[256];
  char lower[256];
  constexpr ByteTable() : word(), lower() {
    for (int c = 0; c < 256; ++c) {
      bool is_word = c >= 0x80 || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
                     (c >= 'A' && c <= 'Z');
      word[c] = is_word;
      lower[c] = static_cast<char>((c >= 'A' && c <= 'Z') ? c + ('a' - 'A') : c);
    }
  }
};
constexpr ByteTable kBytes;

}  // namespace

void NormalizeForShingles(std::string_view text, std::string* out) {
  out->resize(text.size() + 1);
  char* o = out->data();
  char* const begin = o;
  bool in_word = false;
  for (unsigned char c : text) {
    if (kBytes.word[c]) {
      if (!in_word && o != begin) *o++ = ' ';
      *o++ = kBytes.lower[c];
      in_word = true;
    } else {
      in_word = false;
    }
  }
  out->resize(static_cast<size_t>(o - begin));
}

void ShingleHashesUnordered(std::string_view text, const ShingleOptions& options,
                            std::vector<uint64_t>* out, std::string* scratch) {
  std::string local;
  std::string& norm = scratch ? *scratch : local;
  NormalizeForShingles(text, &norm);
  out->clear();
  if (norm.empty()) return;
  const size_t n = static_cast<size_t>(std::max(1, options.n));
  if (options.kind == ShingleKind::kChar) {
    if (norm.size() <= n) {
      out->push_back(Hash64(norm));
    } else {
      out->reserve(norm.size() - n + 1);
      for (size_t i = 0; i + n <= norm.size(); ++i) out->push_back(Hash64(norm.data() + i, n));
    }
  } else {
    // Word starts in the normalized text (words are separated by exactly one space).
    thread_local std::vector<uint32_t> starts;
    starts.clear();
    starts.push_back(0);
    for (size_t i = 0; i < norm.size(); ++i) {
      if (norm[i] == ' ') starts.push_back(static_cast<uint32_t>(i + 1));
    }
    const size_t words = starts.size();
    if (words <= n) {
      out->push_back(Hash64(norm));
    } else {
      out->reserve(words - n + 1);
      for (size_t i = 0; i + n <= words; ++i) {
        size_t begin = starts[i];
        size_t end = (i + n < words) ? starts[i + n] - 1 : norm.size();
        out->push_back(Hash64(norm.data() + begin, end - begin));
      }
    }
  }
}

void ShingleHashes(std::string_view text, const ShingleOptions& options, std::vector<uint64_t>* out,
                   std::string* scratch) {
  ShingleHashesUnordered(text, options, out, scratch);
  std::sort(out->begin(), out->end());
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
