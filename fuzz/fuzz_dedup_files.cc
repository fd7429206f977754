// Fuzzes the reader of dedup's intermediate files (dedup/internal/files.h, docs/formats/dedup.md):
// signatures, ids, line hashes, sort runs, pairs, duplicate lines, edges, clusters, stats and
// shingle-set spills. Input: u8 kind selector, then the file. Every file a later stage reads back
// goes through this reader, so it must turn any bytes into records or a Status.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "common/env.h"
#include "dedup/dedup_format.h"
#include "dedup/internal/files.h"
#include "fuzz/fuzz_seeds.h"

namespace {

namespace fmt = grist::dedup::format;
using grist::dedup::internal::FileHeader;
using grist::dedup::internal::FileReader;
using grist::dedup::internal::FileWriter;

constexpr uint32_t kBands = 14;  // a signatures record: SigRecord, then one hash per LSH band

struct KindSpec {
  fmt::Kind kind;
  uint32_t record_size;  // 0: variable length
};
const KindSpec kKinds[] = {
    {fmt::Kind::kSignatures, sizeof(fmt::SigRecord) + 8 * kBands},
    {fmt::Kind::kIds, 0},
    {fmt::Kind::kLineHashes, sizeof(fmt::LineRecord)},
    {fmt::Kind::kRun, sizeof(fmt::BucketRecord)},
    {fmt::Kind::kPairs, sizeof(fmt::PairRecord)},
    {fmt::Kind::kDupLines, sizeof(fmt::LineRecord)},
    {fmt::Kind::kEdges, sizeof(fmt::EdgeRecord)},
    {fmt::Kind::kClusters, sizeof(fmt::ClusterRecord)},
    {fmt::Kind::kStats, 8},
    {fmt::Kind::kShingleSets, 0},
};
constexpr size_t kNumKinds = sizeof(kKinds) / sizeof(kKinds[0]);

void Seeds(const char* dir) {
  for (size_t k = 0; k < kNumKinds; ++k) {
    grist::MemEnv env;
    FileHeader h;
    h.kind = kKinds[k].kind;
    h.record_size = kKinds[k].record_size;
    h.aux = h.kind == fmt::Kind::kSignatures ? kBands : 0;
    h.task = 1;
    h.tasks = 3;
    h.fingerprint = 0xfeed;
    auto w = FileWriter::Open(&env, "/f", h, /*sync=*/false);
    if (!w.ok()) std::exit(1);
    for (uint64_t i = 0; i < 3; ++i) {
      absl::Status s;
      if (h.kind == fmt::Kind::kIds) {
        s = (*w)->AddId(i << 8, "doc.jsonl:" + std::to_string(i + 1));
      } else if (h.kind == fmt::Kind::kShingleSets) {
        std::string rec;
        grist::dedup::internal::AppendSetRecord(&rec, i, {11 + i, 12 + i});
        s = (*w)->AddSerialized(rec, 1);
      } else {
        std::string rec(h.record_size, '\0');
        for (size_t b = 0; b < rec.size(); ++b) rec[b] = static_cast<char>(i + b);
        s = (*w)->AddRecord(rec.data(), rec.size());
      }
      if (!s.ok()) std::exit(1);
    }
    if (!(*w)->Finish().ok()) std::exit(1);
    if (auto r = FileReader::Open(&env, "/f", h.kind, h.record_size); !r.ok()) {
      std::fprintf(stderr, "seed refused: %s\n", std::string(r.status().message()).c_str());
      std::exit(1);
    }
    auto bytes = grist::ReadFileToString(&env, "/f");
    if (!bytes.ok()) std::exit(1);
    grist::fuzz::WriteSeed(dir, "kind" + std::to_string(k),
                           std::string(1, static_cast<char>(k)) + *bytes);
  }
}

}  // namespace

GRIST_FUZZ_SEEDS(Seeds)

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const KindSpec& spec = kKinds[data[0] % kNumKinds];
  grist::MemEnv env;
  if (!grist::WriteFileAtomic(&env, "/f",
                              std::string_view(reinterpret_cast<const char*>(data + 1), size - 1))
           .ok()) {
    __builtin_trap();
  }
  auto r = FileReader::Open(&env, "/f", spec.kind, spec.record_size);
  if (!r.ok()) return 0;
  std::vector<char> record(spec.record_size);
  uint64_t key = 0;
  std::string id;
  std::vector<uint64_t> values;
  for (uint64_t n = 0; n <= (*r)->records() && n < (1u << 20); ++n) {
    absl::StatusOr<bool> more =
        spec.kind == fmt::Kind::kIds           ? (*r)->NextId(&key, &id)
        : spec.kind == fmt::Kind::kShingleSets ? (*r)->NextSet(&key, &values)
                                               : (*r)->Next(record.data());
    if (!more.ok() || !*more) break;
    if (n == (*r)->records()) __builtin_trap();  // more records than the footer says
  }
  return 0;
}
