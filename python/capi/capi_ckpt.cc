// C ABI of ckptio for python/grist/ckpt.py (see capi_common.h for the conventions). Strings
// returned through `const char** out` live in a thread-local buffer until the next call of a
// grist_ckpt_* function on the same thread.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <simdjson.h>

#include "absl/strings/str_cat.h"
#include "ckptio/checkpoint.h"
#include "ckptio/export.h"
#include "ckptio/reader.h"
#include "ckptio/writer.h"
#include "common/json_writer.h"
#include "python/capi/capi_common.h"

namespace {

using grist::capi::SetError;
namespace ck = grist::ckptio;

thread_local std::string out_text;

int Out(std::string s, const char** out) {
  out_text = std::move(s);
  *out = out_text.c_str();
  return 0;
}

ck::Metadata MakeMeta(int n, const char** keys, const char** vals) {
  ck::Metadata m;
  for (int i = 0; i < n; ++i) m.emplace_back(keys[i], vals[i]);
  return m;
}

struct Loaded {
  ck::LoadedCheckpoint ckpt;  // the manifest
  ck::ManifestFile expected;
  bool has_expected = false;
  std::unique_ptr<ck::StreamingRead> stream;
  std::unique_ptr<ck::LoadedFile> file;  // after finish (owns the buffer from then on)
};

}  // namespace

// overlap: -1 auto, 0 write after the snapshot, 1 write while copying. copy_threads: 0 default.
GRIST_CAPI int grist_ckpt_writer_new(int direct, int queue_depth, uint64_t block_size, int overlap,
                                     int copy_threads, void** out) {
  ck::WriterOptions o;
  if (copy_threads > 0) o.copy_threads = copy_threads;
  o.overlap = overlap < 0 ? ck::Overlap::kAuto : overlap ? ck::Overlap::kOn : ck::Overlap::kOff;
  o.mode = direct ? ck::IoMode::kDirect : ck::IoMode::kBuffered;
  if (queue_depth > 0) o.queue_depth = queue_depth;
  if (block_size > 0) o.block_size = block_size;
  auto w = ck::FileWriter::Create(o);
  if (!w.ok()) return SetError(w.status());
  *out = w->release();
  return 0;
}

GRIST_CAPI void grist_ckpt_writer_free(void* w) { delete static_cast<ck::FileWriter*>(w); }

// The writer's default copy thread count, and a parallel memcpy with a given count: the peer that
// measures the snapshot floor (scripts/gpu/ckpt_host_blocked.py).
GRIST_CAPI int grist_ckpt_default_copy_threads(void) { return ck::DefaultCopyThreads(); }

GRIST_CAPI void grist_ckpt_memcpy(uint64_t dst, uint64_t src, uint64_t n, int threads) {
  ck::CopyBytes(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), n, threads);
}

GRIST_CAPI int grist_ckpt_cuda_available(void) { return ck::CudaAvailable() ? 1 : 0; }

GRIST_CAPI int grist_ckpt_prepare_dir(const char* dir) {
  return SetError(ck::PrepareCheckpointDir(grist::Env::Default(), dir));
}

namespace {

absl::StatusOr<std::vector<ck::TensorSpec>> MakeSpecs(int n, const char** names, const int* dtypes,
                                                      const int* ndims, const int64_t* dims) {
  std::vector<ck::TensorSpec> specs(static_cast<size_t>(n));
  size_t d = 0;
  for (int i = 0; i < n; ++i) {
    if (dtypes[i] < 0 || dtypes[i] >= ck::kNumDTypes) {
      return absl::InvalidArgumentError(absl::StrCat("bad dtype code ", dtypes[i]));
    }
    specs[i].name = names[i];
    specs[i].dtype = static_cast<ck::DType>(dtypes[i]);
    specs[i].shape.assign(dims + d, dims + d + ndims[i]);
    d += static_cast<size_t>(ndims[i]);
  }
  return specs;
}

}  // namespace

