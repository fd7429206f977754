// XXH3 hashing helpers. All digests are of the bytes given, with seed 0 unless stated, and are
// stable across machines (xxHash's canonical results). Hex forms are lowercase, big-endian (the
// canonical XXH128 representation), 16 or 32 characters.
#ifndef GRIST_COMMON_HASH_H_
#define GRIST_COMMON_HASH_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace grist {

class Env;

struct Hash128 {
  uint64_t high = 0;
  uint64_t low = 0;
  friend bool operator==(const Hash128&, const Hash128&) = default;
  friend auto operator<=>(const Hash128&, const Hash128&) = default;
  std::string ToHex() const;
  static absl::StatusOr<Hash128> FromHex(std::string_view hex);
};

uint64_t Hash64(const void* data, size_t size, uint64_t seed = 0);
inline uint64_t Hash64(std::string_view s, uint64_t seed = 0) {
  return Hash64(s.data(), s.size(), seed);
}
Hash128 Hash128Of(const void* data, size_t size, uint64_t seed = 0);
inline Hash128 Hash128Of(std::string_view s, uint64_t seed = 0) {
  return Hash128Of(s.data(), s.size(), seed);
}
std::string Hex64(uint64_t v);

// Streaming XXH3-128 (and 64). Not thread-safe; one per stream.
class Hasher128 {
 public:
  explicit Hasher128(uint64_t seed = 0);
  ~Hasher128();
  Hasher128(const Hasher128&) = delete;
  Hasher128& operator=(const Hasher128&) = delete;
  void Update(const void* data, size_t size);
  void Update(std::string_view s) { Update(s.data(), s.size()); }
  Hash128 Digest() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

class Hasher64 {
 public:
  explicit Hasher64(uint64_t seed = 0);
  ~Hasher64();
  Hasher64(const Hasher64&) = delete;
  Hasher64& operator=(const Hasher64&) = delete;
  void Update(const void* data, size_t size);
  void Update(std::string_view s) { Update(s.data(), s.size()); }
  uint64_t Digest() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// XXH3-128 of a whole file, streamed in 1 MiB reads through `env`.
absl::StatusOr<Hash128> HashFile128(Env* env, const std::string& path);

}  // namespace grist

#endif  // GRIST_COMMON_HASH_H_
