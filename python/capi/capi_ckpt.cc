// The checkpoint part of grist's C ABI (python/capi/grist_capi.h, which states the contracts),
// used by python/grist/ckpt.py and ckpt_dcp.py over ctypes. Strings returned through `const char**
// out` live in a thread-local buffer until the next call of a grist_ckpt_* function on the same
// thread.
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

namespace ck = grist::ckptio;

namespace {

// The handles of grist_capi.h: grist_ckpt_writer is a ck::FileWriter, grist_ckpt_pending a
// ck::PendingFile, grist_ckpt_ranges a ck::RangeRead (the C types stay incomplete).
ck::FileWriter* Writer(grist_ckpt_writer* w) { return reinterpret_cast<ck::FileWriter*>(w); }
ck::PendingFile* Pending(grist_ckpt_pending* p) { return reinterpret_cast<ck::PendingFile*>(p); }

}  // namespace

// A load in progress.
struct grist_ckpt_load_handle {
  ck::LoadedCheckpoint ckpt;  // the manifest
  ck::ManifestFile expected;
  bool has_expected = false;
  std::unique_ptr<ck::StreamingRead> stream;
  std::unique_ptr<ck::LoadedFile> file;  // after finish (owns the buffer from then on)
};

namespace {

using grist::capi::CheckStruct;
using grist::capi::ClearOut;
using grist::capi::Guard;
using grist::capi::NegativeCount;
using grist::capi::NullArgument;
using grist::capi::SetError;

// grist_ckpt_dtype is ckptio::DType, code for code.
#define GRIST_SAME_DTYPE(c, d) static_assert(c == static_cast<int>(ck::DType::d))
GRIST_SAME_DTYPE(GRIST_DTYPE_BOOL, kBool);
GRIST_SAME_DTYPE(GRIST_DTYPE_U8, kU8);
GRIST_SAME_DTYPE(GRIST_DTYPE_I8, kI8);
GRIST_SAME_DTYPE(GRIST_DTYPE_F8_E5M2, kF8E5M2);
GRIST_SAME_DTYPE(GRIST_DTYPE_F8_E4M3, kF8E4M3);
GRIST_SAME_DTYPE(GRIST_DTYPE_I16, kI16);
GRIST_SAME_DTYPE(GRIST_DTYPE_U16, kU16);
GRIST_SAME_DTYPE(GRIST_DTYPE_F16, kF16);
GRIST_SAME_DTYPE(GRIST_DTYPE_BF16, kBF16);
GRIST_SAME_DTYPE(GRIST_DTYPE_I32, kI32);
GRIST_SAME_DTYPE(GRIST_DTYPE_U32, kU32);
GRIST_SAME_DTYPE(GRIST_DTYPE_F32, kF32);
GRIST_SAME_DTYPE(GRIST_DTYPE_I64, kI64);
GRIST_SAME_DTYPE(GRIST_DTYPE_U64, kU64);
GRIST_SAME_DTYPE(GRIST_DTYPE_F64, kF64);
#undef GRIST_SAME_DTYPE
static_assert(GRIST_DTYPE_COUNT == ck::kNumDTypes);

thread_local std::string out_text;

int Out(std::string s, const char** out) {
  out_text = std::move(s);
  *out = out_text.c_str();
  return 0;
}

// nmeta key/value pairs; InvalidArgument for a NULL array or entry.
absl::StatusOr<ck::Metadata> MakeMeta(const char* fn, int n, const char** keys, const char** vals) {
  if (n < 0) return absl::InvalidArgumentError(absl::StrCat(fn, ": nmeta is ", n, ", must be >= 0"));
  ck::Metadata m;
  if (n == 0) return m;
  if (keys == nullptr || vals == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(fn, ": meta_keys or meta_vals is NULL"));
  }
  for (int i = 0; i < n; ++i) {
    if (keys[i] == nullptr || vals[i] == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(fn, ": metadata entry ", i, " is NULL"));
    }
    m.emplace_back(keys[i], vals[i]);
  }
  return m;
}

}  // namespace

GRIST_CAPI int grist_ckpt_num_dtypes(void) { return ck::kNumDTypes; }

