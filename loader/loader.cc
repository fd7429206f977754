#include "loader/loader.h"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/check.h"
#include "common/status_macros.h"
#include "common/thread_pool.h"
#include "common/env.h"
#include "loader/internal/batch_fill.h"
#include "loader/internal/batch_pool.h"
#include "loader/internal/cuda.h"
#include "loader/release_source.h"

namespace grist::loader {

using internal::CheckSegments;
using internal::FillRow;
using internal::RowOut;

const char* FieldName(uint32_t field) {
  switch (field) {
    case kInputIds: return "input_ids";
    case kLabels: return "labels";
    case kPositionIds: return "position_ids";
    case kCuSeqlens: return "cu_seqlens";
    case kLossMask: return "loss_mask";
    case kSampleIndex: return "sample_index";
    case kReleaseIndex: return "release_index";
    default: return nullptr;
  }
}

absl::StatusOr<uint32_t> ParseFields(const std::string& names) {
  uint32_t out = 0;
  for (absl::string_view part : absl::StrSplit(names, ',', absl::SkipWhitespace())) {
    std::string name(part);
    name.erase(0, name.find_first_not_of(' '));
    name.erase(name.find_last_not_of(' ') + 1);
    if (name == "all") {
      out |= kAllFields;
      continue;
    }
    uint32_t bit = 0;
    for (uint32_t f : kFieldOrder) {
      if (name == FieldName(f)) bit = f;
    }
    if (!bit) {
      return absl::InvalidArgumentError(absl::StrCat(
          "unknown batch field \"", name,
          "\" (known: input_ids, labels, position_ids, cu_seqlens, loss_mask, sample_index, "
          "release_index, all)"));
    }
    out |= bit;
  }
  if (!out) return absl::InvalidArgumentError("no batch fields selected");
  return out;
}

Batch::~Batch() {
  if (pool_ && slot_ >= 0) pool_->Release(slot_, consumer_stream_, waited_);
}

const TensorInfo* Batch::tensor(const char* name) const {
  for (const TensorInfo& t : tensors_) {
    if (std::strcmp(t.name, name) == 0) return &t;
  }
  return nullptr;
}

const void* Batch::host_data(const TensorInfo& t) const {
  if (!on_cuda_) return t.data;
  const Pool::Slot* s = pool_->slot(slot_);
  return s->host + (static_cast<const char*>(t.data) - s->dev);
}

absl::Status Batch::WaitOn(uintptr_t stream) const {
  if (!on_cuda_) return absl::OkStatus();
  Pool::Slot* s = pool_->slot(slot_);
  cuda::ScopedDevice on(cuda_device_);
  RETURN_IF_ERROR(cuda::StreamWaitEvent(reinterpret_cast<void*>(stream), s->copy_event));
  consumer_stream_ = stream;
  waited_ = true;
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------------------------
// Loader.

struct Loader::Shared {
  std::mutex mu;
  std::condition_variable work_cv;   // workers: a batch may be issued (or stop)
  std::condition_variable ready_cv;  // consumer: a batch became ready
  bool stop ABSL_GUARDED_BY(mu) = false;
  uint64_t generation ABSL_GUARDED_BY(mu) = 0;
  Position base ABSL_GUARDED_BY(mu);
  int64_t issued ABSL_GUARDED_BY(mu) = 0;
  int64_t returned ABSL_GUARDED_BY(mu) = 0;
  int64_t total ABSL_GUARDED_BY(mu) = 0;
  std::map<int64_t, absl::StatusOr<std::shared_ptr<const Batch>>> ready ABSL_GUARDED_BY(mu);
  absl::Status sticky ABSL_GUARDED_BY(mu);
};

namespace {

// The position `n` micro batches after `base`.
Position PositionAfter(const Schedule& sch, const Position& base, int64_t n) {
  const int64_t a = sch.micro_batches_per_step();
  const int64_t micro = base.micro_index + n;
  Position p;
  p.consumed_samples =
      base.consumed_samples +
      static_cast<uint64_t>(micro / a) * static_cast<uint64_t>(sch.options().global_batch_size);
  p.micro_index = micro % a;
  return p;
}

}  // namespace

class BatchFactory {
 public:
  static absl::StatusOr<std::shared_ptr<const Batch>> Produce(
      const std::vector<std::shared_ptr<const SampleSource>>& sources, const Schedule& sch,
                                                              const std::shared_ptr<Pool>& pool,
                                                              const Position& pos);
};

absl::StatusOr<std::shared_ptr<const Batch>> BatchFactory::Produce(
    const std::vector<std::shared_ptr<const SampleSource>>& sources, const Schedule& sch,
                                                                   const std::shared_ptr<Pool>& pool,
                                                                   const Position& pos) {
  ASSIGN_OR_RETURN(int slot_index, pool->Acquire());
  std::shared_ptr<Batch> batch(new Batch());
  batch->pool_ = pool;
  batch->slot_ = slot_index;
  batch->position_ = pos;
  Pool::Slot* slot = pool->slot(slot_index);
  if (pool->cuda() && slot->copy_pending) {
    // The pinned buffer is still the source of the previous copy until its event completes.
    RETURN_IF_ERROR(cuda::EventSynchronize(slot->copy_event));
    slot->copy_pending = false;
  }
  const Layout& layout = pool->layout();
  char* host = slot->host;
  void* field_ptr[64] = {};
  const Layout::Entry* cu_entry = nullptr;
  bool ids32 = false;
  for (const Layout::Entry& e : layout.entries) {
    field_ptr[__builtin_ctz(e.field)] = host + e.offset;
    if (e.field == kCuSeqlens) cu_entry = &e;
    if (e.field == kInputIds || e.field == kLabels || e.field == kPositionIds) {
      ids32 = e.dtype == DType::kInt32;
    }
  }
  auto ptr = [&](uint32_t f) { return field_ptr[__builtin_ctz(f)]; };
  const int64_t m = layout.rows, s = layout.seq_len;
  int32_t* cu = static_cast<int32_t*>(ptr(kCuSeqlens));
  int64_t cu_count = 0;
  if (cu) cu[cu_count++] = 0;
  const size_t id_size = ids32 ? 4 : 8;
  for (int64_t r = 0; r < m; ++r) {
    const Draw draw = sch.DrawAt(sch.StreamPosition(pos, r));
    const uint64_t index = draw.index;
    const SampleSource& src = *sources[draw.component];
    SampleView view;
    RETURN_IF_ERROR(src.GetSample(index, &view));
    RETURN_IF_ERROR(CheckSegments(src, index, view, src.sample_tokens()));
    RowOut out;
    const size_t row_off = static_cast<size_t>(r * s) * id_size;
    if (ptr(kInputIds)) out.input = static_cast<char*>(ptr(kInputIds)) + row_off;
    if (ptr(kLabels)) out.labels = static_cast<char*>(ptr(kLabels)) + row_off;
    if (ptr(kPositionIds)) out.positions = static_cast<char*>(ptr(kPositionIds)) + row_off;
    if (ptr(kLossMask)) out.loss_mask = static_cast<float*>(ptr(kLossMask)) + r * s;
    if (cu) {
      out.cu = cu + cu_count;
      out.cu_base = r * s;
    }
    if (ids32) {
      FillRow<int32_t>(src, view, s, &out);
    } else {
      FillRow<int64_t>(src, view, s, &out);
    }
    cu_count += out.cu_count;
    if (ptr(kSampleIndex)) static_cast<int64_t*>(ptr(kSampleIndex))[r] = static_cast<int64_t>(index);
    if (ptr(kReleaseIndex)) {
      static_cast<int64_t*>(ptr(kReleaseIndex))[r] = static_cast<int64_t>(draw.component);
    }
  }
  size_t used = layout.total;
  if (cu_entry) used = cu_entry->offset + static_cast<size_t>(cu_count) * 4;

  char* base = host;
  if (pool->cuda()) {
    base = slot->dev;
    void* stream = pool->stream();
    if (slot->free_pending) {
      RETURN_IF_ERROR(cuda::StreamWaitEvent(stream, slot->free_event));
      slot->free_pending = false;
    }
    RETURN_IF_ERROR(cuda::MemcpyHostToDeviceAsync(slot->dev, host, used, stream));
    RETURN_IF_ERROR(cuda::EventRecord(slot->copy_event, stream));
    slot->copy_pending = true;
    batch->on_cuda_ = true;
    batch->cuda_device_ = pool->device();
  }
  for (const Layout::Entry& e : layout.entries) {
    TensorInfo t{FieldName(e.field), e.dtype, e.ndim, {e.shape[0], e.shape[1]}, base + e.offset,
                 e.bytes};
    if (e.field == kCuSeqlens) {
      t.shape[0] = cu_count;
      t.bytes = static_cast<size_t>(cu_count) * 4;
    }
    batch->tensors_.push_back(t);
  }
  return std::shared_ptr<const Batch>(std::move(batch));
}

Loader::Loader(std::vector<std::shared_ptr<const SampleSource>> sources, Schedule schedule,
               LoaderOptions options)
    : sources_(std::move(sources)),
      schedule_(std::move(schedule)),
      options_(std::move(options)),
      shared_(std::make_unique<Shared>()) {}

Loader::~Loader() {
  StopWorkers();
  std::map<int64_t, absl::StatusOr<std::shared_ptr<const Batch>>> drop;
  std::lock_guard<std::mutex> l(shared_->mu);
  drop.swap(shared_->ready);
}

absl::StatusOr<std::unique_ptr<Loader>> Loader::Open(const LoaderOptions& options) {
  if (options.blend.size() >= 2) {
    std::vector<std::shared_ptr<const SampleSource>> sources;
    std::vector<double> weights;
    uint64_t seed = 0;
    for (size_t k = 0; k < options.blend.size(); ++k) {
      ASSIGN_OR_RETURN(OpenedSplit split,
                       OpenReleaseSplit(Env::Default(), options.blend[k].path, options.split,
                                        options.verify_checksums));
      if (k == 0) seed = split.release_seed;
      sources.push_back(std::move(split.source));
      weights.push_back(options.blend[k].weight);
    }
    return CreateBlend(std::move(sources), std::move(weights), seed, options);
  }
  const std::string& path = options.blend.size() == 1 ? options.blend[0].path : options.path;
  ASSIGN_OR_RETURN(OpenedSplit split, OpenReleaseSplit(Env::Default(), path, options.split,
                                                       options.verify_checksums));
  return Create(std::move(split.source), split.release_seed, options);
}

absl::StatusOr<std::unique_ptr<Loader>> Loader::Create(std::shared_ptr<const SampleSource> source,
                                                       uint64_t default_seed,
                                                       const LoaderOptions& options) {
  if (!source) return absl::InvalidArgumentError("loader: no sample source");
  return CreateBlend({std::move(source)}, {1.0}, default_seed, options);
}

absl::StatusOr<std::unique_ptr<Loader>> Loader::CreateBlend(
    std::vector<std::shared_ptr<const SampleSource>> sources, std::vector<double> weights,
    uint64_t default_seed, const LoaderOptions& options) {
  if (sources.empty()) return absl::InvalidArgumentError("loader: no sample source");
  if (weights.size() != sources.size()) {
    return absl::InvalidArgumentError(absl::StrCat("loader: ", sources.size(), " sources but ",
                                                   weights.size(), " weights"));
  }
  for (const auto& src : sources) {
    if (!src) return absl::InvalidArgumentError("loader: no sample source");
  }
  const SampleSource& first = *sources[0];
  for (size_t k = 1; k < sources.size(); ++k) {
    const SampleSource& other = *sources[k];
    if (other.sample_tokens() != first.sample_tokens()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "blend: release ", first.Location(), " has seq_len ", first.sample_tokens() - 1,
          " but release ", other.Location(), " has seq_len ", other.sample_tokens() - 1));
    }
    if (other.token_dtype() != first.token_dtype()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "blend: releases ", first.Location(), " and ", other.Location(),
          " store tokens as different dtypes (uint16 / int32): not the same tokenizer"));
    }
    if (other.TokenizerId() != first.TokenizerId()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "blend: release ", first.Location(), " has tokenizer ", first.TokenizerId(),
          " but release ", other.Location(), " has tokenizer ", other.TokenizerId()));
    }
  }
  const std::shared_ptr<const SampleSource>& source = sources[0];
  ScheduleOptions so;
  so.num_samples = source->num_samples();
  if (sources.size() >= 2) {
    for (size_t k = 0; k < sources.size(); ++k) {
      so.blend.push_back(BlendComponent{sources[k]->num_samples(), weights[k]});
    }
  }
  so.micro_batch_size = options.micro_batch_size;
  so.global_batch_size = options.global_batch_size;
  so.dp_rank = options.dp_rank;
  so.dp_size = options.dp_size;
  so.seed = options.has_seed ? options.seed : default_seed;
  so.epochs = options.epochs;
  ASSIGN_OR_RETURN(Schedule sch, Schedule::Create(so));
  if (options.prefetch < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("prefetch must be at least 1, got ", options.prefetch));
  }
  if (options.num_workers < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_workers must be >= 0, got ", options.num_workers));
  }
  if (source->sample_tokens() < 2) {
    return absl::InvalidArgumentError("loader: samples must hold at least 2 tokens");
  }
  const uint64_t cells = static_cast<uint64_t>(options.micro_batch_size) * (source->sample_tokens() - 1);
  if (cells >= (uint64_t{1} << 31)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "micro_batch_size * seq_len = ", cells, " does not fit cu_seqlens' int32"));
  }
  if ((options.fields & ~static_cast<uint32_t>(kValidFields)) || !(options.fields & kValidFields)) {
    return absl::InvalidArgumentError("loader: invalid field selection");
  }
  if ((options.fields & kReleaseIndex) && sources.size() < 2) {
    return absl::InvalidArgumentError("loader: release_index exists only for a blend of releases");
  }
  std::unique_ptr<Loader> loader(new Loader(std::move(sources), std::move(sch), options));
  RETURN_IF_ERROR(loader->Start());
  return loader;
}

