// Helpers shared by the ckptio tests: deterministic tensors and a one-call save.
#ifndef GRIST_TESTS_CKPTIO_CKPT_TEST_UTIL_H_
#define GRIST_TESTS_CKPTIO_CKPT_TEST_UTIL_H_

#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
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

// Probes of the kernel and file system under `dir`, written without grist's code, for the tests
// that skip where a feature is missing: a skip is right only when the probe fails too, so a
// regression of grist's own detection or fallback fails the test instead of skipping it.

// Whether a 4 KiB-aligned O_DIRECT write of 4 KiB to a new file in `dir` succeeds.
inline bool ProbeODirectWrite(const std::string& dir) {
  const std::string p = dir + "/.odirect-probe";
  int fd = ::open(p.c_str(), O_CREAT | O_TRUNC | O_WRONLY | O_DIRECT, 0644);
  if (fd < 0) return false;
  void* buf = nullptr;
  bool ok = ::posix_memalign(&buf, 4096, 4096) == 0;
  if (ok) {
    std::memset(buf, 0x5a, 4096);
    ok = ::pwrite(fd, buf, 4096, 0) == 4096;
  }
  std::free(buf);
  ::close(fd);
  ::unlink(p.c_str());
  return ok;
}

// write_bytes of /proc/self/io, or -1 where it cannot be read.
inline int64_t ProbeProcWriteBytes() {
  std::ifstream in("/proc/self/io");
  std::string key;
  int64_t v = 0;
  while (in >> key >> v) {
    if (key == "write_bytes:") return v;
  }
  return -1;
}

// Whether 1 MiB written and fsynced to a file in `dir` shows in /proc/self/io's write_bytes.
inline bool ProbeWriteBytesCounted(const std::string& dir) {
  const int64_t before = ProbeProcWriteBytes();
  if (before < 0) return false;
  const std::string p = dir + "/.write-bytes-probe";
  int fd = ::open(p.c_str(), O_CREAT | O_TRUNC | O_WRONLY, 0644);
  if (fd < 0) return false;
  const std::string mib(1 << 20, 'w');
  bool ok = ::write(fd, mib.data(), mib.size()) == static_cast<ssize_t>(mib.size()) &&
            ::fsync(fd) == 0;
  ::close(fd);
  ::unlink(p.c_str());
  return ok && ProbeProcWriteBytes() > before;
}

}  // namespace grist::ckptio::testing

#endif  // GRIST_TESTS_CKPTIO_CKPT_TEST_UTIL_H_