// dtypes are ck::DType numbers; dims holds every tensor's dimensions back to back.
GRIST_CAPI int grist_ckpt_begin(void* writer, const char* path, int n, const char** names,
                                const int* dtypes, const int* ndims, const int64_t* dims, int nmeta,
                                const char** meta_keys, const char** meta_vals, void** out) {
  auto specs = MakeSpecs(n, names, dtypes, ndims, dims);
  if (!specs.ok()) return SetError(specs.status());
  auto p = static_cast<ck::FileWriter*>(writer)->Begin(path, *specs, MakeMeta(nmeta, meta_keys, meta_vals));
  if (!p.ok()) return SetError(p.status());
  *out = p->release();
  return 0;
}

// Address of the data region and each tensor's byte offset in it.
GRIST_CAPI int grist_ckpt_pending_layout(void* p, uint64_t* data, uint64_t* begins, int n) {
  auto* pf = static_cast<ck::PendingFile*>(p);
  const auto& L = pf->layout();
  if (static_cast<size_t>(n) != L.tensors.size()) {
    return SetError(absl::InvalidArgumentError("tensor count mismatch"));
  }
  *data = reinterpret_cast<uint64_t>(pf->data());
  for (int i = 0; i < n; ++i) begins[i] = L.tensors[i].begin;
  return 0;
}

// FileWriter::SaveInPlace: srcs[i] is tensor i's address (its bytes must stay unchanged and alive
// until the pending file is waited for and freed).
GRIST_CAPI int grist_ckpt_save_in_place(void* writer, const char* path, int n, const char** names,
                                        const int* dtypes, const int* ndims, const int64_t* dims,
                                        const uint64_t* srcs, int nmeta, const char** meta_keys,
                                        const char** meta_vals, void** out) {
  auto specs = MakeSpecs(n, names, dtypes, ndims, dims);
  if (!specs.ok()) return SetError(specs.status());
  std::vector<ck::HostTensor> tensors(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    tensors[i].spec = (*specs)[i];
    tensors[i].data = reinterpret_cast<const void*>(srcs[i]);
  }
  auto p = static_cast<ck::FileWriter*>(writer)->SaveInPlace(path, tensors,
                                                             MakeMeta(nmeta, meta_keys, meta_vals));
  if (!p.ok()) return SetError(p.status());
  *out = p->release();
  return 0;
}

// PendingFile::CopyIn: n host spans (data-region offset, source address, length) copied by the
// writer's copy pool; with mark_ready the copied prefix is marked ready as it lands.
GRIST_CAPI void grist_ckpt_pending_copy(void* p, int n, const uint64_t* offsets, const uint64_t* srcs,
                                        const uint64_t* lens, int mark_ready) {
  std::vector<ck::HostSpan> spans(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) spans[i] = {offsets[i], reinterpret_cast<const void*>(srcs[i]), lens[i]};
  static_cast<ck::PendingFile*>(p)->CopyIn(spans, mark_ready != 0);
}

GRIST_CAPI void grist_ckpt_pending_mark_ready(void* p, uint64_t upto) {
  static_cast<ck::PendingFile*>(p)->MarkReady(upto);
}

GRIST_CAPI void grist_ckpt_pending_abort(void* p, const char* why) {
  static_cast<ck::PendingFile*>(p)->Abort(absl::CancelledError(why));
}

GRIST_CAPI int grist_ckpt_pending_done(void* p) {
  return static_cast<ck::PendingFile*>(p)->Done() ? 1 : 0;
}

// Blocks until the file is durable; `out` gets its manifest record (JSON) for `rank`.
GRIST_CAPI int grist_ckpt_pending_wait(void* p, int rank, const char** out) {
  auto r = static_cast<ck::PendingFile*>(p)->Wait();
  if (!r.ok()) return SetError(r.status());
  grist::JsonWriter w(0);
  w.BeginObject().Key("record").Raw(ck::FileRecordJson(ck::ToManifestFile(*r, rank)));
  w.Field("direct", r->direct).Field("seconds", r->seconds).Field("fixed_buffers", r->fixed_buffers);
  w.Field("in_place_bytes", r->in_place_bytes);
  w.Key("notes").BeginArray();
  for (const auto& n : r->notes) w.String(n);
  w.EndArray().EndObject();
  return Out(w.Take(), out);
}