absl::Status Loader::Start() {
  bool use_cuda = false;
  if (options_.device == Device::kCuda) {
    absl::Status s = cuda::CheckDevice(options_.cuda_device);
    if (s.ok()) {
      use_cuda = true;
    } else if (options_.cuda_fallback) {
      device_note_ = absl::StrCat("device cuda requested, using CPU: ", std::string(s.message()));
    } else {
      return s;
    }
  }
  Layout layout = Layout::Make(options_.micro_batch_size, source().sample_tokens() - 1,
                               options_.fields, options_.int32_ids);
  pool_ = std::make_shared<Pool>(std::move(layout), use_cuda, options_.cuda_device);
  RETURN_IF_ERROR(pool_->Init());
  {
    std::lock_guard<std::mutex> l(shared_->mu);
    shared_->total = schedule_.RemainingBatches(shared_->base);
  }
  StartWorkers();
  return absl::OkStatus();
}

void Loader::StartWorkers() {
  int n = options_.num_workers > 0 ? options_.num_workers : std::min(4, NumCpus());
  for (int i = 0; i < n; ++i) workers_.emplace_back([this] { WorkerLoop(); });
}

void Loader::StopWorkers() {
  {
    std::lock_guard<std::mutex> l(shared_->mu);
    shared_->stop = true;
  }
  shared_->work_cv.notify_all();
  for (std::thread& t : workers_) t.join();
  workers_.clear();
  std::lock_guard<std::mutex> l(shared_->mu);
  shared_->stop = false;
}

