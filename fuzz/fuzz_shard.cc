// Fuzzes the release shard reader (shard::ShardReader: the .idx and the .seg of a shard,
// docs/formats/release.md). Input: u8 sample tokens, u8 dtype (even: uint16, odd: int32), u32 .bin
// size (at most 1 MiB, zeros), u32 .idx size, the .idx bytes, then the .seg bytes. The manifest's
// sizes are the files' own, so the reader's structural checks are what stands between the bytes
// and the samples. A shard it opens must give every sample with segments that tile it.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "common/env.h"
#include "fuzz/fuzz_seeds.h"
#include "shard/shard.h"
#include "shard/shard_format.h"

namespace {

namespace sh = grist::shard;

void Seeds(const char* dir) {
  for (sh::TokenDtype dtype : {sh::TokenDtype::kUint16, sh::TokenDtype::kInt32}) {
    grist::MemEnv env;
    if (!env.CreateDirs("/r/shards").ok()) std::exit(1);
    const uint32_t st = 9;
    auto w = sh::ShardWriter::Open(&env, "/r", "shards/train-00000", st, dtype);
    if (!w.ok()) std::exit(1);
    std::vector<int32_t> tokens = {5, 6, 7, 2, 8, 9, 2, 0, 0};
    std::vector<uint32_t> segs = {4, 3, 2 | sh::kSegPadBit};
    if (!(*w)->Append(tokens, segs).ok()) std::exit(1);
    std::vector<uint32_t> one = {9};
    if (!(*w)->Append(tokens, one).ok()) std::exit(1);
    auto info = (*w)->Finish();
    if (!info.ok()) std::exit(1);
    auto idx = grist::ReadFileToString(&env, "/r/shards/train-00000.idx");
    auto seg = grist::ReadFileToString(&env, "/r/shards/train-00000.seg");
    if (!idx.ok() || !seg.ok()) std::exit(1);
    if (auto r = sh::ShardReader::Open(&env, "/r", *info, st, dtype); !r.ok()) {
      std::fprintf(stderr, "seed refused: %s\n", std::string(r.status().message()).c_str());
      std::exit(1);
    }
    std::string seed;
    seed.push_back(static_cast<char>(st));
    seed.push_back(dtype == sh::TokenDtype::kUint16 ? 0 : 1);
    grist::fuzz::PutLe(&seed, info->bin.bytes, 4);
    grist::fuzz::PutLe(&seed, idx->size(), 4);
    seed += *idx;
    seed += *seg;
    grist::fuzz::WriteSeed(dir, dtype == sh::TokenDtype::kUint16 ? "uint16" : "int32", seed);
  }
}

}  // namespace

GRIST_FUZZ_SEEDS(Seeds)

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 10) return 0;
  const uint32_t sample_tokens = data[0];
  const sh::TokenDtype dtype = (data[1] & 1) ? sh::TokenDtype::kInt32 : sh::TokenDtype::kUint16;
  const uint64_t bin_bytes = grist::fuzz::GetLe(data + 2, 4);
  const uint64_t idx_bytes = grist::fuzz::GetLe(data + 6, 4);
  if (bin_bytes > (1u << 20) || idx_bytes > size - 10) return 0;
  std::string_view idx(reinterpret_cast<const char*>(data + 10), idx_bytes);
  std::string_view seg(reinterpret_cast<const char*>(data + 10 + idx_bytes), size - 10 - idx_bytes);
  grist::MemEnv env;
  if (!env.CreateDirs("/r/shards").ok()) __builtin_trap();
  sh::ShardInfo info;
  info.name = "shards/train-00000";
  info.bin = {info.name + ".bin", bin_bytes, {}};
  info.idx = {info.name + ".idx", idx.size(), {}};
  info.seg = {info.name + ".seg", seg.size(), {}};
  const uint64_t width = dtype == sh::TokenDtype::kUint16 ? 2 : 4;
  info.samples = sample_tokens ? bin_bytes / width / sample_tokens : 0;
  info.tokens = info.samples * sample_tokens;
  if (!grist::WriteFileAtomic(&env, "/r/" + info.bin.path, std::string(bin_bytes, '\0')).ok() ||
      !grist::WriteFileAtomic(&env, "/r/" + info.idx.path, idx).ok() ||
      !grist::WriteFileAtomic(&env, "/r/" + info.seg.path, seg).ok()) {
    __builtin_trap();
  }
  auto r = sh::ShardReader::Open(&env, "/r", info, sample_tokens, dtype);
  if (!r.ok()) return 0;
  for (uint64_t k = 0; k < (*r)->samples(); ++k) {
    sh::SampleView v = (*r)->sample(k);
    uint64_t covered = 0;
    for (uint32_t s : v.segments) covered += s & sh::kSegLengthMask;
    if (covered != v.sample_tokens) __builtin_trap();
    int64_t sum = 0;
    for (uint32_t i = 0; i < v.sample_tokens; ++i) sum += v.token(i);
    if (sum != 0) __builtin_trap();  // the .bin is zeros
  }
  return 0;
}
