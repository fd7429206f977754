// C ABI of the loader for python/grist/loader.py (ctypes). Conventions: python/capi/capi_common.h.
//
// Tensors are handed out as DLPack DLManagedTensor (the stable v0.x ABI that torch 1.13 and 2.x
// accept through a "dltensor" PyCapsule): the DLManagedTensor owns a reference to its batch, so
// the batch's buffer returns to the loader's pool only when the last tensor viewing it is freed.
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/env.h"
#include "loader/loader.h"
#include "loader/synthetic.h"
#include "python/capi/capi_common.h"

namespace {

using grist::capi::SetError;
using grist::loader::Batch;
using grist::loader::DType;
using grist::loader::Loader;
using grist::loader::LoaderOptions;
using grist::loader::LoaderState;

// ---- DLPack v0.8 ABI (dlpack.h), declared here field for field ----
struct DLDevice {
  int32_t device_type;  // kDLCPU = 1, kDLCUDA = 2
  int32_t device_id;
};
struct DLDataType {
  uint8_t code;  // kDLInt = 0, kDLUInt = 1, kDLFloat = 2
  uint8_t bits;
  uint16_t lanes;
};
struct DLTensor {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;  // nullptr: compact row-major
  uint64_t byte_offset;
};
struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor* self);
};

struct ManagedTensor {
  DLManagedTensor managed;  // first member: a DLManagedTensor* is a ManagedTensor*
  std::shared_ptr<const Batch> batch;
  int64_t shape[2];
};

void DeleteManaged(DLManagedTensor* self) { delete static_cast<ManagedTensor*>(self->manager_ctx); }

struct LoaderHandle {
  std::unique_ptr<Loader> loader;
  std::string text;  // storage for strings returned to the caller (state JSON, notes)
};

struct BatchHandle {
  std::shared_ptr<const Batch> batch;
};

}  // namespace

// grist_loader_open for a blend: `n` releases `paths[k]` with `weights[k]` (n == 1 is one release)
// and `elastic` (0: a state with another global batch is refused). With fields == nullptr a blend
// also produces release_index.
GRIST_CAPI int grist_loader_open_blend(int n, const char* const* paths, const double* weights,
                                       const char* split, int64_t micro_batch_size,
                                       int64_t global_batch_size, int64_t dp_rank, int64_t dp_size,
                                       int has_seed, uint64_t seed, int64_t epochs, int prefetch,
                                       int num_workers, int device, int cuda_device, int int32_ids,
                                       const char* fields, int verify_checksums, int elastic,
                                       void** out) {
  *out = nullptr;
  if (n < 1) return SetError(absl::InvalidArgumentError("a blend needs at least one release"));
  LoaderOptions o;
  for (int k = 0; k < n; ++k) {
    o.blend.push_back(grist::loader::BlendEntry{weights[k], paths[k] ? paths[k] : ""});
  }
  o.path = o.blend[0].path;
  o.split = split ? split : "train";
  o.micro_batch_size = micro_batch_size;
  o.global_batch_size = global_batch_size;
  o.dp_rank = dp_rank;
  o.dp_size = dp_size;
  o.has_seed = has_seed != 0;
  o.seed = seed;
  o.epochs = epochs;
  o.prefetch = prefetch;
  o.num_workers = num_workers;
  o.device = device == 1 ? grist::loader::Device::kCuda : grist::loader::Device::kCpu;
  o.cuda_device = cuda_device;
  o.int32_ids = int32_ids != 0;
  o.verify_checksums = verify_checksums != 0;
  o.elastic = elastic != 0;
  if (fields && *fields) {
    auto f = grist::loader::ParseFields(fields);
    if (!f.ok()) return SetError(f.status());
    o.fields = *f;
  } else if (n >= 2) {
    o.fields = grist::loader::kAllFields | grist::loader::kReleaseIndex;
  }
  auto l = Loader::Open(o);
  if (!l.ok()) return SetError(l.status());
  auto* h = new LoaderHandle();
  h->loader = std::move(*l);
  *out = h;
  return 0;
}

