// The loader part of grist's C ABI (python/capi/grist_capi.h, which states the contracts), used by
// python/grist/loader.py over ctypes.
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
#include "python/capi/grist_dlpack.h"

namespace {

using grist::capi::CheckStruct;
using grist::capi::ClearOut;
using grist::capi::Guard;
using grist::capi::NegativeCount;
using grist::capi::NullArgument;
using grist::capi::SetError;
using grist::loader::Batch;
using grist::loader::DType;
using grist::loader::Loader;
using grist::loader::LoaderOptions;
using grist::loader::LoaderState;

using grist::dlpack::DLDevice;
using grist::dlpack::DLManagedTensor;
using grist::dlpack::DLTensor;

struct ManagedTensor {
  DLManagedTensor managed;  // first member: a DLManagedTensor* is a ManagedTensor*
  std::shared_ptr<const Batch> batch;
  int64_t shape[2];
};

void DeleteManaged(DLManagedTensor* self) { delete static_cast<ManagedTensor*>(self->manager_ctx); }

}  // namespace

// The handles of grist_capi.h.
struct grist_loader {
  std::unique_ptr<Loader> loader;
  std::string text;  // storage for strings returned to the caller (state JSON, release id, note)
};

struct grist_batch {
  std::shared_ptr<const Batch> batch;
};

GRIST_CAPI void grist_loader_options_init(grist_loader_options* options) {
  if (options == nullptr) return;
  const LoaderOptions d;
  *options = grist_loader_options{};
  options->struct_size = sizeof(grist_loader_options);
  options->num_releases = 0;
  options->paths = nullptr;
  options->weights = nullptr;
  options->split = nullptr;
  options->micro_batch_size = d.micro_batch_size;
  options->global_batch_size = d.global_batch_size;
  options->dp_rank = d.dp_rank;
  options->dp_size = d.dp_size;
  options->has_seed = d.has_seed ? 1 : 0;
  options->seed = d.seed;
  options->epochs = d.epochs;
  options->prefetch = d.prefetch;
  options->num_workers = d.num_workers;
  options->device = d.device == grist::loader::Device::kCuda ? GRIST_DEVICE_CUDA : GRIST_DEVICE_CPU;
  options->cuda_device = d.cuda_device;
  options->int32_ids = d.int32_ids ? 1 : 0;
  options->fields = nullptr;
  options->verify_checksums = d.verify_checksums ? 1 : 0;
  options->elastic = d.elastic ? 1 : 0;
}

GRIST_CAPI int grist_loader_open(const grist_loader_options* options, grist_loader** out) {
  constexpr const char* kFn = "grist_loader_open";
  if (int rc = ClearOut(kFn, out)) return rc;
  if (int rc = CheckStruct(kFn, "options", "grist_loader_options", options)) return rc;
  return Guard(kFn, [&] {
    const grist_loader_options& c = *options;
    if (c.num_releases < 1) {
      return SetError(absl::InvalidArgumentError(
          absl::StrCat(kFn, ": num_releases is ", c.num_releases, ", must be >= 1")));
    }
    if (c.paths == nullptr) return NullArgument(kFn, "options->paths");
    if (c.device != GRIST_DEVICE_CPU && c.device != GRIST_DEVICE_CUDA) {
      return SetError(absl::InvalidArgumentError(
          absl::StrCat(kFn, ": device is ", c.device, " (GRIST_DEVICE_CPU or GRIST_DEVICE_CUDA)")));
    }
    LoaderOptions o;
    for (int k = 0; k < c.num_releases; ++k) {
      if (c.paths[k] == nullptr) return NullArgument(kFn, absl::StrCat("options->paths[", k, "]").c_str());
      o.blend.push_back(grist::loader::BlendEntry{c.weights ? c.weights[k] : 1.0, c.paths[k]});
    }
    o.path = o.blend[0].path;
    o.split = c.split ? c.split : "train";
    o.micro_batch_size = c.micro_batch_size;
    o.global_batch_size = c.global_batch_size;
    o.dp_rank = c.dp_rank;
    o.dp_size = c.dp_size;
    o.has_seed = c.has_seed != 0;
    o.seed = c.seed;
    o.epochs = c.epochs;
    o.prefetch = c.prefetch;
    o.num_workers = c.num_workers;
    o.device = c.device == GRIST_DEVICE_CUDA ? grist::loader::Device::kCuda : grist::loader::Device::kCpu;
    o.cuda_device = c.cuda_device;
    o.int32_ids = c.int32_ids != 0;
    o.verify_checksums = c.verify_checksums != 0;
    o.elastic = c.elastic != 0;
    if (c.fields && *c.fields) {
      auto f = grist::loader::ParseFields(c.fields);
      if (!f.ok()) return SetError(f.status());
      o.fields = *f;
    } else if (c.num_releases >= 2) {
      o.fields = grist::loader::kAllFields | grist::loader::kReleaseIndex;
    }
    auto l = Loader::Open(o);
    if (!l.ok()) return SetError(l.status());
    auto h = std::make_unique<grist_loader>();
    h->loader = std::move(*l);
    *out = h.release();
    return 0;
  });
}

