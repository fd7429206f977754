// Fuzzes the MMIDIDX reader of the tokenize stage (tokenize::IndexedDatasetReader,
// docs/formats/mmidx.md). Input: a u32 (LE) .bin size (at most 1 MiB), then the .idx bytes. A
// dataset it opens must let every sequence be read within the .bin.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/env.h"
#include "fuzz/fuzz_seeds.h"
#include "tokenize/indexed_dataset.h"

namespace {

void Seeds(const char* dir) {
  for (int dtype : {2, 4}) {
    grist::MemEnv env;
    if (!env.CreateDirs("/d").ok()) std::exit(1);
    auto w = grist::tokenize::IndexedDatasetWriter::Open(&env, "/d/t", dtype);
    if (!w.ok()) std::exit(1);
    std::vector<std::vector<int>> seqs = {{1, 2, 3}, {}, {7}, {40000, 5, 6, 2}};
    for (const auto& s : seqs) {
      if (!(*w)->Add(s).ok()) std::exit(1);
    }
    if (!(*w)->Finish().ok()) std::exit(1);
    if (auto r = grist::tokenize::IndexedDatasetReader::Open(&env, "/d/t"); !r.ok()) std::exit(1);
    auto bin = env.GetFileSize("/d/t.bin");
    auto idx = grist::ReadFileToString(&env, "/d/t.idx");
    if (!bin.ok() || !idx.ok()) std::exit(1);
    std::string seed;
    grist::fuzz::PutLe(&seed, *bin, 4);
    seed += *idx;
    grist::fuzz::WriteSeed(dir, dtype == 2 ? "uint16" : "int32", seed);
  }
}

}  // namespace

GRIST_FUZZ_SEEDS(Seeds)

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 4) return 0;
  const uint64_t bin_bytes = grist::fuzz::GetLe(data, 4);
  if (bin_bytes > (1u << 20)) return 0;
  grist::MemEnv env;
  if (!env.CreateDirs("/d").ok()) __builtin_trap();
  std::string bin(bin_bytes, '\0');
  for (size_t i = 0; i < bin.size(); ++i) bin[i] = static_cast<char>(i * 7);
  if (!grist::WriteFileAtomic(&env, "/d/t.bin", bin).ok() ||
      !grist::WriteFileAtomic(&env, "/d/t.idx",
                              std::string_view(reinterpret_cast<const char*>(data + 4), size - 4))
           .ok()) {
    __builtin_trap();
  }
  auto r = grist::tokenize::IndexedDatasetReader::Open(&env, "/d/t");
  if (!r.ok()) return 0;
  uint64_t tokens = 0;
  std::vector<int32_t> ids;
  for (uint64_t i = 0; i < (*r)->sequences(); ++i) {
    ids.clear();
    (*r)->Read(i, &ids);
    if (ids.size() != (*r)->length(i)) __builtin_trap();
    tokens += ids.size();
  }
  if (tokens != (*r)->tokens()) __builtin_trap();
  return 0;
}
