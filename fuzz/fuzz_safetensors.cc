// Fuzzes the safetensors header parser (ckptio::ParseHeader, docs/formats/checkpoint.md): the
// input is a whole file. A header it accepts must describe tensors inside the file, in order, with
// sizes that match their shapes.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "ckptio/safetensors.h"
#include "fuzz/fuzz_seeds.h"

namespace {

void Seeds(const char* dir) {
  namespace ck = grist::ckptio;
  std::vector<ck::TensorSpec> specs = {{"model.embed.weight", ck::DType::kF32, {4, 8}},
                                       {"model.norm.bias", ck::DType::kBF16, {33}},
                                       {"optim.step", ck::DType::kI64, {}}};
  for (uint64_t block : {uint64_t{64}, uint64_t{4096}}) {
    auto layout = ck::PlanFile(specs, {{"framework", "pt"}}, block, 64);
    if (!layout.ok()) {
      std::fprintf(stderr, "%s\n", std::string(layout.status().message()).c_str());
      std::exit(1);
    }
    std::vector<uint64_t> hashes(layout->num_blocks(), 0x1234);
    std::string file = ck::RenderHeader(*layout, hashes);
    file.resize(layout->file_size, '\0');
    if (auto h = ck::ParseHeader(file, file.size(), "seed"); !h.ok()) {
      std::fprintf(stderr, "seed refused: %s\n", std::string(h.status().message()).c_str());
      std::exit(1);
    }
    grist::fuzz::WriteSeed(dir, "block" + std::to_string(block), file);
  }
}

}  // namespace

GRIST_FUZZ_SEEDS(Seeds)

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace ck = grist::ckptio;
  std::string_view file(reinterpret_cast<const char*>(data), size);
  if (size >= 8) (void)ck::HeaderBytesNeeded(file.substr(0, 8), size, "fuzz.safetensors");
  auto h = ck::ParseHeader(file, size, "fuzz.safetensors");
  if (!h.ok()) return 0;
  uint64_t at = 0;
  for (const ck::TensorInfo& t : h->tensors) {
    if (t.begin != at || t.end < t.begin || h->data_start + t.end > size) __builtin_trap();
    uint64_t n = ck::DTypeSize(t.dtype);
    for (int64_t d : t.shape) n *= static_cast<uint64_t>(d);
    if (n != t.nbytes()) __builtin_trap();
    at = t.end;
  }
  return 0;
}
