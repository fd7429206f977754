// The C ABI of libgrist_capi.so (python/capi/grist_capi.h), called as python/grist/loader.py and
// ckpt.py call it: options structs from their _init functions, out pointers, negated status codes,
// grist_last_error, handles freed exactly once. Only the header is included, and only the shared
// library is linked, so under ASan+UBSan (scripts/test_extra.sh) this checks the library Python
// loads: bad arguments must come back as errors, never as a crash or a leak.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <stdlib.h>

#include "python/capi/grist_capi.h"
#include "python/capi/grist_dlpack.h"

extern "C" size_t grist_capi_test_c_sizeof(int which);

namespace {

namespace fs = std::filesystem;

using grist::dlpack::DLManagedTensor;
using grist::dlpack::DLTensor;

class TempDir {
 public:
  TempDir() {
    const char* t = std::getenv("TMPDIR");
    std::string tmpl = std::string(t && *t ? t : "/tmp") + "/grist_capi_test_XXXXXX";
    char* d = ::mkdtemp(tmpl.data());
    path_ = d ? d : "";
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) fs::remove_all(path_, ec);
  }
  std::string Join(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

std::string LastError() { return grist_last_error(); }

// The expectation that `rc` is the negated `code`, with grist_last_error containing `needle`.
#define EXPECT_STATUS(rc, code, needle)                                     \
  do {                                                                      \
    int rc_ = (rc);                                                         \
    EXPECT_EQ(rc_, -(code)) << grist_status_name(rc_) << ": " << LastError(); \
    EXPECT_NE(LastError().find(needle), std::string::npos) << LastError();  \
  } while (0)

void WriteRelease(const std::string& dir, uint64_t samples, uint64_t seed) {
  grist_synthetic_release_options o;
  grist_synthetic_release_options_init(&o);
  o.samples = samples;
  o.validation_samples = 8;
  o.seq_len = 16;
  o.samples_per_shard = 16;
  o.vocab_size = 1000;
  o.mean_document_tokens = 10;
  o.seed = seed;
  ASSERT_EQ(grist_write_synthetic_release(dir.c_str(), &o), 0) << LastError();
}

grist_loader_options Options(const char* const* paths, int n) {
  grist_loader_options o;
  grist_loader_options_init(&o);
  o.num_releases = n;
  o.paths = paths;
  o.micro_batch_size = 2;
  o.global_batch_size = 4;
  o.num_workers = 2;
  return o;
}

// One batch, as Python's Loader.__next__ turns it into tensors: name -> bytes of each tensor.
struct Tensors {
  std::vector<std::string> names;
  std::vector<std::string> bytes;
};

size_t TensorBytes(const DLTensor& t) {
  size_t n = t.dtype.bits / 8u;
  for (int d = 0; d < t.ndim; ++d) n *= static_cast<size_t>(t.shape[d]);
  return n;
}

Tensors Take(grist_batch* b) {
  Tensors out;
  int n = 0;
  EXPECT_EQ(grist_batch_num_tensors(b, &n), 0);
  std::vector<void*> ptrs(static_cast<size_t>(n));
  EXPECT_EQ(grist_batch_dlpack_all(b, ptrs.data(), n), 0) << LastError();
  for (int i = 0; i < n; ++i) {
    const char* name = nullptr;
    EXPECT_EQ(grist_batch_tensor_name(b, i, &name), 0);
    out.names.push_back(name);
    auto* m = static_cast<DLManagedTensor*>(ptrs[static_cast<size_t>(i)]);
    EXPECT_EQ(m->dl_tensor.device.device_type, grist::dlpack::kDLCPU);
    EXPECT_EQ(m->dl_tensor.strides, nullptr);
    out.bytes.emplace_back(static_cast<const char*>(m->dl_tensor.data), TensorBytes(m->dl_tensor));
    grist_dlpack_free(m);
  }
  return out;
}

TEST(CapiTest, HeaderStructsHaveTheSameSizeInC) {
  EXPECT_EQ(grist_capi_test_c_sizeof(0), sizeof(grist_loader_options));
  EXPECT_EQ(grist_capi_test_c_sizeof(1), sizeof(grist_loader_info));
  EXPECT_EQ(grist_capi_test_c_sizeof(2), sizeof(grist_synthetic_release_options));
  EXPECT_EQ(grist_capi_test_c_sizeof(3), sizeof(grist_ckpt_writer_options));
  EXPECT_EQ(grist_capi_abi_version(), GRIST_CAPI_ABI_VERSION);
  EXPECT_STRNE(grist_version(), "");
}

TEST(CapiTest, StatusNames) {
  EXPECT_STREQ(grist_status_name(0), "OK");
  EXPECT_STREQ(grist_status_name(-GRIST_OUT_OF_RANGE), "OUT_OF_RANGE");
  EXPECT_STREQ(grist_status_name(GRIST_DATA_LOSS), "DATA_LOSS");
  EXPECT_STREQ(grist_status_name(INT32_MIN), "UNKNOWN");
  EXPECT_STREQ(grist_status_name(99), "UNKNOWN");
}

TEST(CapiTest, ErrorMessageBuffers) {
  grist_loader* l = nullptr;
  ASSERT_EQ(grist_loader_open(nullptr, &l), -GRIST_INVALID_ARGUMENT);
  const std::string msg = "grist_loader_open: options is NULL";
  EXPECT_EQ(LastError(), msg);
  EXPECT_EQ(grist_last_error_copy(nullptr, 0), msg.size());
  char small[8];
  std::memset(small, 'x', sizeof(small));
  EXPECT_EQ(grist_last_error_copy(small, sizeof(small)), msg.size());
  EXPECT_STREQ(small, "grist_l");
  char big[128];
  EXPECT_EQ(grist_last_error_copy(big, sizeof(big)), msg.size());
  EXPECT_EQ(std::string(big), msg);
  char one[1] = {'x'};
  EXPECT_EQ(grist_last_error_copy(one, 1), msg.size());
  EXPECT_EQ(one[0], '\0');
  // The message is per thread: another thread's failure leaves this one's alone.
  std::string other;
  std::thread t([&] {
    EXPECT_EQ(grist_ckpt_verify(nullptr), -GRIST_INVALID_ARGUMENT);
    other = LastError();
  });
  t.join();
  EXPECT_EQ(other, "grist_ckpt_verify: dir is NULL");
  EXPECT_EQ(LastError(), msg);
}

TEST(CapiTest, LoaderOpenNextStateClose) {
  TempDir tmp;
  const std::string rel = tmp.Join("rel");
  WriteRelease(rel, 64, 7);
  const char* paths[] = {rel.c_str()};
  grist_loader_options o = Options(paths, 1);
  grist_loader* l = nullptr;
  ASSERT_EQ(grist_loader_open(&o, &l), 0) << LastError();
  ASSERT_NE(l, nullptr);

  grist_loader_info info;
  std::memset(&info, 0, sizeof(info));
  info.struct_size = sizeof(info);
  ASSERT_EQ(grist_loader_get_info(l, &info), 0) << LastError();
  EXPECT_EQ(info.on_cuda, 0);
  EXPECT_EQ(info.size, 32);  // 64 samples / micro batches of 2, one epoch, one rank
  EXPECT_EQ(info.remaining, 32);
  EXPECT_EQ(info.num_samples, 64);
  EXPECT_EQ(info.seq_len, 16);
  EXPECT_EQ(info.micro_batches_per_step, 2);
  EXPECT_EQ(info.num_workers, 2);
  EXPECT_EQ(info.seed, 7u);  // the release's seed
  EXPECT_GT(info.batch_bytes, 0);
  const char* text = nullptr;
  ASSERT_EQ(grist_loader_release_id(l, &text), 0);
  EXPECT_GT(std::strlen(text), 0u);
  ASSERT_EQ(grist_loader_device_note(l, &text), 0);
  EXPECT_STREQ(text, "");
  int n = -1;
  int64_t draws[4] = {0, 0, 0, 0};
  ASSERT_EQ(grist_loader_blend_draws(l, draws, 4, &n), 0);
  EXPECT_EQ(n, 1);
  EXPECT_EQ(draws[0], 4);

  // Batches 0..9, the state after batch 4, the rest to the end.
  std::vector<Tensors> seen;
  std::string state_after_5;
  while (true) {
    grist_batch* b = nullptr;
    int rc = grist_loader_next(l, &b);
    if (rc == -GRIST_OUT_OF_RANGE) {
      EXPECT_EQ(b, nullptr);
      break;
    }
    ASSERT_EQ(rc, 0) << LastError();
    seen.push_back(Take(b));
    grist_batch_free(b);
    if (seen.size() == 5) {
      const char* s = nullptr;
      ASSERT_EQ(grist_loader_state(l, &s), 0);
      state_after_5 = s;
    }
  }
  ASSERT_EQ(seen.size(), 32u);
  EXPECT_EQ(std::set<std::string>(seen[0].names.begin(), seen[0].names.end()),
            (std::set<std::string>{"input_ids", "labels", "position_ids", "cu_seqlens",
                                   "loss_mask", "sample_index"}));
  grist_batch* none = reinterpret_cast<grist_batch*>(1);
  EXPECT_EQ(grist_loader_next(l, &none), -GRIST_OUT_OF_RANGE);  // and again: the end stays
  EXPECT_EQ(none, nullptr);
  info.struct_size = sizeof(info);
  ASSERT_EQ(grist_loader_get_info(l, &info), 0);
  EXPECT_EQ(info.remaining, 0);

  // Resume in a new loader: the next batch is batch 5, byte for byte.
  grist_loader* r = nullptr;
  ASSERT_EQ(grist_loader_open(&o, &r), 0) << LastError();
  ASSERT_EQ(grist_loader_load_state(r, state_after_5.c_str()), 0) << LastError();
  for (size_t k = 5; k < 8; ++k) {
    grist_batch* b = nullptr;
    ASSERT_EQ(grist_loader_next(r, &b), 0) << LastError();
    Tensors t = Take(b);
    grist_batch_free(b);
    EXPECT_EQ(t.names, seen[k].names);
    EXPECT_EQ(t.bytes, seen[k].bytes) << "batch " << k;
  }
  grist_loader_close(r);
  grist_loader_close(l);
}

TEST(CapiTest, TensorsOutliveTheirBatchAndLoader) {
  TempDir tmp;
  const std::string rel = tmp.Join("rel");
  WriteRelease(rel, 16, 3);
  const char* paths[] = {rel.c_str()};
  grist_loader_options o = Options(paths, 1);
  o.fields = "input_ids,sample_index";
  grist_loader* l = nullptr;
  ASSERT_EQ(grist_loader_open(&o, &l), 0) << LastError();
  grist_batch* b = nullptr;
  ASSERT_EQ(grist_loader_next(l, &b), 0) << LastError();
  int n = 0;
  ASSERT_EQ(grist_batch_num_tensors(b, &n), 0);
  ASSERT_EQ(n, 2);
  void* ptrs[2] = {nullptr, nullptr};
  ASSERT_EQ(grist_batch_dlpack_all(b, ptrs, 2), 0);
  std::string before(static_cast<const char*>(static_cast<DLManagedTensor*>(ptrs[0])->dl_tensor.data),
                     2 * 16 * 8);
  grist_batch_free(b);
  grist_loader_close(l);  // the tensors still hold their buffer (ASan checks the reads below)
  auto* m = static_cast<DLManagedTensor*>(ptrs[0]);
  EXPECT_EQ(m->dl_tensor.ndim, 2);
  EXPECT_EQ(m->dl_tensor.shape[0], 2);
  EXPECT_EQ(m->dl_tensor.shape[1], 16);
  EXPECT_EQ(m->dl_tensor.dtype.code, grist::dlpack::kDLInt);
  EXPECT_EQ(m->dl_tensor.dtype.bits, 64);
  EXPECT_EQ(std::string(static_cast<const char*>(m->dl_tensor.data), before.size()), before);
  grist_dlpack_free(ptrs[0]);
  m = static_cast<DLManagedTensor*>(ptrs[1]);
  m->deleter(m);  // as torch does
}

TEST(CapiTest, Blend) {
  TempDir tmp;
  const std::string a = tmp.Join("a"), b = tmp.Join("b");
  WriteRelease(a, 64, 1);
  WriteRelease(b, 64, 2);
  const char* paths[] = {a.c_str(), b.c_str()};
  const double weights[] = {0.75, 0.25};
  grist_loader_options o = Options(paths, 2);
  o.weights = weights;
  o.global_batch_size = 8;
  grist_loader* l = nullptr;
  ASSERT_EQ(grist_loader_open(&o, &l), 0) << LastError();
  int n = 0;
  ASSERT_EQ(grist_loader_blend_draws(l, nullptr, 0, &n), 0);
  ASSERT_EQ(n, 2);
  int64_t draws[1] = {0};
  ASSERT_EQ(grist_loader_blend_draws(l, draws, 1, &n), 0);  // capacity 1: only the first
  EXPECT_EQ(draws[0], 6);
  grist_batch* batch = nullptr;
  ASSERT_EQ(grist_loader_next(l, &batch), 0) << LastError();
  Tensors t = Take(batch);
  grist_batch_free(batch);
  EXPECT_NE(std::find(t.names.begin(), t.names.end(), "release_index"), t.names.end());
  const double two[] = {0.5, 0.5};
  EXPECT_STATUS(grist_loader_set_weights(l, two, 1), GRIST_INVALID_ARGUMENT, "");
  EXPECT_STATUS(grist_loader_set_weights(l, nullptr, 2), GRIST_INVALID_ARGUMENT, "weights is NULL");
  EXPECT_STATUS(grist_loader_set_weights(l, two, -1), GRIST_INVALID_ARGUMENT, "must be >= 0");
  // Mid-step (one of this rank's four micro batches taken) new weights are refused.
  EXPECT_NE(grist_loader_set_weights(l, two, 2), 0);
  for (int k = 0; k < 3; ++k) {
    ASSERT_EQ(grist_loader_next(l, &batch), 0) << LastError();
    grist_batch_free(batch);
  }
  ASSERT_EQ(grist_loader_set_weights(l, two, 2), 0) << LastError();
  int64_t d2[2] = {0, 0};
  ASSERT_EQ(grist_loader_blend_draws(l, d2, 2, &n), 0);
  EXPECT_EQ(d2[0], 4);
  EXPECT_EQ(d2[1], 4);
  grist_loader_close(l);
}

TEST(CapiTest, LoaderBadArguments) {
  TempDir tmp;
  const std::string rel = tmp.Join("rel");
  WriteRelease(rel, 16, 3);
  const char* paths[] = {rel.c_str()};
  grist_loader* l = reinterpret_cast<grist_loader*>(1);

  EXPECT_STATUS(grist_loader_open(nullptr, &l), GRIST_INVALID_ARGUMENT, "options is NULL");
  EXPECT_EQ(l, nullptr);
  grist_loader_options o = Options(paths, 1);
  EXPECT_STATUS(grist_loader_open(&o, nullptr), GRIST_INVALID_ARGUMENT, "out is NULL");
  o.struct_size = sizeof(o) - 8;
  EXPECT_STATUS(grist_loader_open(&o, &l), GRIST_INVALID_ARGUMENT,
                "grist_loader_options.struct_size is " + std::to_string(sizeof(o) - 8) +
                    ", this library's is " + std::to_string(sizeof(o)));
  o = Options(paths, 0);
  EXPECT_STATUS(grist_loader_open(&o, &l), GRIST_INVALID_ARGUMENT, "num_releases is 0");
  o = Options(nullptr, 1);
  EXPECT_STATUS(grist_loader_open(&o, &l), GRIST_INVALID_ARGUMENT, "options->paths is NULL");
  const char* null_path[] = {nullptr};
  o = Options(null_path, 1);
  EXPECT_STATUS(grist_loader_open(&o, &l), GRIST_INVALID_ARGUMENT, "options->paths[0] is NULL");
  const std::string missing = tmp.Join("missing");
  const char* missing_path[] = {missing.c_str()};
  o = Options(missing_path, 1);
  EXPECT_STATUS(grist_loader_open(&o, &l), GRIST_NOT_FOUND, missing);
  EXPECT_EQ(l, nullptr);
  o = Options(paths, 1);
  o.fields = "input_ids,nope";
  EXPECT_STATUS(grist_loader_open(&o, &l), GRIST_INVALID_ARGUMENT, "nope");
  o = Options(paths, 1);
  o.device = 7;
  EXPECT_STATUS(grist_loader_open(&o, &l), GRIST_INVALID_ARGUMENT, "device is 7");
  o = Options(paths, 1);
  o.global_batch_size = 3;  // not a multiple of micro_batch_size * dp_size
  EXPECT_NE(grist_loader_open(&o, &l), 0);
  o = Options(paths, 1);
  o.dp_rank = 5;
  EXPECT_NE(grist_loader_open(&o, &l), 0);
  o = Options(paths, 1);
  o.split = "nosuchsplit";
  EXPECT_NE(grist_loader_open(&o, &l), 0);
  EXPECT_EQ(l, nullptr);

  // A NULL handle or out pointer to every function taking one.
  const char* s = nullptr;
  int n = 0;
  grist_loader_info info;
  info.struct_size = sizeof(info);
  grist_batch* b = nullptr;
  EXPECT_STATUS(grist_loader_next(nullptr, &b), GRIST_INVALID_ARGUMENT, "loader is NULL");
  EXPECT_STATUS(grist_loader_state(nullptr, &s), GRIST_INVALID_ARGUMENT, "loader is NULL");
  EXPECT_STATUS(grist_loader_load_state(nullptr, "{}"), GRIST_INVALID_ARGUMENT, "loader is NULL");
  EXPECT_STATUS(grist_loader_get_info(nullptr, &info), GRIST_INVALID_ARGUMENT, "loader is NULL");
  EXPECT_STATUS(grist_loader_release_id(nullptr, &s), GRIST_INVALID_ARGUMENT, "loader is NULL");
  EXPECT_STATUS(grist_loader_device_note(nullptr, &s), GRIST_INVALID_ARGUMENT, "loader is NULL");
  EXPECT_STATUS(grist_loader_set_weights(nullptr, nullptr, 0), GRIST_INVALID_ARGUMENT, "loader is NULL");
  EXPECT_STATUS(grist_loader_blend_draws(nullptr, nullptr, 0, &n), GRIST_INVALID_ARGUMENT, "loader is NULL");
  grist_loader_close(nullptr);
  EXPECT_STATUS(grist_batch_num_tensors(nullptr, &n), GRIST_INVALID_ARGUMENT, "batch is NULL");
  EXPECT_STATUS(grist_batch_tensor_name(nullptr, 0, &s), GRIST_INVALID_ARGUMENT, "batch is NULL");
  EXPECT_STATUS(grist_batch_wait(nullptr, 0), GRIST_INVALID_ARGUMENT, "batch is NULL");
  void* p = nullptr;
  EXPECT_STATUS(grist_batch_dlpack(nullptr, 0, &p), GRIST_INVALID_ARGUMENT, "batch is NULL");
  EXPECT_STATUS(grist_batch_dlpack_all(nullptr, &p, 1), GRIST_INVALID_ARGUMENT, "batch is NULL");
  grist_batch_free(nullptr);
  grist_dlpack_free(nullptr);

  o = Options(paths, 1);
  ASSERT_EQ(grist_loader_open(&o, &l), 0) << LastError();
  EXPECT_STATUS(grist_loader_next(l, nullptr), GRIST_INVALID_ARGUMENT, "out is NULL");
  EXPECT_STATUS(grist_loader_state(l, nullptr), GRIST_INVALID_ARGUMENT, "out is NULL");
  EXPECT_STATUS(grist_loader_get_info(l, nullptr), GRIST_INVALID_ARGUMENT, "info is NULL");
  info.struct_size = 4;
  EXPECT_STATUS(grist_loader_get_info(l, &info), GRIST_INVALID_ARGUMENT,
                "grist_loader_info.struct_size is 4");
  EXPECT_STATUS(grist_loader_load_state(l, nullptr), GRIST_INVALID_ARGUMENT, "json is NULL");
  EXPECT_NE(grist_loader_load_state(l, "not json"), 0);
  EXPECT_NE(grist_loader_load_state(l, "{\"consumed_samples\": \"x\"}"), 0);
  EXPECT_STATUS(grist_loader_blend_draws(l, nullptr, 3, &n), GRIST_INVALID_ARGUMENT, "out is NULL");
  EXPECT_STATUS(grist_loader_blend_draws(l, nullptr, 0, nullptr), GRIST_INVALID_ARGUMENT, "n is NULL");
  ASSERT_EQ(grist_loader_next(l, &b), 0) << LastError();
  EXPECT_STATUS(grist_batch_tensor_name(b, 6, &s), GRIST_OUT_OF_RANGE, "no tensor 6");
  EXPECT_STATUS(grist_batch_tensor_name(b, -1, &s), GRIST_OUT_OF_RANGE, "no tensor -1");
  EXPECT_STATUS(grist_batch_dlpack(b, 99, &p), GRIST_OUT_OF_RANGE, "no tensor 99");
  EXPECT_EQ(p, nullptr);
  EXPECT_STATUS(grist_batch_dlpack(b, 0, nullptr), GRIST_INVALID_ARGUMENT, "out is NULL");
  // Asking for more tensors than the batch has: an error and nothing left allocated (LeakSanitizer).
  void* ptrs[8];
  EXPECT_STATUS(grist_batch_dlpack_all(b, ptrs, 8), GRIST_OUT_OF_RANGE, "no tensor 6");
  for (int i = 0; i < 6; ++i) EXPECT_EQ(ptrs[i], nullptr);
  EXPECT_STATUS(grist_batch_dlpack_all(b, nullptr, 2), GRIST_INVALID_ARGUMENT, "out is NULL");
  EXPECT_STATUS(grist_batch_dlpack_all(b, ptrs, -2), GRIST_INVALID_ARGUMENT, "must be >= 0");
  EXPECT_EQ(grist_batch_wait(b, 0), 0);  // a CPU batch: nothing to wait for
  grist_batch_free(b);
  grist_loader_close(l);

  // The synthetic release writer.
  grist_synthetic_release_options so;
  grist_synthetic_release_options_init(&so);
  EXPECT_STATUS(grist_write_synthetic_release(nullptr, &so), GRIST_INVALID_ARGUMENT, "dir is NULL");
  EXPECT_STATUS(grist_write_synthetic_release(tmp.Join("x").c_str(), nullptr), GRIST_INVALID_ARGUMENT,
                "options is NULL");
  so.struct_size = 1;
  EXPECT_STATUS(grist_write_synthetic_release(tmp.Join("x").c_str(), &so), GRIST_INVALID_ARGUMENT,
                "grist_synthetic_release_options.struct_size is 1");
  grist_synthetic_release_options_init(&so);
  EXPECT_NE(grist_write_synthetic_release(rel.c_str(), &so), 0);  // holds a release already
  grist_loader_options_init(nullptr);
  grist_synthetic_release_options_init(nullptr);
}

// ---- Checkpoints ----

// The value of "key":<number> in a one-line JSON text.
uint64_t JsonNumber(const std::string& json, const std::string& key, size_t from = 0) {
  const std::string k = "\"" + key + "\":";
  size_t at = json.find(k, from);
  EXPECT_NE(at, std::string::npos) << key << " in " << json;
  if (at == std::string::npos) return 0;
  return std::stoull(json.substr(at + k.size()));
}

struct Saved {
  std::vector<float> weights = std::vector<float>(32);
  std::vector<int64_t> counts = {3, 1, 4};
  std::string dir;
};

grist_ckpt_writer* NewWriter() {
  grist_ckpt_writer_options o;
  grist_ckpt_writer_options_init(&o);
  o.direct = 0;
  grist_ckpt_writer* w = nullptr;
  EXPECT_EQ(grist_ckpt_writer_new(&o, &w), 0) << LastError();
  return w;
}

// Saves `s` to `dir` (step 42) as ckpt.save does with the writer's copy (Begin, layout, copy,
// wait, publish with the tensor index); in_place: as save(snapshot=False) does.
void Save(grist_ckpt_writer* w, Saved& s, const std::string& dir, bool in_place) {
  s.dir = dir;
  for (size_t i = 0; i < s.weights.size(); ++i) s.weights[i] = 0.5f * static_cast<float>(i);
  ASSERT_EQ(grist_ckpt_prepare_dir(dir.c_str()), 0) << LastError();
  const std::string file = dir + "/rank-00000.safetensors";
  const char* names[] = {"model.w", "counts"};
  const int dtypes[] = {GRIST_DTYPE_F32, GRIST_DTYPE_I64};
  const int ndims[] = {2, 1};
  const int64_t dims[] = {4, 8, 3};
  const char* keys[] = {"format"};
  const char* vals[] = {"pt"};
  grist_ckpt_pending* p = nullptr;
  uint64_t data = 0, begins[2] = {0, 0};
  if (in_place) {
    const uint64_t srcs[] = {reinterpret_cast<uint64_t>(s.weights.data()),
                             reinterpret_cast<uint64_t>(s.counts.data())};
    ASSERT_EQ(grist_ckpt_save_in_place(w, file.c_str(), 2, names, dtypes, ndims, dims, srcs, 1, keys,
                                       vals, &p),
              0)
        << LastError();
    ASSERT_EQ(grist_ckpt_pending_layout(p, &data, begins, 2), 0) << LastError();
  } else {
    ASSERT_EQ(grist_ckpt_begin(w, file.c_str(), 2, names, dtypes, ndims, dims, 1, keys, vals, &p), 0)
        << LastError();
    ASSERT_EQ(grist_ckpt_pending_layout(p, &data, begins, 2), 0) << LastError();
    EXPECT_NE(data, 0u);
    const uint64_t offs[] = {begins[0], begins[1]};
    const uint64_t srcs[] = {reinterpret_cast<uint64_t>(s.weights.data()),
                             reinterpret_cast<uint64_t>(s.counts.data())};
    const uint64_t lens[] = {32 * 4, 3 * 8};
    ASSERT_EQ(grist_ckpt_pending_copy(p, 2, offs, srcs, lens, 1), 0) << LastError();
    ASSERT_EQ(grist_ckpt_pending_mark_ready(p, UINT64_MAX), 0);
  }
  const char* out = nullptr;
  ASSERT_EQ(grist_ckpt_pending_wait(p, 0, &out), 0) << LastError();
  EXPECT_EQ(grist_ckpt_pending_done(p), 1);
  const std::string result = out;
  grist_ckpt_pending_free(p);
  // {"record":{...},"direct":...}: the record object.
  const size_t rb = result.find("{", 1), re = result.find(",\"direct\":");
  ASSERT_NE(re, std::string::npos) << result;
  const std::string record = result.substr(rb, re - rb);
  const std::string index =
      "[{\"name\":\"model.w\",\"dtype\":\"F32\",\"shape\":[4,8],\"shards\":[{\"rank\":0,"
      "\"offsets\":[0,0],\"lengths\":[4,8],\"begin\":" + std::to_string(begins[0]) +
      ",\"end\":" + std::to_string(begins[0] + 128) +
      "}]},{\"name\":\"counts\",\"dtype\":\"I64\",\"shape\":[3],\"shards\":[{\"rank\":0,"
      "\"offsets\":[0],\"lengths\":[3],\"begin\":" + std::to_string(begins[1]) +
      ",\"end\":" + std::to_string(begins[1] + 24) + "}]}]";
  const char* records[] = {record.c_str()};
  ASSERT_EQ(grist_ckpt_publish(dir.c_str(), 42, 1, 1, records, 1, keys, vals, index.c_str(),
                               "{\"__dict__\":[]}", 0),
            0)
      << LastError();
}

void ExpectLoads(const Saved& s, int verify) {
  grist_ckpt_load_handle* h = nullptr;
  const char* info = nullptr;
  ASSERT_EQ(grist_ckpt_load(s.dir.c_str(), 0, verify, 0, &h, &info), 0) << LastError();
  const std::string j = info;
  EXPECT_EQ(JsonNumber(j, "step"), 42u);
  EXPECT_EQ(JsonNumber(j, "world_size"), 1u);
  const uint64_t data = JsonNumber(j, "data");
  const size_t w_at = j.find("\"name\":\"model.w\""), c_at = j.find("\"name\":\"counts\"");
  ASSERT_NE(w_at, std::string::npos) << j;
  ASSERT_NE(c_at, std::string::npos) << j;
  EXPECT_EQ(JsonNumber(j, "dtype", w_at), static_cast<uint64_t>(GRIST_DTYPE_F32));
  EXPECT_EQ(JsonNumber(j, "nbytes", w_at), 128u);
  const uint64_t w_off = JsonNumber(j, "offset", w_at), c_off = JsonNumber(j, "offset", c_at);
  ASSERT_EQ(grist_ckpt_load_wait_data(h, w_off + 128), 0) << LastError();
  int pinned = -1;
  ASSERT_EQ(grist_ckpt_load_finish(h, &pinned), 0) << LastError();
  EXPECT_EQ(pinned, 0);
  EXPECT_EQ(std::memcmp(reinterpret_cast<const void*>(data + w_off), s.weights.data(), 128), 0);
  EXPECT_EQ(std::memcmp(reinterpret_cast<const void*>(data + c_off), s.counts.data(), 24), 0);
  grist_ckpt_load_free(h);
}

TEST(CapiTest, CheckpointSaveLoadVerify) {
  TempDir tmp;
  grist_ckpt_writer* w = NewWriter();
  ASSERT_NE(w, nullptr);
  Saved s;
  Save(w, s, tmp.Join("ckpt/step-00000042"), /*in_place=*/false);
  ExpectLoads(s, 1);

  const char* out = nullptr;
  ASSERT_EQ(grist_ckpt_latest(tmp.Join("ckpt").c_str(), 1, &out), 0) << LastError();
  EXPECT_EQ(std::string(out), s.dir);
  ASSERT_EQ(grist_ckpt_list(tmp.Join("ckpt").c_str(), &out), 0) << LastError();
  EXPECT_EQ(std::string(out), "[{\"path\":\"" + s.dir + "\",\"step\":42}]");
  EXPECT_EQ(grist_ckpt_verify(s.dir.c_str()), 0) << LastError();
  int64_t step = 0;
  ASSERT_EQ(grist_ckpt_step_from_name(s.dir.c_str(), &step), 0);
  EXPECT_EQ(step, 42);
  ASSERT_EQ(grist_ckpt_step_from_name("no-digits", &step), 0);
  EXPECT_EQ(step, -1);

  // The manifest, a range read of the rank file by its record, an export.
  ASSERT_EQ(grist_ckpt_read_manifest(s.dir.c_str(), &out), 0) << LastError();
  const std::string manifest = out;
  EXPECT_NE(manifest.find("\"format\""), std::string::npos) << manifest;
  const size_t f0 = manifest.find("\"files\"");
  ASSERT_NE(f0, std::string::npos);
  const size_t rb = manifest.find('{', f0), re = manifest.find('}', rb);
  const std::string record = manifest.substr(rb, re - rb + 1);
  const uint64_t w_begin = manifest.find("\"model.w\"") != std::string::npos
                               ? JsonNumber(manifest, "begin", manifest.find("\"model.w\""))
                               : 0;
  const uint64_t begins[] = {w_begin + 8};
  const uint64_t ends[] = {w_begin + 16};
  uint64_t addrs[1] = {0};
  grist_ckpt_ranges* rr = nullptr;
  ASSERT_EQ(grist_ckpt_read_ranges((s.dir + "/rank-00000.safetensors").c_str(), record.c_str(), 1,
                                   begins, ends, 1, 0, &rr, addrs),
            0)
      << LastError() << " record " << record;
  EXPECT_EQ(std::memcmp(reinterpret_cast<const void*>(addrs[0]), s.weights.data() + 2, 8), 0);
  grist_ckpt_ranges_free(rr);
  ASSERT_EQ(grist_ckpt_export(s.dir.c_str(), tmp.Join("hf").c_str(), "model.", 0, &out), 0)
      << LastError();
  EXPECT_EQ(JsonNumber(out, "tensors"), 1u);
  EXPECT_EQ(JsonNumber(out, "total_bytes"), 128u);

  // A second checkpoint written in place, loaded from the safetensors file alone.
  Saved s2;
  Save(w, s2, tmp.Join("ckpt/step-00000043"), /*in_place=*/true);
  ExpectLoads(s2, 1);
  grist_ckpt_load_handle* h = nullptr;
  ASSERT_EQ(grist_ckpt_load((s2.dir + "/rank-00000.safetensors").c_str(), 0, 1, 0, &h, &out), 0)
      << LastError();
  int pinned = 0;
  EXPECT_EQ(grist_ckpt_load_finish(h, &pinned), 0) << LastError();
  grist_ckpt_load_free(h);
  grist_ckpt_writer_free(w);

  // A flipped byte of the data region: verify and a verifying load name the damage.
  const std::string file = s.dir + "/rank-00000.safetensors";
  {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(0, std::ios::end);
    const auto size = static_cast<std::streamoff>(f.tellg());
    f.seekp(size - 3);
    char c = 0;
    f.seekg(size - 3);
    f.read(&c, 1);
    c ^= 0x40;
    f.seekp(size - 3);
    f.write(&c, 1);
  }
  EXPECT_STATUS(grist_ckpt_verify(s.dir.c_str()), GRIST_DATA_LOSS, "rank-00000.safetensors");
  h = nullptr;
  ASSERT_EQ(grist_ckpt_load(s.dir.c_str(), 0, 1, 0, &h, &out), 0) << LastError();
  EXPECT_STATUS(grist_ckpt_load_finish(h, &pinned), GRIST_DATA_LOSS, "rank-00000.safetensors");
  grist_ckpt_load_free(h);
  // latest(verify) skips it for the good one.
  ASSERT_EQ(grist_ckpt_latest(tmp.Join("ckpt").c_str(), 1, &out), 0) << LastError();
  EXPECT_EQ(std::string(out), s2.dir);
}

TEST(CapiTest, CheckpointDtypes) {
  EXPECT_EQ(grist_ckpt_num_dtypes(), GRIST_DTYPE_COUNT);
  const char* name = nullptr;
  ASSERT_EQ(grist_ckpt_dtype_name(GRIST_DTYPE_BF16, &name), 0);
  EXPECT_STREQ(name, "BF16");
  ASSERT_EQ(grist_ckpt_dtype_name(GRIST_DTYPE_F8_E4M3, &name), 0);
  EXPECT_STREQ(name, "F8_E4M3");
  ASSERT_EQ(grist_ckpt_dtype_name(GRIST_DTYPE_BOOL, &name), 0);
  EXPECT_STREQ(name, "BOOL");
  ASSERT_EQ(grist_ckpt_dtype_name(GRIST_DTYPE_F64, &name), 0);
  EXPECT_STREQ(name, "F64");
  EXPECT_STATUS(grist_ckpt_dtype_name(GRIST_DTYPE_COUNT, &name), GRIST_OUT_OF_RANGE, "no dtype code 15");
  EXPECT_EQ(name, nullptr);
  EXPECT_STATUS(grist_ckpt_dtype_name(-1, &name), GRIST_OUT_OF_RANGE, "no dtype code -1");
  EXPECT_STATUS(grist_ckpt_dtype_name(0, nullptr), GRIST_INVALID_ARGUMENT, "out is NULL");
}

TEST(CapiTest, CheckpointAbortAndCopyOutsideTheFile) {
  TempDir tmp;
  grist_ckpt_writer* w = NewWriter();
  ASSERT_NE(w, nullptr);
  ASSERT_EQ(grist_ckpt_prepare_dir(tmp.Join("c").c_str()), 0);
  const std::string file = tmp.Join("c/rank-00000.safetensors");
  const char* names[] = {"t"};
  const int dtypes[] = {GRIST_DTYPE_U8};
  const int ndims[] = {1};
  const int64_t dims[] = {100};
  grist_ckpt_pending* p = nullptr;
  ASSERT_EQ(grist_ckpt_begin(w, file.c_str(), 1, names, dtypes, ndims, dims, 0, nullptr, nullptr, &p),
            0)
      << LastError();
  std::vector<char> src(200, 'x');
  const uint64_t offs[] = {50};
  const uint64_t srcs[] = {reinterpret_cast<uint64_t>(src.data())};
  const uint64_t lens[] = {51};  // one byte past the 100-byte data region
  EXPECT_STATUS(grist_ckpt_pending_copy(p, 1, offs, srcs, lens, 0), GRIST_OUT_OF_RANGE,
                "outside the data region of 100 bytes");
  const uint64_t huge[] = {UINT64_MAX};
  EXPECT_STATUS(grist_ckpt_pending_copy(p, 1, huge, srcs, lens, 0), GRIST_OUT_OF_RANGE, "span 0");
  EXPECT_STATUS(grist_ckpt_pending_copy(p, 1, nullptr, srcs, lens, 0), GRIST_INVALID_ARGUMENT,
                "is NULL");
  EXPECT_STATUS(grist_ckpt_pending_copy(p, -1, offs, srcs, lens, 0), GRIST_INVALID_ARGUMENT,
                "must be >= 0");
  uint64_t data = 0, begins[1];
  EXPECT_STATUS(grist_ckpt_pending_layout(p, &data, begins, 2), GRIST_INVALID_ARGUMENT,
                "the file has 1 tensors");
  EXPECT_STATUS(grist_ckpt_pending_layout(p, nullptr, begins, 1), GRIST_INVALID_ARGUMENT, "data is NULL");
  EXPECT_STATUS(grist_ckpt_pending_layout(p, &data, nullptr, 1), GRIST_INVALID_ARGUMENT, "begins is NULL");
  ASSERT_EQ(grist_ckpt_pending_abort(p, "the test gives up"), 0);
  const char* out = nullptr;
  EXPECT_STATUS(grist_ckpt_pending_wait(p, 0, &out), GRIST_CANCELLED, "the test gives up");
  EXPECT_EQ(grist_ckpt_pending_done(p), 1);
  grist_ckpt_pending_free(p);
  // The writer stays usable for the next file.
  p = nullptr;
  ASSERT_EQ(grist_ckpt_begin(w, file.c_str(), 1, names, dtypes, ndims, dims, 0, nullptr, nullptr, &p),
            0)
      << LastError();
  ASSERT_EQ(grist_ckpt_pending_layout(p, &data, begins, 1), 0);
  const uint64_t ok_len[] = {100};
  const uint64_t zero[] = {0};
  ASSERT_EQ(grist_ckpt_pending_copy(p, 1, zero, srcs, ok_len, 1), 0) << LastError();
  ASSERT_EQ(grist_ckpt_pending_wait(p, 0, &out), 0) << LastError();
  grist_ckpt_pending_free(p);
  grist_ckpt_writer_free(w);
}

TEST(CapiTest, CheckpointBadArguments) {
  TempDir tmp;
  const char* out = nullptr;
  grist_ckpt_writer* w = reinterpret_cast<grist_ckpt_writer*>(1);
  EXPECT_STATUS(grist_ckpt_writer_new(nullptr, &w), GRIST_INVALID_ARGUMENT, "options is NULL");
  EXPECT_EQ(w, nullptr);
  grist_ckpt_writer_options wo;
  grist_ckpt_writer_options_init(&wo);
  EXPECT_STATUS(grist_ckpt_writer_new(&wo, nullptr), GRIST_INVALID_ARGUMENT, "out is NULL");
  wo.struct_size = 1000;
  EXPECT_STATUS(grist_ckpt_writer_new(&wo, &w), GRIST_INVALID_ARGUMENT,
                "grist_ckpt_writer_options.struct_size is 1000");
  grist_ckpt_writer_options_init(nullptr);
  grist_ckpt_writer_free(nullptr);
  grist_ckpt_pending_free(nullptr);
  grist_ckpt_load_free(nullptr);
  grist_ckpt_ranges_free(nullptr);

  w = NewWriter();
  ASSERT_NE(w, nullptr);
  const std::string file = tmp.Join("rank-00000.safetensors");
  const char* names[] = {"a"};
  const int dtypes[] = {GRIST_DTYPE_F32};
  const int bad_dtype[] = {99};
  const int ndims[] = {1};
  const int bad_ndims[] = {-2};
  const int64_t dims[] = {4};
  grist_ckpt_pending* p = reinterpret_cast<grist_ckpt_pending*>(1);
  EXPECT_STATUS(grist_ckpt_begin(nullptr, file.c_str(), 1, names, dtypes, ndims, dims, 0, nullptr,
                                 nullptr, &p),
                GRIST_INVALID_ARGUMENT, "writer is NULL");
  EXPECT_EQ(p, nullptr);
  EXPECT_STATUS(grist_ckpt_begin(w, nullptr, 1, names, dtypes, ndims, dims, 0, nullptr, nullptr, &p),
                GRIST_INVALID_ARGUMENT, "path is NULL");
  EXPECT_STATUS(grist_ckpt_begin(w, file.c_str(), 1, names, dtypes, ndims, dims, 0, nullptr, nullptr,
                                 nullptr),
                GRIST_INVALID_ARGUMENT, "out is NULL");
  EXPECT_STATUS(grist_ckpt_begin(w, file.c_str(), 1, names, bad_dtype, ndims, dims, 0, nullptr,
                                 nullptr, &p),
                GRIST_INVALID_ARGUMENT, "dtype code 99");
  EXPECT_STATUS(grist_ckpt_begin(w, file.c_str(), 1, names, dtypes, bad_ndims, dims, 0, nullptr,
                                 nullptr, &p),
                GRIST_INVALID_ARGUMENT, "-2 dimensions");
  EXPECT_STATUS(grist_ckpt_begin(w, file.c_str(), -1, names, dtypes, ndims, dims, 0, nullptr, nullptr,
                                 &p),
                GRIST_INVALID_ARGUMENT, "n is -1");
  EXPECT_STATUS(grist_ckpt_begin(w, file.c_str(), 1, nullptr, dtypes, ndims, dims, 0, nullptr, nullptr,
                                 &p),
                GRIST_INVALID_ARGUMENT, "is NULL");
  EXPECT_STATUS(grist_ckpt_begin(w, file.c_str(), 1, names, dtypes, ndims, nullptr, 0, nullptr,
                                 nullptr, &p),
                GRIST_INVALID_ARGUMENT, "dims is NULL");
  EXPECT_STATUS(grist_ckpt_begin(w, file.c_str(), 1, names, dtypes, ndims, dims, 1, nullptr, nullptr,
                                 &p),
                GRIST_INVALID_ARGUMENT, "meta_keys or meta_vals is NULL");
  EXPECT_STATUS(grist_ckpt_begin(w, file.c_str(), 1, names, dtypes, ndims, dims, -3, nullptr,
                                 nullptr, &p),
                GRIST_INVALID_ARGUMENT, "nmeta is -3");
  const char* null_name[] = {nullptr};
  EXPECT_STATUS(grist_ckpt_begin(w, file.c_str(), 1, null_name, dtypes, ndims, dims, 0, nullptr,
                                 nullptr, &p),
                GRIST_INVALID_ARGUMENT, "names[0] is NULL");
  EXPECT_STATUS(grist_ckpt_save_in_place(w, file.c_str(), 1, names, dtypes, ndims, dims, nullptr, 0,
                                         nullptr, nullptr, &p),
                GRIST_INVALID_ARGUMENT, "srcs is NULL");
  EXPECT_NE(grist_ckpt_begin(w, tmp.Join("no/such/dir/f.safetensors").c_str(), 1, names, dtypes,
                             ndims, dims, 0, nullptr, nullptr, &p),
            0);
  EXPECT_EQ(p, nullptr);
  grist_ckpt_writer_free(w);

  // Functions on a NULL pending file.
  uint64_t data = 0;
  EXPECT_STATUS(grist_ckpt_pending_layout(nullptr, &data, nullptr, 0), GRIST_INVALID_ARGUMENT, "pending is NULL");
  EXPECT_STATUS(grist_ckpt_pending_copy(nullptr, 0, nullptr, nullptr, nullptr, 0), GRIST_INVALID_ARGUMENT,
                "pending is NULL");
  EXPECT_STATUS(grist_ckpt_pending_mark_ready(nullptr, 1), GRIST_INVALID_ARGUMENT, "pending is NULL");
  EXPECT_STATUS(grist_ckpt_pending_abort(nullptr, "x"), GRIST_INVALID_ARGUMENT, "pending is NULL");
  EXPECT_STATUS(grist_ckpt_pending_done(nullptr), GRIST_INVALID_ARGUMENT, "pending is NULL");
  EXPECT_STATUS(grist_ckpt_pending_wait(nullptr, 0, &out), GRIST_INVALID_ARGUMENT, "pending is NULL");

  // Paths that are not checkpoints.
  const std::string empty = tmp.Join("empty");
  ASSERT_EQ(grist_ckpt_prepare_dir(empty.c_str()), 0);
  EXPECT_STATUS(grist_ckpt_latest(empty.c_str(), 0, &out), GRIST_NOT_FOUND, "");
  EXPECT_STATUS(grist_ckpt_read_manifest(empty.c_str(), &out), GRIST_NOT_FOUND, "no manifest.json");
  EXPECT_NE(grist_ckpt_verify(empty.c_str()), 0);
  EXPECT_NE(grist_ckpt_verify(tmp.Join("missing").c_str()), 0);
  grist_ckpt_load_handle* h = reinterpret_cast<grist_ckpt_load_handle*>(1);
  EXPECT_NE(grist_ckpt_load(tmp.Join("missing").c_str(), 0, 1, 0, &h, &out), 0);
  EXPECT_EQ(h, nullptr);
  EXPECT_NE(grist_ckpt_load(tmp.Join("missing.safetensors").c_str(), 0, 1, 0, &h, &out), 0);
  {
    std::ofstream(tmp.Join("junk.safetensors")) << "not a safetensors file at all";
  }
  EXPECT_NE(grist_ckpt_load(tmp.Join("junk.safetensors").c_str(), 0, 1, 0, &h, &out), 0);
  EXPECT_EQ(h, nullptr);
  EXPECT_STATUS(grist_ckpt_load(nullptr, 0, 1, 0, &h, &out), GRIST_INVALID_ARGUMENT, "dir is NULL");
  EXPECT_STATUS(grist_ckpt_load(empty.c_str(), 0, 1, 0, nullptr, &out), GRIST_INVALID_ARGUMENT,
                "handle is NULL");
  EXPECT_STATUS(grist_ckpt_load(empty.c_str(), 0, 1, 0, &h, nullptr), GRIST_INVALID_ARGUMENT, "info is NULL");
  int pinned = 0;
  EXPECT_STATUS(grist_ckpt_load_wait_data(nullptr, 0), GRIST_INVALID_ARGUMENT, "handle is NULL");
  EXPECT_STATUS(grist_ckpt_load_finish(nullptr, &pinned), GRIST_INVALID_ARGUMENT, "handle is NULL");
  grist_ckpt_ranges* rr = nullptr;
  uint64_t b[1] = {0}, e[1] = {8}, a[1] = {0};
  EXPECT_NE(grist_ckpt_read_ranges(file.c_str(), "{not json", 1, b, e, 1, 0, &rr, a), 0);
  EXPECT_STATUS(grist_ckpt_read_ranges(file.c_str(), "{}", 1, nullptr, e, 1, 0, &rr, a),
                GRIST_INVALID_ARGUMENT, "is NULL");
  EXPECT_STATUS(grist_ckpt_read_ranges(nullptr, "{}", 0, nullptr, nullptr, 1, 0, &rr, nullptr),
                GRIST_INVALID_ARGUMENT, "path is NULL");
  EXPECT_STATUS(grist_ckpt_export(empty.c_str(), nullptr, "", 0, &out), GRIST_INVALID_ARGUMENT,
                "out_dir is NULL");
  EXPECT_NE(grist_ckpt_export(empty.c_str(), tmp.Join("o").c_str(), "", 0, &out), 0);
  EXPECT_STATUS(grist_ckpt_list(nullptr, &out), GRIST_INVALID_ARGUMENT, "root is NULL");
  EXPECT_STATUS(grist_ckpt_step_from_name("x", nullptr), GRIST_INVALID_ARGUMENT, "step is NULL");
  EXPECT_STATUS(grist_ckpt_prepare_dir(nullptr), GRIST_INVALID_ARGUMENT, "dir is NULL");

  // Publishing: a malformed record, a missing rank, a NULL record, an index that does not fit.
  const char* bad[] = {"{\"rank\":0}"};
  EXPECT_NE(grist_ckpt_publish(tmp.Join("p").c_str(), 1, 1, 1, bad, 0, nullptr, nullptr, "[]",
                               nullptr, 0),
            0);
  const char* null_rec[] = {nullptr};
  EXPECT_STATUS(grist_ckpt_publish(tmp.Join("p").c_str(), 1, 1, 1, null_rec, 0, nullptr, nullptr,
                                   "[]", nullptr, 0),
                GRIST_INVALID_ARGUMENT, "records[0] is NULL");
  EXPECT_STATUS(grist_ckpt_publish(nullptr, 1, 1, 0, nullptr, 0, nullptr, nullptr, "[]", nullptr, 0),
                GRIST_INVALID_ARGUMENT, "dir is NULL");
  EXPECT_STATUS(grist_ckpt_publish(tmp.Join("p").c_str(), 1, 1, -1, nullptr, 0, nullptr, nullptr,
                                   "[]", nullptr, 0),
                GRIST_INVALID_ARGUMENT, "n is -1");
  EXPECT_FALSE(std::filesystem::exists(tmp.Join("p/manifest.json")));
}

TEST(CapiTest, CheckpointPublishRefusesAMissingRankOrBadIndex) {
  TempDir tmp;
  grist_ckpt_writer* w = NewWriter();
  ASSERT_NE(w, nullptr);
  Saved s;
  Save(w, s, tmp.Join("ckpt/step-00000042"), false);
  grist_ckpt_writer_free(w);
  const char* out = nullptr;
  ASSERT_EQ(grist_ckpt_read_manifest(s.dir.c_str(), &out), 0);
  const std::string manifest = out;
  const size_t f0 = manifest.find("\"files\"");
  const size_t rb = manifest.find('{', f0), re = manifest.find('}', rb);
  const std::string record = manifest.substr(rb, re - rb + 1);
  const char* records[] = {record.c_str()};
  // world_size 2 with only rank 0's file.
  const std::string two = tmp.Join("ckpt/step-00000050");
  ASSERT_EQ(grist_ckpt_prepare_dir(two.c_str()), 0);
  EXPECT_NE(grist_ckpt_publish(two.c_str(), 50, 2, 1, records, 0, nullptr, nullptr, "[]", nullptr, 0),
            0);
  // An index naming bytes outside the file.
  const std::string index =
      "[{\"name\":\"x\",\"dtype\":\"F32\",\"shape\":[1000000],\"shards\":[{\"rank\":0,"
      "\"offsets\":[0],\"lengths\":[1000000],\"begin\":0,\"end\":4000000}]}]";
  EXPECT_STATUS(grist_ckpt_publish(two.c_str(), 50, 1, 1, records, 0, nullptr, nullptr,
                                   index.c_str(), nullptr, 0),
                GRIST_DATA_LOSS, "");
  EXPECT_STATUS(grist_ckpt_publish(two.c_str(), 50, 1, 1, records, 0, nullptr, nullptr, "[]",
                                   "{not json", 0),
                GRIST_INVALID_ARGUMENT, "structure is not valid JSON");
  EXPECT_FALSE(std::filesystem::exists(two + "/manifest.json"));
  ASSERT_EQ(grist_ckpt_latest(tmp.Join("ckpt").c_str(), 0, &out), 0);
  EXPECT_EQ(std::string(out), s.dir);
}

}  // namespace
