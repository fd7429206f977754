// TOML configuration with typed, key-naming access.
//
// Keys are dotted paths ("dedup.threshold"). Every Get* records the value it resolved (the file's,
// or the default), so ResolvedJson() gives the full effective configuration, defaults included, for
// a manifest, and UnusedKeys() lists keys in the file that nothing read (typos).
//
// Errors name the key and the file: InvalidArgument "config configs/v1.0.toml: key 'pack.seq_len':
// expected an integer, got string", NotFound "... missing required key 'tokenizer.vocab_size'".
//
// Thread safety: const methods are not thread-safe (they record accesses); use from one thread.
#ifndef GRIST_COMMON_CONFIG_H_
#define GRIST_COMMON_CONFIG_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace grist {

class Env;

class Config {
 public:
  Config();  // empty: every Get returns its default
  ~Config();
  Config(Config&&) noexcept;
  Config& operator=(Config&&) noexcept;

  static absl::StatusOr<Config> FromFile(Env* env, const std::string& path);
  static absl::StatusOr<Config> FromString(std::string_view toml, std::string source_name);

  bool Has(std::string_view key) const;

  // With a default: missing -> default; wrong type -> InvalidArgument.
  absl::StatusOr<int64_t> GetInt(std::string_view key, int64_t def) const;
  absl::StatusOr<double> GetDouble(std::string_view key, double def) const;  // ints accepted
  absl::StatusOr<bool> GetBool(std::string_view key, bool def) const;
  absl::StatusOr<std::string> GetString(std::string_view key, std::string def) const;
  absl::StatusOr<std::vector<std::string>> GetStringList(std::string_view key,
                                                         std::vector<std::string> def) const;
  // Required: missing -> NotFound naming the key.
  absl::StatusOr<int64_t> RequireInt(std::string_view key) const;
  absl::StatusOr<double> RequireDouble(std::string_view key) const;
  absl::StatusOr<std::string> RequireString(std::string_view key) const;
  absl::StatusOr<std::vector<std::string>> RequireStringList(std::string_view key) const;

  // Overrides a value (e.g. from a command-line flag); recorded like a file value.
  void SetString(std::string_view key, std::string value);
  void SetInt(std::string_view key, int64_t value);
  void SetDouble(std::string_view key, double value);  // GetDouble also takes a SetInt value
  void SetBool(std::string_view key, bool value);
  void SetStringList(std::string_view key, std::vector<std::string> value);

  // The resolved values read so far, as a canonical JSON object (keys sorted, nested by section).
  std::string ResolvedJson(int indent = 2) const;
  // Keys present in the file (leaf values) that no Get/Require has read, sorted.
  std::vector<std::string> UnusedKeys() const;
  const std::string& source() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace grist

#endif  // GRIST_COMMON_CONFIG_H_
