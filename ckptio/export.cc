#include "ckptio/export.h"

#include <cstring>
#include <map>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "ckptio/checkpoint.h"
#include "ckptio/reader.h"
#include "ckptio/writer.h"
#include "common/env.h"
#include "common/json_writer.h"
#include "common/status_macros.h"

namespace grist::ckptio {
namespace {

uint64_t Bytes(const TensorEntry& t) {
  uint64_t n = DTypeSize(t.dtype);
  for (int64_t d : t.shape) n *= static_cast<uint64_t>(d);
  return n;
}

// Copies shard `s` (row-major bytes at `src`) into its place in the whole tensor at `dst`.
void Scatter(const TensorEntry& t, const ShardEntry& s, const char* src, char* dst) {
  const size_t es = DTypeSize(t.dtype);
  const size_t nd = t.shape.size();
  if (nd == 0) {
    std::memcpy(dst, src, es);
    return;
  }
  // Global strides (elements).
  std::vector<uint64_t> gs(nd, 1);
  for (size_t d = nd - 1; d > 0; --d) gs[d - 1] = gs[d] * static_cast<uint64_t>(t.shape[d]);
  const uint64_t row = static_cast<uint64_t>(s.lengths[nd - 1]) * es;
  std::vector<int64_t> idx(nd, 0);  // index into the shard over dims [0, nd - 1)
  uint64_t rows = 1;
  for (size_t d = 0; d + 1 < nd; ++d) rows *= static_cast<uint64_t>(s.lengths[d]);
  for (uint64_t r = 0; r < rows; ++r) {
    uint64_t g = static_cast<uint64_t>(s.offsets[nd - 1]);
    for (size_t d = 0; d + 1 < nd; ++d) g += static_cast<uint64_t>(s.offsets[d] + idx[d]) * gs[d];
    std::memcpy(dst + g * es, src + r * row, row);
    for (size_t d = nd - 1; d-- > 0;) {  // next row: odometer over the outer dims
      if (++idx[d] < s.lengths[d]) break;
      idx[d] = 0;
    }
  }
}

}  // namespace

absl::StatusOr<ExportResult> ExportCheckpoint(const std::string& dir, const std::string& out_dir,
                                              const ExportOptions& options) {
  Env* env = Env::Default();
  ASSIGN_OR_RETURN(Manifest m, ReadManifest(env, dir));
  if (m.version < 2) {
    return absl::FailedPreconditionError(absl::StrCat(dir, ": a version-1 checkpoint has no tensor "
                                                      "index (re-save it with this grist)"));
  }
  std::vector<const TensorEntry*> chosen;
  for (const TensorEntry& t : m.tensors) {
    if (t.bytes || t.name.compare(0, options.prefix.size(), options.prefix) != 0) continue;
    if (t.name.size() == options.prefix.size()) continue;
    chosen.push_back(&t);
  }
  if (chosen.empty()) {
    return absl::NotFoundError(absl::StrCat(dir, ": no tensor named '", options.prefix, "...'"));
  }
  // Output files: consecutive tensors up to max_shard_bytes each (a larger tensor gets its own).
  std::vector<std::vector<const TensorEntry*>> groups(1);
  uint64_t in_group = 0;
  ExportResult res;
  for (const TensorEntry* t : chosen) {
    const uint64_t b = Bytes(*t);
    if (!groups.back().empty() && in_group + b > options.max_shard_bytes) {
      groups.emplace_back();
      in_group = 0;
    }
    groups.back().push_back(t);
    in_group += b;
    res.total_bytes += b;
  }
  RETURN_IF_ERROR(env->CreateDirs(out_dir));
  WriterOptions wo;
  ASSIGN_OR_RETURN(auto writer, FileWriter::Create(wo));
  std::map<std::string, std::string> weight_map;
  const size_t n = groups.size();
  for (size_t g = 0; g < n; ++g) {
    const std::string fname = n == 1 ? absl::StrCat(options.base_name, ".safetensors")
                                     : absl::StrFormat("%s-%05d-of-%05d.safetensors",
                                                       options.base_name, g + 1, n);
    std::vector<TensorSpec> specs;
    for (const TensorEntry* t : groups[g]) {
      specs.push_back({t->name.substr(options.prefix.size()), t->dtype, t->shape});
      weight_map[specs.back().name] = fname;
    }
    ASSIGN_OR_RETURN(auto pending, writer->Begin(JoinPath(out_dir, fname), specs, {{"format", "pt"}}));
    absl::Status s = [&]() -> absl::Status {
      // Every shard of this file's tensors, grouped by the rank file holding it.
      std::map<int, std::vector<std::pair<size_t, const ShardEntry*>>> by_rank;
      for (size_t i = 0; i < groups[g].size(); ++i) {
        for (const ShardEntry& sh : groups[g][i]->shards) {
          if (sh.end > sh.begin) by_rank[sh.rank].emplace_back(i, &sh);
        }
      }
      for (const auto& [rank, shards] : by_rank) {
        std::vector<DataRange> ranges;
        for (const auto& [i, sh] : shards) ranges.push_back({sh->begin, sh->end});
        const ManifestFile& mf = m.files[static_cast<size_t>(rank)];
        ASSIGN_OR_RETURN(auto rr, RangeRead::Read(JoinPath(dir, mf.name), mf, ranges, ReadOptions{}));
        for (size_t k = 0; k < shards.size(); ++k) {
          const size_t i = shards[k].first;
          Scatter(*groups[g][i], *shards[k].second, rr->Range(k),
                  pending->data() + pending->layout().tensors[i].begin);
        }
      }
      return absl::OkStatus();
    }();
    if (!s.ok()) {
      pending->Abort(s);
      (void)pending->Wait();
      return s;
    }
    pending->Commit();
    RETURN_IF_ERROR(pending->Wait().status());
    res.files.push_back(fname);
    res.tensors += groups[g].size();
  }
  if (n > 1) {
    JsonWriter w(2);
    w.BeginObject().Key("metadata").BeginObject().Field("total_size", res.total_bytes).EndObject();
    w.Key("weight_map").BeginObject();
    for (const auto& [k, v] : weight_map) w.Field(k, v);
    w.EndObject().EndObject();
    RETURN_IF_ERROR(WriteFileAtomic(env, JoinPath(out_dir, absl::StrCat(options.base_name,
                                                                        ".safetensors.index.json")),
                                    w.Take() + "\n"));
    res.index = true;
  }
  return res;
}

}  // namespace grist::ckptio
