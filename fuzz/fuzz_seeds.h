// Seeds for the libFuzzer targets of the files grist writes and reads back: each target, run with
// GRIST_FUZZ_WRITE_SEEDS=DIR, writes valid inputs made by grist's own writers into DIR and exits
// (scripts/test_extra.sh makes its seed corpus so). Fuzzing then starts from files that pass
// every check, so mutations reach the deep validation paths.
#ifndef GRIST_FUZZ_FUZZ_SEEDS_H_
#define GRIST_FUZZ_FUZZ_SEEDS_H_

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

namespace grist::fuzz {

inline void WriteSeed(const char* dir, const std::string& name, std::string_view bytes) {
  std::string path = std::string(dir) + "/" + name;
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr || std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size()) {
    std::fprintf(stderr, "cannot write seed %s\n", path.c_str());
    std::exit(1);
  }
  std::fclose(f);
}

inline void PutLe(std::string* out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

inline uint64_t GetLe(const uint8_t* p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

}  // namespace grist::fuzz

// Defines LLVMFuzzerInitialize: with GRIST_FUZZ_WRITE_SEEDS=DIR, calls fn(DIR) and exits 0.
#define GRIST_FUZZ_SEEDS(fn)                                         \
  extern "C" int LLVMFuzzerInitialize(int*, char***) {               \
    if (const char* d = std::getenv("GRIST_FUZZ_WRITE_SEEDS")) {     \
      fn(d);                                                         \
      std::exit(0);                                                  \
    }                                                                \
    return 0;                                                        \
  }

#endif  // GRIST_FUZZ_FUZZ_SEEDS_H_