void Loader::WorkerLoop() {
  if (pool_->cuda()) (void)cuda::SetDevice(pool_->device());
  Shared& sh = *shared_;
  while (true) {
    int64_t seq;
    uint64_t gen;
    Position pos;
    {
      std::unique_lock<std::mutex> l(sh.mu);
      while (!sh.stop && !(sh.issued < sh.returned + options_.prefetch && sh.issued < sh.total)) {
        sh.work_cv.wait(l);
      }
      if (sh.stop) return;
      seq = sh.issued++;
      gen = sh.generation;
      pos = PositionAfter(schedule_, sh.base, seq);
    }
    absl::StatusOr<std::shared_ptr<const Batch>> result = BatchFactory::Produce(sources_, schedule_, pool_, pos);
    std::unique_lock<std::mutex> l(sh.mu);
    if (gen == sh.generation && !sh.stop) {
      const bool wanted = seq == sh.returned;
      sh.ready.emplace(seq, std::move(result));
      l.unlock();
      if (wanted) sh.ready_cv.notify_one();
    } else {
      l.unlock();
      result = absl::CancelledError("discarded");  // releases the batch outside the lock
    }
  }
}

absl::StatusOr<std::shared_ptr<const Batch>> Loader::Next() {
  Shared& sh = *shared_;
  std::unique_lock<std::mutex> l(sh.mu);
  if (!sh.sticky.ok()) return sh.sticky;
  if (sh.returned >= sh.total) {
    return absl::OutOfRangeError(absl::StrCat("end of data: ", size(), " micro batches per rank (",
                                              options_.epochs, " epochs) delivered"));
  }
  while (sh.ready.find(sh.returned) == sh.ready.end()) sh.ready_cv.wait(l);
  auto it = sh.ready.find(sh.returned);
  absl::StatusOr<std::shared_ptr<const Batch>> result = std::move(it->second);
  sh.ready.erase(it);
  if (!result.ok()) {
    sh.sticky = result.status();
    return result;
  }
  ++sh.returned;
  l.unlock();
  sh.work_cv.notify_one();
  return result;
}