GRIST_CAPI int grist_ckpt_dtype_name(int code, const char** out) {
  constexpr const char* kFn = "grist_ckpt_dtype_name";
  if (out == nullptr) return NullArgument(kFn, "out");
  if (code < 0 || code >= ck::kNumDTypes) {
    *out = nullptr;
    return SetError(absl::OutOfRangeError(
        absl::StrCat(kFn, ": no dtype code ", code, " (0 .. ", ck::kNumDTypes - 1, ")")));
  }
  // DTypeName's views are of static NUL-terminated literals.
  *out = ck::DTypeName(static_cast<ck::DType>(code)).data();
  return 0;
}

GRIST_CAPI void grist_ckpt_writer_options_init(grist_ckpt_writer_options* options) {
  if (options == nullptr) return;
  const ck::WriterOptions d;
  *options = grist_ckpt_writer_options{};
  options->struct_size = sizeof(grist_ckpt_writer_options);
  options->direct = d.mode == ck::IoMode::kDirect ? 1 : 0;
  options->queue_depth = d.queue_depth;
  options->overlap = d.overlap == ck::Overlap::kAuto ? -1 : d.overlap == ck::Overlap::kOn ? 1 : 0;
  options->block_size = d.block_size;
  options->copy_threads = d.copy_threads;
}

GRIST_CAPI int grist_ckpt_writer_new(const grist_ckpt_writer_options* options,
                                     grist_ckpt_writer** out) {
  constexpr const char* kFn = "grist_ckpt_writer_new";
  if (int rc = ClearOut(kFn, out)) return rc;
  if (int rc = CheckStruct(kFn, "options", "grist_ckpt_writer_options", options)) return rc;
  return Guard(kFn, [&] {
    ck::WriterOptions o;
    if (options->copy_threads > 0) o.copy_threads = options->copy_threads;
    o.overlap = options->overlap < 0 ? ck::Overlap::kAuto
                : options->overlap   ? ck::Overlap::kOn
                                     : ck::Overlap::kOff;
    o.mode = options->direct ? ck::IoMode::kDirect : ck::IoMode::kBuffered;
    if (options->queue_depth > 0) o.queue_depth = options->queue_depth;
    if (options->block_size > 0) o.block_size = options->block_size;
    auto w = ck::FileWriter::Create(o);
    if (!w.ok()) return SetError(w.status());
    *out = reinterpret_cast<grist_ckpt_writer*>(w->release());
    return 0;
  });
}

GRIST_CAPI void grist_ckpt_writer_free(grist_ckpt_writer* writer) { delete Writer(writer); }

GRIST_CAPI int grist_ckpt_default_copy_threads(void) { return ck::DefaultCopyThreads(); }

GRIST_CAPI void grist_ckpt_memcpy(uint64_t dst, uint64_t src, uint64_t n, int threads) {
  if (n == 0) return;
  ck::CopyBytes(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), n, threads);
}

GRIST_CAPI int grist_ckpt_cuda_available(void) { return ck::CudaAvailable() ? 1 : 0; }

GRIST_CAPI int grist_ckpt_prepare_dir(const char* dir) {
  if (dir == nullptr) return NullArgument("grist_ckpt_prepare_dir", "dir");
  return Guard("grist_ckpt_prepare_dir",
               [&] { return SetError(ck::PrepareCheckpointDir(grist::Env::Default(), dir)); });
}

namespace {

absl::StatusOr<std::vector<ck::TensorSpec>> MakeSpecs(const char* fn, int n, const char** names,
                                                      const int* dtypes, const int* ndims,
                                                      const int64_t* dims) {
  if (n < 0) return absl::InvalidArgumentError(absl::StrCat(fn, ": n is ", n, ", must be >= 0"));
  std::vector<ck::TensorSpec> specs(static_cast<size_t>(n));
  if (n == 0) return specs;
  if (names == nullptr || dtypes == nullptr || ndims == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(fn, ": names, dtypes or ndims is NULL"));
  }
  size_t d = 0;
  for (int i = 0; i < n; ++i) {
    if (names[i] == nullptr) return absl::InvalidArgumentError(absl::StrCat(fn, ": names[", i, "] is NULL"));
    if (dtypes[i] < 0 || dtypes[i] >= ck::kNumDTypes) {
      return absl::InvalidArgumentError(absl::StrCat(fn, ": tensor ", i, " has dtype code ", dtypes[i],
                                                     " (0 .. ", ck::kNumDTypes - 1, ")"));
    }
    if (ndims[i] < 0) {
      return absl::InvalidArgumentError(absl::StrCat(fn, ": tensor ", i, " has ", ndims[i], " dimensions"));
    }
    if (ndims[i] > 0 && dims == nullptr) return absl::InvalidArgumentError(absl::StrCat(fn, ": dims is NULL"));
    specs[i].name = names[i];
    specs[i].dtype = static_cast<ck::DType>(dtypes[i]);
    specs[i].shape.assign(dims + d, dims + d + ndims[i]);
    d += static_cast<size_t>(ndims[i]);
  }
  return specs;
}

}  // namespace