GRIST_CAPI int grist_loader_set_weights(grist_loader* loader, const double* weights, int n) {
  constexpr const char* kFn = "grist_loader_set_weights";
  if (loader == nullptr) return NullArgument(kFn, "loader");
  if (n < 0) return NegativeCount(kFn, "n", n);
  if (weights == nullptr && n > 0) return NullArgument(kFn, "weights");
  return Guard(kFn, [&] {
    std::vector<double> w(weights, weights + n);
    return SetError(loader->loader->SetWeights(w));
  });
}

GRIST_CAPI int grist_loader_blend_draws(grist_loader* loader, int64_t* out, int capacity, int* n) {
  constexpr const char* kFn = "grist_loader_blend_draws";
  if (loader == nullptr) return NullArgument(kFn, "loader");
  if (n == nullptr) return NullArgument(kFn, "n");
  if (capacity < 0) return NegativeCount(kFn, "capacity", capacity);
  if (out == nullptr && capacity > 0) return NullArgument(kFn, "out");
  const auto& d = loader->loader->schedule().draws_per_step();
  for (size_t k = 0; k < d.size() && k < static_cast<size_t>(capacity); ++k) {
    out[k] = static_cast<int64_t>(d[k]);
  }
  *n = static_cast<int>(d.size());
  return 0;
}

GRIST_CAPI void grist_loader_close(grist_loader* loader) { delete loader; }

GRIST_CAPI int grist_loader_next(grist_loader* loader, grist_batch** out) {
  constexpr const char* kFn = "grist_loader_next";
  if (out == nullptr) return NullArgument(kFn, "out");
  *out = nullptr;
  if (loader == nullptr) return NullArgument(kFn, "loader");
  return Guard(kFn, [&] {
    auto b = loader->loader->Next();
    if (!b.ok()) return SetError(b.status());
    *out = new grist_batch{std::move(*b)};
    return 0;
  });
}

namespace {

// Keeps `text` in the handle and points *out at it.
int HandleText(grist_loader* h, std::string text, const char** out) {
  h->text = std::move(text);
  *out = h->text.c_str();
  return 0;
}

}  // namespace

GRIST_CAPI int grist_loader_state(grist_loader* loader, const char** out) {
  constexpr const char* kFn = "grist_loader_state";
  if (loader == nullptr) return NullArgument(kFn, "loader");
  if (out == nullptr) return NullArgument(kFn, "out");
  return Guard(kFn, [&] { return HandleText(loader, loader->loader->state().ToJson(), out); });
}

GRIST_CAPI int grist_loader_load_state(grist_loader* loader, const char* json) {
  constexpr const char* kFn = "grist_loader_load_state";
  if (loader == nullptr) return NullArgument(kFn, "loader");
  if (json == nullptr) return NullArgument(kFn, "json");
  return Guard(kFn, [&] {
    auto s = LoaderState::FromJson(json);
    if (!s.ok()) return SetError(s.status());
    return SetError(loader->loader->LoadState(*s));
  });
}

GRIST_CAPI int grist_loader_get_info(grist_loader* loader, grist_loader_info* info) {
  constexpr const char* kFn = "grist_loader_get_info";
  if (loader == nullptr) return NullArgument(kFn, "loader");
  if (int rc = CheckStruct(kFn, "info", "grist_loader_info", info)) return rc;
  const Loader& l = *loader->loader;
  const int64_t kUnlimited = INT64_MAX;
  info->on_cuda = l.on_cuda() ? 1 : 0;
  info->size = l.size() == kUnlimited ? -1 : l.size();
  info->remaining = l.remaining() >= kUnlimited / 2 ? -1 : l.remaining();
  info->seed = l.schedule().options().seed;
  info->num_samples = static_cast<int64_t>(l.source().num_samples());
  info->seq_len = static_cast<int64_t>(l.source().sample_tokens()) - 1;
  info->batch_bytes = static_cast<int64_t>(l.batch_bytes());
  info->num_workers = l.num_workers();
  info->micro_batches_per_step = l.schedule().micro_batches_per_step();
  return 0;
}

GRIST_CAPI int grist_loader_release_id(grist_loader* loader, const char** out) {
  constexpr const char* kFn = "grist_loader_release_id";
  if (loader == nullptr) return NullArgument(kFn, "loader");
  if (out == nullptr) return NullArgument(kFn, "out");
  return Guard(kFn, [&] { return HandleText(loader, loader->loader->release_id(), out); });
}

GRIST_CAPI int grist_loader_device_note(grist_loader* loader, const char** out) {
  constexpr const char* kFn = "grist_loader_device_note";
  if (loader == nullptr) return NullArgument(kFn, "loader");
  if (out == nullptr) return NullArgument(kFn, "out");
  return Guard(kFn, [&] { return HandleText(loader, loader->loader->device_note(), out); });
}

GRIST_CAPI void grist_batch_free(grist_batch* batch) { delete batch; }

