// Fuzzes the checkpoint manifest readers (ckptio::ParseManifest and ParseFileRecord,
// docs/formats/checkpoint.md): any text gives a value or a Status; what is accepted survives its
// own writer.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#include "ckptio/checkpoint.h"
#include "fuzz/fuzz_seeds.h"

namespace {

void Seeds(const char* dir) {
  namespace ck = grist::ckptio;
  ck::Manifest m;
  m.step = 120;
  m.world_size = 2;
  m.created_by = "grist fuzz";
  m.metadata = {{"loader_state", "{\"consumed_samples\":7}"}, {"note", "x"}};
  for (int r = 0; r < 2; ++r) {
    ck::ManifestFile f;
    f.rank = r;
    f.name = ck::RankFileName(r);
    f.size = 4096 + r;
    f.data_len = 1000;
    f.tensors = 3;
    f.header_hash = 77 + r;
    m.files.push_back(f);
  }
  if (auto p = ck::ParseManifest(ck::ManifestJson(m), "seed"); !p.ok()) {
    std::fprintf(stderr, "seed refused: %s\n", std::string(p.status().message()).c_str());
    std::exit(1);
  }
  grist::fuzz::WriteSeed(dir, "manifest", ck::ManifestJson(m));
  grist::fuzz::WriteSeed(dir, "file_record", ck::FileRecordJson(m.files[1]));
}

}  // namespace

GRIST_FUZZ_SEEDS(Seeds)

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace ck = grist::ckptio;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto m = ck::ParseManifest(text, "manifest.json");
  if (m.ok() && !ck::ParseManifest(ck::ManifestJson(*m), "rewritten").ok()) __builtin_trap();
  auto f = ck::ParseFileRecord(text);
  if (f.ok() && !ck::ParseFileRecord(ck::FileRecordJson(*f)).ok()) __builtin_trap();
  return 0;
}
