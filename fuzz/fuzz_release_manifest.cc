// Fuzzes the release manifest reader (shard::ParseManifest, docs/formats/release.md): any text must
// give a Manifest or a Status, never a crash; a manifest it accepts must survive its own writer
// (ManifestToJson) and parse again.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#include "common/env.h"
#include "fuzz/fuzz_seeds.h"
#include "shard/manifest.h"
#include "tests/shard/release_fixture.h"

namespace {

void Seeds(const char* dir) {
  grist::MemEnv env;
  auto m = grist::testing::WriteTestRelease(&env, "/r");
  if (!m.ok()) {
    std::fprintf(stderr, "seed release: %s\n", std::string(m.status().message()).c_str());
    std::exit(1);
  }
  const std::string json = grist::shard::ManifestToJson(*m);
  if (auto p = grist::shard::ParseManifest(json, "seed"); !p.ok()) {
    std::fprintf(stderr, "seed refused: %s\n", std::string(p.status().message()).c_str());
    std::exit(1);
  }
  grist::fuzz::WriteSeed(dir, "manifest", json);
}

}  // namespace

GRIST_FUZZ_SEEDS(Seeds)

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto m = grist::shard::ParseManifest(text, "manifest.json");
  if (!m.ok()) return 0;
  const std::string again = grist::shard::ManifestToJson(*m);
  auto m2 = grist::shard::ParseManifest(again, "manifest.json (rewritten)");
  if (!m2.ok()) __builtin_trap();  // the writer produced what the reader refuses
  return 0;
}