GRIST_CAPI int grist_ckpt_begin(grist_ckpt_writer* writer, const char* path, int n,
                                const char** names, const int* dtypes, const int* ndims,
                                const int64_t* dims, int nmeta, const char** meta_keys,
                                const char** meta_vals, grist_ckpt_pending** out) {
  constexpr const char* kFn = "grist_ckpt_begin";
  if (out == nullptr) return NullArgument(kFn, "out");
  *out = nullptr;
  if (writer == nullptr) return NullArgument(kFn, "writer");
  if (path == nullptr) return NullArgument(kFn, "path");
  return Guard(kFn, [&] {
    auto specs = MakeSpecs(kFn, n, names, dtypes, ndims, dims);
    if (!specs.ok()) return SetError(specs.status());
    auto meta = MakeMeta(kFn, nmeta, meta_keys, meta_vals);
    if (!meta.ok()) return SetError(meta.status());
    auto p = Writer(writer)->Begin(path, *specs, *meta);
    if (!p.ok()) return SetError(p.status());
    *out = reinterpret_cast<grist_ckpt_pending*>(p->release());
    return 0;
  });
}

GRIST_CAPI int grist_ckpt_pending_layout(grist_ckpt_pending* pending, uint64_t* data,
                                         uint64_t* begins, int n) {
  constexpr const char* kFn = "grist_ckpt_pending_layout";
  if (pending == nullptr) return NullArgument(kFn, "pending");
  if (data == nullptr) return NullArgument(kFn, "data");
  const auto& L = Pending(pending)->layout();
  if (n < 0 || static_cast<size_t>(n) != L.tensors.size()) {
    return SetError(absl::InvalidArgumentError(
        absl::StrCat(kFn, ": n is ", n, ", the file has ", L.tensors.size(), " tensors")));
  }
  if (begins == nullptr && n > 0) return NullArgument(kFn, "begins");
  *data = reinterpret_cast<uint64_t>(Pending(pending)->data());
  for (int i = 0; i < n; ++i) begins[i] = L.tensors[static_cast<size_t>(i)].begin;
  return 0;
}

GRIST_CAPI int grist_ckpt_save_in_place(grist_ckpt_writer* writer, const char* path, int n,
                                        const char** names, const int* dtypes, const int* ndims,
                                        const int64_t* dims, const uint64_t* srcs, int nmeta,
                                        const char** meta_keys, const char** meta_vals,
                                        grist_ckpt_pending** out) {
  constexpr const char* kFn = "grist_ckpt_save_in_place";
  if (out == nullptr) return NullArgument(kFn, "out");
  *out = nullptr;
  if (writer == nullptr) return NullArgument(kFn, "writer");
  if (path == nullptr) return NullArgument(kFn, "path");
  if (srcs == nullptr && n > 0) return NullArgument(kFn, "srcs");
  return Guard(kFn, [&] {
    auto specs = MakeSpecs(kFn, n, names, dtypes, ndims, dims);
    if (!specs.ok()) return SetError(specs.status());
    auto meta = MakeMeta(kFn, nmeta, meta_keys, meta_vals);
    if (!meta.ok()) return SetError(meta.status());
    std::vector<ck::HostTensor> tensors(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) {
      tensors[i].spec = (*specs)[i];
      tensors[i].data = reinterpret_cast<const void*>(srcs[i]);
    }
    auto p = Writer(writer)->SaveInPlace(path, tensors, *meta);
    if (!p.ok()) return SetError(p.status());
    *out = reinterpret_cast<grist_ckpt_pending*>(p->release());
    return 0;
  });
}