GRIST_CAPI void grist_ckpt_pending_free(void* p) { delete static_cast<ck::PendingFile*>(p); }

// records: n JSON file records (from grist_ckpt_pending_wait's "record").
// index_json: the global tensor index (ck::TensorIndexJson's grammar), validated before publishing.
GRIST_CAPI int grist_ckpt_publish(const char* dir, int64_t step, int world_size, int n,
                                  const char** records, int nmeta, const char** meta_keys,
                                  const char** meta_vals, const char* index_json,
                                  const char* structure_json, int keep_last) {
  ck::Manifest m;
  m.version = ck::kManifestVersionCurrent;
  m.step = step;
  m.world_size = world_size;
  m.metadata = MakeMeta(nmeta, meta_keys, meta_vals);
  for (int i = 0; i < n; ++i) {
    auto f = ck::ParseFileRecord(records[i]);
    if (!f.ok()) return SetError(f.status());
    m.files.push_back(*f);
  }
  std::sort(m.files.begin(), m.files.end(),
            [](const ck::ManifestFile& a, const ck::ManifestFile& b) { return a.rank < b.rank; });
  for (size_t i = 0; i < m.files.size(); ++i) {
    if (m.files[i].rank != static_cast<int>(i)) {
      return SetError(absl::InvalidArgumentError(absl::StrCat("publishing ", dir, ": no file of rank ", i)));
    }
  }
  auto index = ck::ParseTensorIndex(index_json ? index_json : "[]", m, std::string(dir));
  if (!index.ok()) return SetError(index.status());
  m.tensors = std::move(*index);
  if (structure_json && *structure_json) {
    simdjson::dom::parser parser;
    simdjson::dom::element e;
    if (parser.parse(simdjson::padded_string(std::string_view(structure_json))).get(e)) {
      return SetError(absl::InvalidArgumentError("structure is not valid JSON"));
    }
    m.structure = simdjson::minify(e);
  }
  grist::Env* env = grist::Env::Default();
  if (absl::Status s = ck::PublishCheckpoint(env, dir, m); !s.ok()) return SetError(s);
  return SetError(ck::ApplyRetention(env, grist::DirName(dir), keep_last));
}

GRIST_CAPI int grist_ckpt_latest(const char* root, int verify, const char** out) {
  auto r = ck::LatestCheckpoint(grist::Env::Default(), root, verify != 0);
  if (!r.ok()) return SetError(r.status());
  return Out(*r, out);
}

GRIST_CAPI int grist_ckpt_list(const char* root, const char** out) {
  auto r = ck::ListCheckpoints(grist::Env::Default(), root);
  if (!r.ok()) return SetError(r.status());
  grist::JsonWriter w(0);
  w.BeginArray();
  for (const auto& c : *r) w.BeginObject().Field("path", c.path).Field("step", c.step).EndObject();
  w.EndArray();
  return Out(w.Take(), out);
}

GRIST_CAPI int grist_ckpt_verify(const char* dir) {
  return SetError(ck::VerifyCheckpoint(dir, ck::ReadOptions{}));
}

GRIST_CAPI int grist_ckpt_step_from_name(const char* dir, int64_t* step) {
  *step = ck::StepFromName(dir);
  return 0;
}

