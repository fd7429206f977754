// Helpers shared by the ckptio tests: deterministic tensors and a one-call save.
#ifndef GRIST_TESTS_CKPTIO_CKPT_TEST_UTIL_H_
#define GRIST_TESTS_CKPTIO_CKPT_TEST_UTIL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "ckptio/checkpoint.h"
#include "ckptio/reader.h"
#include "ckptio/writer.h"
#include "common/rng.h"

namespace grist::ckptio::testing {

struct OwnedTensor {
  TensorSpec spec;
  std::string bytes;
};

inline uint64_t NumBytes(const TensorSpec& s) {
  uint64_t n = DTypeSize(s.dtype);
  for (int64_t d : s.shape) n *= static_cast<uint64_t>(d);
  return n;
}

// Bytes derived from (seed, name): the same inputs give the same tensor.
inline OwnedTensor MakeTensor(const std::string& name, DType dt, std::vector<int64_t> shape,
                              uint64_t seed) {
  OwnedTensor t{{name, dt, std::move(shape)}, {}};
  t.bytes.resize(NumBytes(t.spec));
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + std::hash<std::string>{}(name);
  for (size_t i = 0; i < t.bytes.size(); ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    t.bytes[i] = static_cast<char>(x);
  }
  return t;
}

inline std::vector<HostTensor> Refs(const std::vector<OwnedTensor>& ts) {
  std::vector<HostTensor> out;
  for (const auto& t : ts) out.push_back({t.spec, t.bytes.data()});
  return out;
}

// A small model-like state whose content depends on `step`.
inline std::vector<OwnedTensor> StepState(int64_t step, uint64_t big_bytes = 300000) {
  std::vector<OwnedTensor> ts;
  ts.push_back(MakeTensor("model.embed.weight", DType::kF32, {static_cast<int64_t>(big_bytes / 4)}, step));
  ts.push_back(MakeTensor("model.norm.bias", DType::kBF16, {33}, step));
  ts.push_back(MakeTensor("optim.step", DType::kI64, {}, step));
  return ts;
}

}  // namespace grist::ckptio::testing

#endif  // GRIST_TESTS_CKPTIO_CKPT_TEST_UTIL_H_
