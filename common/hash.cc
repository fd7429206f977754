#include "common/hash.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <cstdio>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/env.h"
#include "common/status_macros.h"

namespace grist {

std::string Hash128::ToHex() const {
  char buf[33];
  std::snprintf(buf, sizeof(buf), "%016llx%016llx", static_cast<unsigned long long>(high),
                static_cast<unsigned long long>(low));
  return std::string(buf, 32);
}

static bool ParseHexU64(std::string_view s, uint64_t* out) {
  uint64_t v = 0;
  for (char c : s) {
    int d;
    if (c >= '0' && c <= '9') d = c - '0';
    else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
    else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
    else return false;
    v = (v << 4) | static_cast<uint64_t>(d);
  }
  *out = v;
  return true;
}

absl::StatusOr<Hash128> Hash128::FromHex(std::string_view hex) {
  Hash128 h;
  if (hex.size() != 32 || !ParseHexU64(hex.substr(0, 16), &h.high) ||
      !ParseHexU64(hex.substr(16), &h.low)) {
    return absl::InvalidArgumentError(
        absl::StrCat("not a 32-digit hex XXH3-128 digest: '", std::string(hex.substr(0, 40)), "'"));
  }
  return h;
}

std::string Hex64(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(v));
  return std::string(buf, 16);
}

uint64_t Hash64(const void* data, size_t size, uint64_t seed) {
  return XXH3_64bits_withSeed(data, size, seed);
}

Hash128 Hash128Of(const void* data, size_t size, uint64_t seed) {
  XXH128_hash_t h = XXH3_128bits_withSeed(data, size, seed);
  return Hash128{h.high64, h.low64};
}

struct Hasher128::State {
  XXH3_state_t st;
};
Hasher128::Hasher128(uint64_t seed) : state_(std::make_unique<State>()) {
  XXH3_128bits_reset_withSeed(&state_->st, seed);
}
Hasher128::~Hasher128() = default;
void Hasher128::Update(const void* data, size_t size) {
  XXH3_128bits_update(&state_->st, data, size);
}
Hash128 Hasher128::Digest() const {
  XXH128_hash_t h = XXH3_128bits_digest(&state_->st);
  return Hash128{h.high64, h.low64};
}

struct Hasher64::State {
  XXH3_state_t st;
};
Hasher64::Hasher64(uint64_t seed) : state_(std::make_unique<State>()) {
  XXH3_64bits_reset_withSeed(&state_->st, seed);
}
Hasher64::~Hasher64() = default;
void Hasher64::Update(const void* data, size_t size) {
  XXH3_64bits_update(&state_->st, data, size);
}
uint64_t Hasher64::Digest() const { return XXH3_64bits_digest(&state_->st); }

absl::StatusOr<Hash128> HashFile128(Env* env, const std::string& path) {
  ASSIGN_OR_RETURN(std::unique_ptr<SequentialFile> f, env->NewSequentialFile(path));
  Hasher128 h;
  std::vector<char> buf(1 << 20);
  while (true) {
    ASSIGN_OR_RETURN(size_t n, f->Read(buf.data(), buf.size()));
    if (n == 0) break;
    h.Update(buf.data(), n);
  }
  return h.Digest();
}

}  // namespace grist