std::string Loader::release_id() const {
  if (sources_.size() == 1) return sources_[0]->release_id();
  std::string id = "blend:";
  for (size_t k = 0; k < sources_.size(); ++k) {
    absl::StrAppend(&id, k ? "+" : "", sources_[k]->release_id());
  }
  return id;
}

std::vector<ComponentState> Loader::Components() const {
  std::vector<ComponentState> out;
  const auto& blend = schedule_.options().blend;
  for (size_t k = 0; k < sources_.size(); ++k) {
    ComponentState c;
    c.release_id = sources_[k]->release_id();
    c.split = sources_[k]->split();
    c.weight = k < blend.size() ? blend[k].weight : 1.0;
    c.num_samples = sources_[k]->num_samples();
    out.push_back(std::move(c));
  }
  return out;
}

LoaderState Loader::state() const {
  LoaderState s;
  s.release_id = release_id();
  s.split = source().split();
  s.seed = schedule_.options().seed;
  s.global_batch_size = options_.global_batch_size;
  s.micro_batch_size = options_.micro_batch_size;
  s.dp_size = options_.dp_size;
  for (const auto& src : sources_) s.num_samples += src->num_samples();
  {
    std::lock_guard<std::mutex> l(shared_->mu);
    s.position = PositionAfter(schedule_, shared_->base, shared_->returned);
  }
  if (schedule_.is_blend()) {
    s.blend = Components();
    const std::vector<uint64_t> c = schedule_.ConsumedAt(s.position.consumed_samples);
    for (size_t k = 0; k < c.size(); ++k) s.blend[k].consumed = c[k];
  }
  return s;
}