GRIST_CAPI int grist_batch_num_tensors(grist_batch* batch, int* n) {
  constexpr const char* kFn = "grist_batch_num_tensors";
  if (batch == nullptr) return NullArgument(kFn, "batch");
  if (n == nullptr) return NullArgument(kFn, "n");
  *n = static_cast<int>(batch->batch->tensors().size());
  return 0;
}

GRIST_CAPI int grist_batch_tensor_name(grist_batch* batch, int i, const char** out) {
  constexpr const char* kFn = "grist_batch_tensor_name";
  if (batch == nullptr) return NullArgument(kFn, "batch");
  if (out == nullptr) return NullArgument(kFn, "out");
  const auto& ts = batch->batch->tensors();
  if (i < 0 || static_cast<size_t>(i) >= ts.size()) {
    *out = nullptr;
    return SetError(absl::OutOfRangeError(absl::StrCat(kFn, ": the batch has no tensor ", i,
                                                       " (it has ", ts.size(), ")")));
  }
  *out = ts[static_cast<size_t>(i)].name;
  return 0;
}

GRIST_CAPI int grist_batch_wait(grist_batch* batch, uintptr_t stream) {
  if (batch == nullptr) return NullArgument("grist_batch_wait", "batch");
  return SetError(batch->batch->WaitOn(stream));
}

GRIST_CAPI int grist_batch_dlpack(grist_batch* batch, int i, void** out) {
  constexpr const char* kFn = "grist_batch_dlpack";
  if (out == nullptr) return NullArgument(kFn, "out");
  *out = nullptr;
  if (batch == nullptr) return NullArgument(kFn, "batch");
  const std::shared_ptr<const Batch>& b = batch->batch;
  const auto& ts = b->tensors();
  if (i < 0 || static_cast<size_t>(i) >= ts.size()) {
    return SetError(absl::OutOfRangeError(absl::StrCat(kFn, ": the batch has no tensor ", i,
                                                       " (it has ", ts.size(), ")")));
  }
  return Guard(kFn, [&] {
    const grist::loader::TensorInfo& t = ts[static_cast<size_t>(i)];
    auto* m = new ManagedTensor();
    m->batch = b;
    m->shape[0] = t.shape[0];
    m->shape[1] = t.shape[1];
    DLTensor& d = m->managed.dl_tensor;
    d.data = t.data;
    d.device = b->on_cuda() ? DLDevice{grist::dlpack::kDLCUDA, b->cuda_device()}
                            : DLDevice{grist::dlpack::kDLCPU, 0};
    d.ndim = t.ndim;
    switch (t.dtype) {
      case DType::kInt32: d.dtype = {grist::dlpack::kDLInt, 32, 1}; break;
      case DType::kInt64: d.dtype = {grist::dlpack::kDLInt, 64, 1}; break;
      case DType::kFloat32: d.dtype = {grist::dlpack::kDLFloat, 32, 1}; break;
    }
    d.shape = m->shape;
    d.strides = nullptr;
    d.byte_offset = 0;
    m->managed.manager_ctx = m;
    m->managed.deleter = DeleteManaged;
    *out = &m->managed;
    return 0;
  });
}

GRIST_CAPI int grist_batch_dlpack_all(grist_batch* batch, void** out, int n) {
  constexpr const char* kFn = "grist_batch_dlpack_all";
  if (batch == nullptr) return NullArgument(kFn, "batch");
  if (n < 0) return NegativeCount(kFn, "n", n);
  if (out == nullptr && n > 0) return NullArgument(kFn, "out");
  for (int i = 0; i < n; ++i) {
    int rc = grist_batch_dlpack(batch, i, &out[i]);
    if (rc != 0) {
      for (int j = 0; j < i; ++j) {
        grist_dlpack_free(out[j]);
        out[j] = nullptr;
      }
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

GRIST_CAPI void grist_synthetic_release_options_init(grist_synthetic_release_options* options) {
  if (options == nullptr) return;
  const grist::loader::SyntheticReleaseOptions d;
  *options = grist_synthetic_release_options{};
  options->struct_size = sizeof(grist_synthetic_release_options);
  options->seq_len = d.seq_len;
  options->samples = d.samples;
  options->validation_samples = d.validation_samples;
  options->samples_per_shard = d.samples_per_shard;
  options->vocab_size = d.vocab_size;
  options->mean_document_tokens = d.mean_document_tokens;
  options->seed = d.seed;
}

GRIST_CAPI int grist_write_synthetic_release(const char* dir,
                                             const grist_synthetic_release_options* options) {
  constexpr const char* kFn = "grist_write_synthetic_release";
  if (dir == nullptr) return NullArgument(kFn, "dir");
  if (int rc = CheckStruct(kFn, "options", "grist_synthetic_release_options", options)) return rc;
  return Guard(kFn, [&] {
    grist::loader::SyntheticReleaseOptions o;
    o.samples = options->samples;
    o.validation_samples = options->validation_samples;
    o.seq_len = options->seq_len;
    o.samples_per_shard = options->samples_per_shard;
    o.vocab_size = options->vocab_size;
    o.mean_document_tokens = options->mean_document_tokens;
    o.seed = options->seed;
    return SetError(grist::loader::WriteSyntheticRelease(grist::Env::Default(), dir, o));
  });
}