// Starts loading rank `rank` of the checkpoint at `dir` (or, when `dir` names a .safetensors file,
// that file alone) and returns once the header is read. `out_info` gets JSON: step, world_size,
// metadata, file_metadata, tensors with name/dtype code/shape/offset/nbytes, the data address and
// whether the buffer is pinned. Data then arrives in file order: grist_ckpt_load_wait_data(upto)
// blocks until data bytes [0, upto) are in memory (not yet verified); grist_ckpt_load_finish
// verifies every checksum. Release with grist_ckpt_load_free.
GRIST_CAPI int grist_ckpt_load(const char* dir, int rank, int verify, int direct, void** handle,
                               const char** out_info) {
  ck::ReadOptions ro;
  ro.verify = verify != 0;
  ro.direct = direct != 0;
  auto h = std::make_unique<Loaded>();
  std::string p(dir);
  std::string file;
  if (p.size() > 12 && p.substr(p.size() - 12) == ".safetensors") {
    ro.require_checksums = false;
    file = p;
  } else {
    auto m = ck::ReadManifest(grist::Env::Default(), p);
    if (!m.ok()) return SetError(m.status());
    h->ckpt.manifest = std::move(*m);
    if (rank < 0 || rank >= h->ckpt.manifest.world_size) {
      return SetError(absl::InvalidArgumentError(
          absl::StrCat(dir, ": rank ", rank, " but world_size ", h->ckpt.manifest.world_size)));
    }
    h->expected = h->ckpt.manifest.files[static_cast<size_t>(rank)];
    h->has_expected = true;
    file = grist::JoinPath(p, h->expected.name);
  }
  auto sr = ck::StreamingRead::Start(file, ro, h->has_expected ? &h->expected : nullptr);
  if (!sr.ok()) return SetError(sr.status());
  h->stream = std::move(*sr);
  auto hdr = h->stream->Header();
  if (!hdr.ok()) return SetError(hdr.status());
  const ck::ParsedHeader& header = **hdr;
  if (h->has_expected && header.tensors.size() != h->expected.tensors) {
    return SetError(absl::DataLossError(absl::StrCat(file, ": ", header.tensors.size(),
                                                     " tensors, the manifest says ", h->expected.tensors)));
  }
  grist::JsonWriter w(0);
  w.BeginObject();
  w.Field("step", h->ckpt.manifest.step).Field("world_size", h->ckpt.manifest.world_size);
  w.Field("data", reinterpret_cast<uint64_t>(h->stream->data()));
  w.Field("pinned", h->stream->pinned());
  w.Key("metadata").BeginObject();
  for (const auto& [k, v] : h->ckpt.manifest.metadata) w.Field(k, v);
  w.EndObject();
  w.Key("file_metadata").BeginObject();
  for (const auto& [k, v] : header.metadata) w.Field(k, v);
  w.EndObject();
  w.Key("tensors").BeginArray();
  for (const auto& t : header.tensors) {
    w.BeginObject().Field("name", t.name).Field("dtype", static_cast<int>(t.dtype));
    w.Key("shape").BeginArray();
    for (int64_t d : t.shape) w.Int(d);
    w.EndArray();
    w.Field("offset", t.begin).Field("nbytes", t.nbytes()).EndObject();
  }
  w.EndArray().EndObject();
  *handle = h.release();
  return Out(w.Take(), out_info);
}

GRIST_CAPI int grist_ckpt_load_wait_data(void* h, uint64_t upto) {
  return SetError(static_cast<Loaded*>(h)->stream->WaitData(upto));
}

// Verifies everything; `pinned` tells whether the buffer is registered with CUDA.
GRIST_CAPI int grist_ckpt_load_finish(void* h, int* pinned) {
  auto* l = static_cast<Loaded*>(h);
  if (!l->file) {
    auto f = l->stream->Finish();
    if (!f.ok()) return SetError(f.status());
    l->file = std::move(*f);
  }
  *pinned = l->file->pinned() ? 1 : 0;
  return 0;
}

GRIST_CAPI void grist_ckpt_load_free(void* h) { delete static_cast<Loaded*>(h); }