GRIST_CAPI int grist_loader_open(const char* path, const char* split, int64_t micro_batch_size,
                                 int64_t global_batch_size, int64_t dp_rank, int64_t dp_size,
                                 int has_seed, uint64_t seed, int64_t epochs, int prefetch,
                                 int num_workers, int device, int cuda_device, int int32_ids,
                                 const char* fields, int verify_checksums, void** out) {
  // One release is the one-entry blend (the same order, state and fields as a release alone).
  const double weight = 1.0;
  return grist_loader_open_blend(1, &path, &weight, split, micro_batch_size, global_batch_size,
                                 dp_rank, dp_size, has_seed, seed, epochs, prefetch, num_workers,
                                 device, cuda_device, int32_ids, fields, verify_checksums,
                                 /*elastic=*/1, out);
}

// New blend weights from the current step boundary on (n = the number of releases).
GRIST_CAPI int grist_loader_set_weights(void* h, const double* weights, int n) {
  std::vector<double> w(weights, weights + (n > 0 ? n : 0));
  return SetError(static_cast<LoaderHandle*>(h)->loader->SetWeights(w));
}

// Draws of release k per step (n_k of the blend; G for one release), into out[0..n-1].
GRIST_CAPI int grist_loader_blend_draws(void* h, int64_t* out, int n) {
  const auto& d = static_cast<LoaderHandle*>(h)->loader->schedule().draws_per_step();
  for (int k = 0; k < n && static_cast<size_t>(k) < d.size(); ++k) out[k] = static_cast<int64_t>(d[k]);
  return static_cast<int>(d.size());
}

GRIST_CAPI void grist_loader_close(void* h) { delete static_cast<LoaderHandle*>(h); }

// 0 with *batch set; -OUT_OF_RANGE (-11) at the end of the data; another error code otherwise.
GRIST_CAPI int grist_loader_next(void* h, void** batch) {
  *batch = nullptr;
  auto b = static_cast<LoaderHandle*>(h)->loader->Next();
  if (!b.ok()) return SetError(b.status());
  *batch = new BatchHandle{std::move(*b)};
  return 0;
}

// The state as one-line JSON; valid until the next call on this handle.
GRIST_CAPI const char* grist_loader_state(void* h) {
  auto* lh = static_cast<LoaderHandle*>(h);
  lh->text = lh->loader->state().ToJson();
  return lh->text.c_str();
}

GRIST_CAPI int grist_loader_load_state(void* h, const char* json) {
  auto s = LoaderState::FromJson(json ? json : "");
  if (!s.ok()) return SetError(s.status());
  return SetError(static_cast<LoaderHandle*>(h)->loader->LoadState(*s));
}

// Facts: [0] size (micro batches of the run, -1 unlimited), [1] remaining (-1 unlimited),
// [2] on_cuda, [3] seed, [4] samples in the split, [5] seq_len, [6] bytes per batch,
// [7] num_workers, [8] micro batches per step.
GRIST_CAPI int grist_loader_info(void* h, int64_t* out, int n) {
  const Loader& l = *static_cast<LoaderHandle*>(h)->loader;
  const int64_t kUnlimited = INT64_MAX;
  int64_t v[9] = {l.size() == kUnlimited ? -1 : l.size(),
                  l.remaining() >= kUnlimited / 2 ? -1 : l.remaining(),
                  l.on_cuda() ? 1 : 0,
                  static_cast<int64_t>(l.schedule().options().seed),
                  static_cast<int64_t>(l.source().num_samples()),
                  static_cast<int64_t>(l.source().sample_tokens()) - 1,
                  static_cast<int64_t>(l.batch_bytes()),
                  l.num_workers(),
                  l.schedule().micro_batches_per_step()};
  for (int i = 0; i < n && i < 9; ++i) out[i] = v[i];
  return 0;
}

// The release id (what=0) or why a CUDA request runs on the CPU (what=1); valid until the next call.
GRIST_CAPI const char* grist_loader_text(void* h, int what) {
  auto* lh = static_cast<LoaderHandle*>(h);
  lh->text = what == 0 ? lh->loader->release_id() : lh->loader->device_note();
  return lh->text.c_str();
}

