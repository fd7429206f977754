// Fuzzes the release manifest reader (shard::ParseManifest, docs/formats/release.md): any text must
// give a Manifest or a Status, never a crash; a manifest it accepts must survive its own writer
// (ManifestToJson) and parse again.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#include "common/hash.h"
#include "fuzz/fuzz_seeds.h"
#include "shard/manifest.h"

namespace {

void Seeds(const char* dir) {
  grist::shard::Manifest m;
  m.release_version = "1.0";
  m.grist_version = "0.0.0-fuzz";
  m.config_json = "{\"seed\":1}";
  m.config_xxh3_128 = grist::Hash128Of(m.config_json);
  m.inputs.push_back({"corpus/a.jsonl", 1234, {}});
  m.tokenizer.file = {"tokenizer.model", 99, {}};
  m.tokenizer.vocab_size = 600;
  m.tokenizer.eos_id = 2;
  m.tokenizer.pad_id = 2;
  m.tokenizer.model_type = "bpe";
  m.seq_len = 8;
  m.sample_tokens = 9;
  m.seed = 1;
  m.packing = "bestfit";
  for (const char* split : {"train", "validation"}) {
    grist::shard::SplitInfo s;
    grist::shard::ShardInfo sh;
    sh.name = std::string("shards/") + split + "-00000";
    sh.samples = 2;
    sh.tokens = 18;
    sh.bin = {sh.name + ".bin", 36, {}};
    sh.idx = {sh.name + ".idx", 70, {}};
    sh.seg = {sh.name + ".seg", 64, {}};
    s.samples = 2;
    s.tokens = 18;
    s.documents = 3;
    s.shards.push_back(sh);
    m.splits[split] = s;
  }
  m.release_id = grist::shard::ComputeReleaseId(m);
  const std::string json = grist::shard::ManifestToJson(m);
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