// The text of `dir`/manifest.json once it parsed and validated (checksum, files, tensor index).
GRIST_CAPI int grist_ckpt_read_manifest(const char* dir, const char** out) {
  grist::Env* env = grist::Env::Default();
  const std::string path = grist::JoinPath(dir, "manifest.json");
  if (!env->FileExists(path)) {
    return SetError(absl::NotFoundError(absl::StrCat(dir, " is not a published checkpoint (no manifest.json)")));
  }
  auto text = grist::ReadFileToString(env, path);
  if (!text.ok()) return SetError(text.status());
  if (text->size() > (64u << 20)) return SetError(absl::DataLossError(absl::StrCat(path, ": larger than 64 MiB")));
  auto m = ck::ParseManifest(*text, path);
  if (!m.ok()) return SetError(m.status());
  return Out(std::move(*text), out);
}

// ck::RangeRead of `path` (the file of manifest record `record_json`): ranges [begins[i], ends[i])
// of its data region; addrs[i] gets each range's address, valid until grist_ckpt_ranges_free.
GRIST_CAPI int grist_ckpt_read_ranges(const char* path, const char* record_json, int n,
                                      const uint64_t* begins, const uint64_t* ends, int verify,
                                      int direct, void** handle, uint64_t* addrs) {
  auto rec = ck::ParseFileRecord(record_json);
  if (!rec.ok()) return SetError(rec.status());
  std::vector<ck::DataRange> ranges(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) ranges[i] = {begins[i], ends[i]};
  ck::ReadOptions ro;
  ro.verify = verify != 0;
  ro.direct = direct != 0;
  auto r = ck::RangeRead::Read(path, *rec, ranges, ro);
  if (!r.ok()) return SetError(r.status());
  for (int i = 0; i < n; ++i) addrs[i] = reinterpret_cast<uint64_t>((*r)->Range(static_cast<size_t>(i)));
  *handle = r->release();
  return 0;
}

GRIST_CAPI void grist_ckpt_ranges_free(void* h) { delete static_cast<ck::RangeRead*>(h); }

// ck::ExportCheckpoint; `out` gets JSON: files, tensors, total_bytes, index.
GRIST_CAPI int grist_ckpt_export(const char* dir, const char* out_dir, const char* prefix,
                                 uint64_t max_shard_bytes, const char** out) {
  ck::ExportOptions o;
  o.prefix = prefix ? prefix : "";
  if (max_shard_bytes > 0) o.max_shard_bytes = max_shard_bytes;
  auto r = ck::ExportCheckpoint(dir, out_dir, o);
  if (!r.ok()) return SetError(r.status());
  grist::JsonWriter w(0);
  w.BeginObject().Key("files").BeginArray();
  for (const auto& f : r->files) w.String(f);
  w.EndArray().Field("tensors", r->tensors).Field("total_bytes", r->total_bytes);
  w.Field("index", r->index).EndObject();
  return Out(w.Take(), out);
}

// FileWriter::PrepareStaging for a coming file of `data_bytes` in `tensors` tensors with
// `text_bytes` of names and metadata; with `wait`, returns once the memory is ready. `out`: the
// arena bytes the writer will hold. Fails (ResourceExhausted) above the writer's prepare limit.
GRIST_CAPI int grist_ckpt_writer_prepare(void* writer, uint64_t data_bytes, uint64_t tensors,
                                         uint64_t text_bytes, int wait, uint64_t* out) {
  auto* w = static_cast<ck::FileWriter*>(writer);
  auto r = w->PrepareStaging({data_bytes, tensors, text_bytes});
  if (!r.ok()) return SetError(r.status());
  if (wait) w->WaitStaging();
  *out = *r;
  return 0;
}

// The writer's staging arena bytes now held, and its prepare limit.
GRIST_CAPI int grist_ckpt_writer_staging(void* writer, uint64_t* arena_bytes, uint64_t* limit) {
  auto* w = static_cast<ck::FileWriter*>(writer);
  *arena_bytes = w->arena_bytes();
  *limit = w->prepare_limit();
  return 0;
}