GRIST_CAPI int grist_ckpt_pending_copy(grist_ckpt_pending* pending, int n, const uint64_t* offsets,
                                       const uint64_t* srcs, const uint64_t* lens, int mark_ready) {
  constexpr const char* kFn = "grist_ckpt_pending_copy";
  if (pending == nullptr) return NullArgument(kFn, "pending");
  if (n < 0) return NegativeCount(kFn, "n", n);
  if (n > 0 && (offsets == nullptr || srcs == nullptr || lens == nullptr)) {
    return NullArgument(kFn, "offsets, srcs or lens");
  }
  return Guard(kFn, [&] {
    const uint64_t data_len = Pending(pending)->layout().data_len;
    std::vector<ck::HostSpan> spans(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) {
      if (offsets[i] > data_len || lens[i] > data_len - offsets[i]) {
        return SetError(absl::OutOfRangeError(absl::StrCat(
            kFn, ": span ", i, " [", offsets[i], ", +", lens[i], ") is outside the data region of ",
            data_len, " bytes")));
      }
      spans[i] = {offsets[i], reinterpret_cast<const void*>(srcs[i]), lens[i]};
    }
    Pending(pending)->CopyIn(spans, mark_ready != 0);
    return 0;
  });
}

GRIST_CAPI int grist_ckpt_pending_mark_ready(grist_ckpt_pending* pending, uint64_t upto) {
  if (pending == nullptr) return NullArgument("grist_ckpt_pending_mark_ready", "pending");
  Pending(pending)->MarkReady(std::min<uint64_t>(upto, Pending(pending)->layout().data_len));
  return 0;
}

GRIST_CAPI int grist_ckpt_pending_abort(grist_ckpt_pending* pending, const char* why) {
  if (pending == nullptr) return NullArgument("grist_ckpt_pending_abort", "pending");
  return Guard("grist_ckpt_pending_abort", [&] {
    Pending(pending)->Abort(absl::CancelledError(why ? why : "aborted"));
    return 0;
  });
}

GRIST_CAPI int grist_ckpt_pending_done(grist_ckpt_pending* pending) {
  if (pending == nullptr) return NullArgument("grist_ckpt_pending_done", "pending");
  return Pending(pending)->Done() ? 1 : 0;
}

GRIST_CAPI int grist_ckpt_pending_wait(grist_ckpt_pending* pending, int rank, const char** out) {
  constexpr const char* kFn = "grist_ckpt_pending_wait";
  if (pending == nullptr) return NullArgument(kFn, "pending");
  if (out == nullptr) return NullArgument(kFn, "out");
  return Guard(kFn, [&] {
    auto r = Pending(pending)->Wait();
    if (!r.ok()) return SetError(r.status());
    grist::JsonWriter w(0);
    w.BeginObject().Key("record").Raw(ck::FileRecordJson(ck::ToManifestFile(*r, rank)));
    w.Field("direct", r->direct).Field("seconds", r->seconds).Field("fixed_buffers", r->fixed_buffers);
    w.Field("in_place_bytes", r->in_place_bytes).Field("staging_fresh_bytes", r->staging_fresh_bytes);
    w.Key("notes").BeginArray();
    for (const auto& n : r->notes) w.String(n);
    w.EndArray().EndObject();
    return Out(w.Take(), out);
  });
}

GRIST_CAPI void grist_ckpt_pending_free(grist_ckpt_pending* pending) { delete Pending(pending); }