void Loader::Restart(Schedule schedule, const Position& pos) {
  StopWorkers();
  std::map<int64_t, absl::StatusOr<std::shared_ptr<const Batch>>> drop;
  {
    std::lock_guard<std::mutex> l(shared_->mu);
    schedule_ = std::move(schedule);
    ++shared_->generation;
    shared_->base = pos;
    shared_->issued = 0;
    shared_->returned = 0;
    shared_->total = schedule_.RemainingBatches(pos);
    shared_->sticky = absl::OkStatus();
    drop.swap(shared_->ready);
  }
  drop.clear();  // releases the discarded batches outside the lock
  StartWorkers();
}

absl::Status Loader::LoadState(const LoaderState& state) {
  ASSIGN_OR_RETURN(ResumePoint rp,
                   CheckBlendResume(state, Components(), schedule_, options_.elastic));
  ASSIGN_OR_RETURN(Schedule sch, schedule_.WithSegment(std::move(rp.segment)));
  Restart(std::move(sch), rp.position);
  return absl::OkStatus();
}

absl::Status Loader::SetWeights(const std::vector<double>& weights) {
  if (!schedule_.is_blend()) {
    return absl::FailedPreconditionError("loader: set_weights needs a blend of releases");
  }
  if (weights.size() != sources_.size()) {
    return absl::InvalidArgumentError(absl::StrCat("loader: ", weights.size(),
                                                   " weights for a blend of ", sources_.size()));
  }
  const LoaderState s = state();
  if (s.position.micro_index != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "loader: blend weights change only at a step boundary; the next batch is micro batch ",
        s.position.micro_index, " of its step"));
  }
  ScheduleOptions so = schedule_.options();
  for (size_t k = 0; k < weights.size(); ++k) so.blend[k].weight = weights[k];
  ASSIGN_OR_RETURN(Schedule fresh, Schedule::Create(so));
  Segment seg;
  seg.start = s.position.consumed_samples;
  for (const ComponentState& c : s.blend) seg.consumed.push_back(c.consumed);
  ASSIGN_OR_RETURN(Schedule sch, fresh.WithSegment(std::move(seg)));
  Restart(std::move(sch), s.position);
  return absl::OkStatus();
}

int64_t Loader::size() const { return schedule_.RemainingBatches(Position{}); }

int64_t Loader::remaining() const {
  std::lock_guard<std::mutex> l(shared_->mu);
  return shared_->total - shared_->returned;
}

bool Loader::on_cuda() const { return pool_->cuda(); }

size_t Loader::batch_bytes() const {
  size_t n = 0;
  for (const auto& e : pool_->layout().entries) n += e.bytes;
  return n;
}

}  // namespace grist::loader