GRIST_CAPI void grist_batch_free(void* b) { delete static_cast<BatchHandle*>(b); }

GRIST_CAPI int grist_batch_num_tensors(void* b) {
  return static_cast<int>(static_cast<BatchHandle*>(b)->batch->tensors().size());
}

GRIST_CAPI const char* grist_batch_tensor_name(void* b, int i) {
  const auto& ts = static_cast<BatchHandle*>(b)->batch->tensors();
  return (i >= 0 && static_cast<size_t>(i) < ts.size()) ? ts[static_cast<size_t>(i)].name : nullptr;
}

// CUDA: `stream` (cudaStream_t as an integer; 0 = legacy default) waits for the batch's copy.
GRIST_CAPI int grist_batch_wait(void* b, uintptr_t stream) {
  return SetError(static_cast<BatchHandle*>(b)->batch->WaitOn(stream));
}

// A new DLManagedTensor viewing tensor i; the caller hands it to a consumer that calls its deleter
// (or calls grist_dlpack_free).
GRIST_CAPI void grist_dlpack_free(void* managed);

GRIST_CAPI int grist_batch_dlpack(void* b, int i, void** out) {
  *out = nullptr;
  const auto& batch = static_cast<BatchHandle*>(b)->batch;
  const auto& ts = batch->tensors();
  if (i < 0 || static_cast<size_t>(i) >= ts.size()) {
    return SetError(absl::OutOfRangeError(absl::StrCat("batch has no tensor ", i)));
  }
  const grist::loader::TensorInfo& t = ts[static_cast<size_t>(i)];
  auto* m = new ManagedTensor();
  m->batch = batch;
  m->shape[0] = t.shape[0];
  m->shape[1] = t.shape[1];
  DLTensor& d = m->managed.dl_tensor;
  d.data = t.data;
  d.device = batch->on_cuda() ? DLDevice{2, batch->cuda_device()} : DLDevice{1, 0};
  d.ndim = t.ndim;
  switch (t.dtype) {
    case DType::kInt32: d.dtype = {0, 32, 1}; break;
    case DType::kInt64: d.dtype = {0, 64, 1}; break;
    case DType::kFloat32: d.dtype = {2, 32, 1}; break;
  }
  d.shape = m->shape;
  d.strides = nullptr;
  d.byte_offset = 0;
  m->managed.manager_ctx = m;
  m->managed.deleter = DeleteManaged;
  *out = &m->managed;
  return 0;
}

// grist_batch_dlpack for tensors 0..n-1 at once (n = grist_batch_num_tensors), into out[0..n-1].
GRIST_CAPI int grist_batch_dlpack_all(void* b, void** out, int n) {
  for (int i = 0; i < n; ++i) {
    int rc = grist_batch_dlpack(b, i, &out[i]);
    if (rc != 0) {
      for (int j = 0; j < i; ++j) grist_dlpack_free(out[j]);
      return rc;
    }
  }
  return 0;
}

GRIST_CAPI void grist_dlpack_free(void* managed) {
  if (managed) {
    auto* m = static_cast<DLManagedTensor*>(managed);
    m->deleter(m);
  }
}

GRIST_CAPI int grist_write_synthetic_release(const char* dir, uint64_t samples,
                                             uint64_t validation_samples, uint32_t seq_len,
                                             uint64_t samples_per_shard, uint32_t vocab_size,
                                             uint32_t mean_document_tokens, uint64_t seed) {
  grist::loader::SyntheticReleaseOptions o;
  o.samples = samples;
  o.validation_samples = validation_samples;
  o.seq_len = seq_len;
  o.samples_per_shard = samples_per_shard;
  o.vocab_size = vocab_size;
  o.mean_document_tokens = mean_document_tokens;
  o.seed = seed;
  return SetError(grist::loader::WriteSyntheticRelease(grist::Env::Default(), dir ? dir : "", o));
}