GRIST_CAPI int grist_ckpt_publish(const char* dir, int64_t step, int world_size, int n,
                                  const char** records, int nmeta, const char** meta_keys,
                                  const char** meta_vals, const char* index_json,
                                  const char* structure_json, int keep_last) {
  constexpr const char* kFn = "grist_ckpt_publish";
  if (dir == nullptr) return NullArgument(kFn, "dir");
  if (n < 0) return NegativeCount(kFn, "n", n);
  if (records == nullptr && n > 0) return NullArgument(kFn, "records");
  return Guard(kFn, [&] {
    ck::Manifest m;
    m.version = ck::kManifestVersionCurrent;
    m.step = step;
    m.world_size = world_size;
    auto meta = MakeMeta(kFn, nmeta, meta_keys, meta_vals);
    if (!meta.ok()) return SetError(meta.status());
    m.metadata = std::move(*meta);
    for (int i = 0; i < n; ++i) {
      if (records[i] == nullptr) return NullArgument(kFn, absl::StrCat("records[", i, "]").c_str());
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
  });
}

GRIST_CAPI int grist_ckpt_latest(const char* root, int verify, const char** out) {
  constexpr const char* kFn = "grist_ckpt_latest";
  if (root == nullptr) return NullArgument(kFn, "root");
  if (out == nullptr) return NullArgument(kFn, "out");
  return Guard(kFn, [&] {
    auto r = ck::LatestCheckpoint(grist::Env::Default(), root, verify != 0);
    if (!r.ok()) return SetError(r.status());
    return Out(*r, out);
  });
}

GRIST_CAPI int grist_ckpt_list(const char* root, const char** out) {
  constexpr const char* kFn = "grist_ckpt_list";
  if (root == nullptr) return NullArgument(kFn, "root");
  if (out == nullptr) return NullArgument(kFn, "out");
  return Guard(kFn, [&] {
    auto r = ck::ListCheckpoints(grist::Env::Default(), root);
    if (!r.ok()) return SetError(r.status());
    grist::JsonWriter w(0);
    w.BeginArray();
    for (const auto& c : *r) w.BeginObject().Field("path", c.path).Field("step", c.step).EndObject();
    w.EndArray();
    return Out(w.Take(), out);
  });
}

GRIST_CAPI int grist_ckpt_verify(const char* dir) {
  if (dir == nullptr) return NullArgument("grist_ckpt_verify", "dir");
  return Guard("grist_ckpt_verify", [&] { return SetError(ck::VerifyCheckpoint(dir, ck::ReadOptions{})); });
}

GRIST_CAPI int grist_ckpt_step_from_name(const char* dir, int64_t* step) {
  constexpr const char* kFn = "grist_ckpt_step_from_name";
  if (dir == nullptr) return NullArgument(kFn, "dir");
  if (step == nullptr) return NullArgument(kFn, "step");
  return Guard(kFn, [&] {
    *step = ck::StepFromName(dir);
    return 0;
  });
}

GRIST_CAPI int grist_ckpt_load(const char* dir, int rank, int verify, int direct,
                               grist_ckpt_load_handle** handle, const char** out_info) {
  constexpr const char* kFn = "grist_ckpt_load";
  if (handle == nullptr) return NullArgument(kFn, "handle");
  *handle = nullptr;
  if (dir == nullptr) return NullArgument(kFn, "dir");
  if (out_info == nullptr) return NullArgument(kFn, "info");
  return Guard(kFn, [&] {
    ck::ReadOptions ro;
    ro.verify = verify != 0;
    ro.direct = direct != 0;
    auto h = std::make_unique<grist_ckpt_load_handle>();
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
  });
}

GRIST_CAPI int grist_ckpt_load_wait_data(grist_ckpt_load_handle* handle, uint64_t upto) {
  if (handle == nullptr) return NullArgument("grist_ckpt_load_wait_data", "handle");
  return Guard("grist_ckpt_load_wait_data", [&] { return SetError(handle->stream->WaitData(upto)); });
}

GRIST_CAPI int grist_ckpt_load_finish(grist_ckpt_load_handle* handle, int* pinned) {
  constexpr const char* kFn = "grist_ckpt_load_finish";
  if (handle == nullptr) return NullArgument(kFn, "handle");
  if (pinned == nullptr) return NullArgument(kFn, "pinned");
  return Guard(kFn, [&] {
    if (!handle->file) {
      auto f = handle->stream->Finish();
      if (!f.ok()) return SetError(f.status());
      handle->file = std::move(*f);
    }
    *pinned = handle->file->pinned() ? 1 : 0;
    return 0;
  });
}

GRIST_CAPI void grist_ckpt_load_free(grist_ckpt_load_handle* handle) { delete handle; }

GRIST_CAPI int grist_ckpt_read_manifest(const char* dir, const char** out) {
  constexpr const char* kFn = "grist_ckpt_read_manifest";
  if (dir == nullptr) return NullArgument(kFn, "dir");
  if (out == nullptr) return NullArgument(kFn, "out");
  return Guard(kFn, [&] {
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
  });
}

GRIST_CAPI int grist_ckpt_read_ranges(const char* path, const char* record_json, int n,
                                      const uint64_t* begins, const uint64_t* ends, int verify,
                                      int direct, grist_ckpt_ranges** handle, uint64_t* addrs) {
  constexpr const char* kFn = "grist_ckpt_read_ranges";
  if (handle == nullptr) return NullArgument(kFn, "handle");
  *handle = nullptr;
  if (path == nullptr) return NullArgument(kFn, "path");
  if (record_json == nullptr) return NullArgument(kFn, "record_json");
  if (n < 0) return NegativeCount(kFn, "n", n);
  if (n > 0 && (begins == nullptr || ends == nullptr || addrs == nullptr)) {
    return NullArgument(kFn, "begins, ends or addrs");
  }
  return Guard(kFn, [&] {
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
    *handle = reinterpret_cast<grist_ckpt_ranges*>(r->release());
    return 0;
  });
}

GRIST_CAPI int grist_ckpt_ranges_bytes_read(const grist_ckpt_ranges* handle, uint64_t* out) {
  constexpr const char* kFn = "grist_ckpt_ranges_bytes_read";
  if (handle == nullptr) return NullArgument(kFn, "handle");
  if (out == nullptr) return NullArgument(kFn, "out");
  *out = reinterpret_cast<const ck::RangeRead*>(handle)->bytes_read();
  return 0;
}

GRIST_CAPI void grist_ckpt_ranges_free(grist_ckpt_ranges* handle) {
  delete reinterpret_cast<ck::RangeRead*>(handle);
}

GRIST_CAPI int grist_ckpt_export(const char* dir, const char* out_dir, const char* prefix,
                                 uint64_t max_shard_bytes, const char** out) {
  constexpr const char* kFn = "grist_ckpt_export";
  if (dir == nullptr) return NullArgument(kFn, "dir");
  if (out_dir == nullptr) return NullArgument(kFn, "out_dir");
  if (out == nullptr) return NullArgument(kFn, "out");
  return Guard(kFn, [&] {
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
  });
}

// FileWriter::PrepareStaging for a coming file of `data_bytes` in `tensors` tensors with
// `text_bytes` of names and metadata; with `wait`, returns once the memory is ready. `out`: the
// arena bytes the writer will hold. Fails (ResourceExhausted) above the writer's prepare limit.
GRIST_CAPI int grist_ckpt_writer_prepare(grist_ckpt_writer* writer, uint64_t data_bytes,
                                         uint64_t tensors, uint64_t text_bytes, int wait,
                                         uint64_t* out) {
  constexpr const char* kFn = "grist_ckpt_writer_prepare";
  if (writer == nullptr) return NullArgument(kFn, "writer");
  if (out == nullptr) return NullArgument(kFn, "out");
  ck::FileWriter* w = Writer(writer);
  auto r = w->PrepareStaging({data_bytes, tensors, text_bytes});
  if (!r.ok()) return SetError(r.status());
  if (wait) w->WaitStaging();
  *out = *r;
  return 0;
}

// The writer's staging arena bytes now held, and its prepare limit.
GRIST_CAPI int grist_ckpt_writer_staging(grist_ckpt_writer* writer, uint64_t* arena_bytes,
                                         uint64_t* limit) {
  constexpr const char* kFn = "grist_ckpt_writer_staging";
  if (writer == nullptr) return NullArgument(kFn, "writer");
  if (arena_bytes == nullptr) return NullArgument(kFn, "arena_bytes");
  if (limit == nullptr) return NullArgument(kFn, "limit");
  ck::FileWriter* w = Writer(writer);
  *arena_bytes = w->arena_bytes();
  *limit = w->prepare_limit();
  return 0;
}

GRIST_CAPI int grist_ckpt_writer_arena_allocations(grist_ckpt_writer* writer, uint64_t* out) {
  constexpr const char* kFn = "grist_ckpt_writer_arena_allocations";
  if (writer == nullptr) return NullArgument(kFn, "writer");
  if (out == nullptr) return NullArgument(kFn, "out");
  *out = Writer(writer)->arena_allocations();
  return 0;
}
