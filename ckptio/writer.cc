#include "ckptio/writer.h"

#include <fcntl.h>
#include <sched.h>
#include <liburing.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <optional>
#include <string_view>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "ckptio/checkpoint_format.h"
#include "ckptio/internal/copy_pool.h"
#include "ckptio/internal/crash_points.h"
#include "ckptio/internal/io_util.h"
#include "ckptio/internal/ring.h"
#include "common/check.h"
#include "common/crash_point.h"
#include "common/status_macros.h"
#include "common/sysinfo.h"

#if GRIST_CKPTIO_CUDA
#include <cuda_runtime_api.h>
#endif

namespace grist::ckptio {
namespace {

using internal::RoundDown;
using internal::RoundUp;

constexpr uint64_t kRegChunk = 1ull << 30;  // io_uring limits one registered buffer to 1 GiB

struct Job;

struct DataSource {
  uint64_t off = 0;  // in the data region
  uint64_t len = 0;
  const char* ptr = nullptr;
};

struct InPlaceExtent {
  uint64_t begin = 0;  // file offsets
  uint64_t end = 0;
  const char* src = nullptr;  // the bytes of `begin`
};

// The state shared by a PendingFile handle and the I/O thread.
struct FileState {
  FileLayout layout;  // written before the job is queued, then read-only
  // std::mutex rather than absl::Mutex: Debian's Abseil is not built with ThreadSanitizer, which
  // then cannot see absl::Mutex's synchronization; pthread-based locks it intercepts.
  std::mutex mu;
  std::condition_variable cv;  // ready, abort or done changed
  uint64_t ready ABSL_GUARDED_BY(mu) = 0;
  absl::Status abort ABSL_GUARDED_BY(mu);
  bool done ABSL_GUARDED_BY(mu) = false;
  absl::StatusOr<FileResult> result ABSL_GUARDED_BY(mu) = absl::UnknownError("not finished");
  std::atomic<bool> done_flag{false};
};

struct Job {
  std::shared_ptr<FileState> state;
  std::string path;
  int fd = -1;
  bool direct = false;
  uint64_t align = 4096;
  char* arena = nullptr;  // file image: header at 0, data at layout.data_start
  uint64_t mem_align = 1;  // O_DIRECT memory alignment (1: buffered)
  Stopwatch clock;
  std::vector<std::string> notes;
  std::vector<uint64_t> block_hashes;
  uint64_t header_hash = 0;
  // Where the data region's bytes are read from for hashing and for the Env path: sorted,
  // contiguous (data-region offset, length, pointer). Empty: the arena.
  std::vector<DataSource> sources;
  // File ranges written from the caller's memory (SaveInPlace): sorted, disjoint, aligned.
  std::vector<InPlaceExtent> in_place;
  uint64_t in_place_bytes = 0;
  uint64_t staging_fresh_bytes = 0;  // FileResult::staging_fresh_bytes
};

// XXH3-64 of data-region bytes [b, e), read from `sources` (or `arena_data` when empty); `cursor`
// remembers the source of the previous call (calls go in increasing order).
uint64_t HashDataRange(const std::vector<DataSource>& sources, const char* arena_data, uint64_t b,
                       uint64_t e, size_t* cursor) {
  if (sources.empty()) return Hash64(arena_data + b, e - b);
  size_t i = *cursor;
  while (i + 1 < sources.size() && sources[i].off + sources[i].len <= b) ++i;
  *cursor = i;
  const DataSource& first = sources[i];
  if (first.off <= b && e <= first.off + first.len) return Hash64(first.ptr + (b - first.off), e - b);
  Hasher64 h;
  for (size_t k = i; k < sources.size() && sources[k].off < e; ++k) {
    const DataSource& s = sources[k];
    const uint64_t lo = std::max(b, s.off);
    const uint64_t hi = std::min(e, s.off + s.len);
    if (hi > lo) h.Update(s.ptr + (lo - s.off), hi - lo);
  }
  return h.Digest();
}

// GRIST_CKPT_TRACE: each save prints where its time goes (the caller's copy in Save(), the I/O
// thread's phases in RunUring()) to stderr.
bool TraceEnabled() {
  static const bool trace = std::getenv("GRIST_CKPT_TRACE") != nullptr;
  return trace;
}

int LocalRanks() {
  if (const char* v = std::getenv("LOCAL_WORLD_SIZE"); v != nullptr && std::atoi(v) > 0) return std::atoi(v);
  return 1;
}

}  // namespace

bool CudaAvailable() {
#if GRIST_CKPTIO_CUDA
  static const bool available = [] {
    int n = 0;
    return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
  }();
  return available;
#else
  return false;
#endif
}

int DefaultCopyThreads() {
  // CPUs this process may run on (a Slurm or cgroup CPU set narrows it), shared by the ranks of
  // this node (torchrun's LOCAL_WORLD_SIZE), at most 16.
  cpu_set_t set;
  int cpus = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set)
                                                          : static_cast<int>(std::thread::hardware_concurrency());
  return std::clamp(cpus / LocalRanks(), 1, 16);
}

namespace {

// "123", "512M", "4G", "1.5T" (binary multiples); nullopt when malformed.
std::optional<uint64_t> ParseByteCount(std::string_view s) {
  if (s.empty()) return std::nullopt;
  double mult = 1;
  switch (s.back()) {
    case 'K': case 'k': mult = 0x1p10; break;
    case 'M': case 'm': mult = 0x1p20; break;
    case 'G': case 'g': mult = 0x1p30; break;
    case 'T': case 't': mult = 0x1p40; break;
    default: break;
  }
  if (mult != 1) s.remove_suffix(1);
  if (s.empty() || s.size() > 30) return std::nullopt;
  std::string digits(s);
  char* end = nullptr;
  const double v = std::strtod(digits.c_str(), &end);
  if (end != digits.c_str() + digits.size() || !(v >= 0) || v * mult > 0x1p63) return std::nullopt;
  return static_cast<uint64_t>(v * mult);
}

}  // namespace

uint64_t DefaultPrepareLimit() {
  if (const char* v = std::getenv("GRIST_CKPT_PREPARE_MAX"); v != nullptr) {
    if (auto n = ParseByteCount(v); n.has_value()) return *n;
    std::fprintf(stderr, "grist: ignoring GRIST_CKPT_PREPARE_MAX=%s (use bytes, e.g. 8G)\n", v);
  }
  return TotalMemoryBytes() / 2 / static_cast<uint64_t>(LocalRanks());
}

uint64_t StagingBytesFor(const StagingEstimate& e, uint64_t checksum_block) {
  // The header's JSON: a fixed part (format, version, hashes), per tensor its entry (the name,
  // dtype, a shape and two offsets of at most 20 digits each), per checksum block 19 characters,
  // and the text (names and metadata values), counted twice for JSON escaping.
  const uint64_t blocks = checksum_block == 0 ? 0 : e.data_bytes / checksum_block + 1;
  const uint64_t header = 8 + 4096 + e.tensors * 384 + blocks * 20 + 2 * e.text_bytes;
  return RoundUp(RoundUp(header, kDataAlign) + e.data_bytes, kDataAlign);
}

namespace {

// Chunk handed to one copy thread at a time: small enough that every thread gets several (the
// ready prefix advances smoothly), large enough that the per-chunk bookkeeping is noise.
uint64_t CopyChunk(uint64_t total, int threads) {
  return std::clamp<uint64_t>(RoundUp(total / (static_cast<uint64_t>(threads) * 4) + 1, 1ull << 16),
                              1ull << 20, 8ull << 20);
}

}  // namespace

void CopyBytes(void* dst, const void* src, size_t n, int threads) {
  constexpr size_t kMinPerThread = 32ull << 20;
  if (threads <= 1 || n < 2 * kMinPerThread) {
    std::memcpy(dst, src, n);
    return;
  }
  size_t parts = std::min<size_t>(static_cast<size_t>(threads), n / kMinPerThread);
  size_t per = RoundUp(n / parts, 4096);
  std::vector<std::thread> pool;
  for (size_t p = 1; p < parts; ++p) {
    size_t b = p * per;
    if (b >= n) break;
    size_t e = std::min(n, b + per);
    pool.emplace_back([=] {
      std::memcpy(static_cast<char*>(dst) + b, static_cast<const char*>(src) + b, e - b);
    });
  }
  std::memcpy(dst, src, std::min(n, per));
  for (auto& t : pool) t.join();
}

namespace {

class PendingFileImpl : public PendingFile {
 public:
  PendingFileImpl(std::shared_ptr<FileState> state, const FileLayout* layout, char* data,
                  internal::CopyPool* pool)
      : state_(std::move(state)), layout_(layout), data_(data), pool_(pool) {}  // layout_: in state_
  ~PendingFileImpl() override {
    if (!state_->done_flag.load()) {
      Abort(absl::CancelledError("checkpoint file abandoned before it was committed"));
      (void)Wait();
    }
  }
  const FileLayout& layout() const override { return *layout_; }
  char* data() override { return data_; }
  void MarkReady(uint64_t upto) override {
    {
      std::lock_guard<std::mutex> l(state_->mu);
      state_->ready = std::max(state_->ready, std::min(upto, layout_->data_len));
    }
    state_->cv.notify_all();
  }
  void CopyIn(const std::vector<HostSpan>& spans, bool mark_ready) override {
    std::vector<internal::CopyPiece> pieces;
    pieces.reserve(spans.size());
    uint64_t total = 0;
    for (const HostSpan& s : spans) {
      pieces.push_back({data_ + s.offset, static_cast<const char*>(s.src), s.len, s.offset + s.len});
      total += s.len;
    }
    std::function<void(uint64_t)> progress;
    if (mark_ready) progress = [this](uint64_t upto) { MarkReady(upto); };
    pool_->Copy(pieces, CopyChunk(total, pool_->threads()), progress);
  }
  void Abort(absl::Status why) override {
    {
      std::lock_guard<std::mutex> l(state_->mu);
      if (state_->abort.ok()) state_->abort = std::move(why);
    }
    state_->cv.notify_all();
  }
  absl::StatusOr<FileResult> Wait() override {
    std::unique_lock<std::mutex> l(state_->mu);
    state_->cv.wait(l, [this] { return state_->done; });
    return state_->result;
  }
  bool Done() const override { return state_->done_flag.load(); }

 private:
  std::shared_ptr<FileState> state_;
  const FileLayout* layout_;  // state_->layout
  char* data_;
  internal::CopyPool* pool_;  // the writer's
};

class FileWriterImpl : public FileWriter {
 public:
  explicit FileWriterImpl(const WriterOptions& o) : options_(o) {
    if (options_.env == nullptr) options_.env = Env::Default();
    uring_path_ = options_.env == Env::Default();
    overlap_ = options_.overlap != Overlap::kOff;
    pool_ = std::make_unique<internal::CopyPool>(
        options_.copy_threads > 0 ? options_.copy_threads : DefaultCopyThreads());
    prepare_limit_ = options_.prepare_limit >= 0 ? static_cast<uint64_t>(options_.prepare_limit)
                                                 : DefaultPrepareLimit();
    thread_ = std::thread([this] { IoThread(); });
  }
  ~FileWriterImpl() override {
    std::shared_ptr<FileState> current;
    {
      std::lock_guard<std::mutex> l(mu_);
      stop_ = true;
      current = current_;
    }
    cv_.notify_all();
    if (current) {
      {
        std::lock_guard<std::mutex> l(current->mu);
        if (current->abort.ok() && !current->done) {
          current->abort = absl::CancelledError("checkpoint writer destroyed before the file was committed");
        }
      }
      current->cv.notify_all();
    }
    thread_.join();
    FreeArena();
  }

  absl::StatusOr<std::unique_ptr<PendingFile>> Begin(const std::string& path,
                                                      const std::vector<TensorSpec>& specs,
                                                      Metadata metadata) override;
  absl::StatusOr<std::unique_ptr<PendingFile>> SaveInPlace(const std::string& path,
                                                            const std::vector<HostTensor>& tensors,
                                                            Metadata metadata) override;
  absl::StatusOr<uint64_t> PrepareStaging(const StagingEstimate& estimate) override;
  void WaitStaging() override;
  uint64_t prepare_limit() const override { return prepare_limit_; }
  int copy_threads() const override { return pool_->threads(); }
  uint64_t arena_bytes() const override { return arena_bytes_.load(); }
  uint64_t arena_allocations() const override { return arena_allocations_.load(); }
  const WriterOptions& options() const override { return options_; }

 private:
  // Begin() up to the point where the job is queued: waits for the previous file, opens the file,
  // plans the layout, sizes the arena.
  // `staged`: the whole image will be written through the arena (Begin, Save), so afterwards it is
  // resident; an in-place save touches only parts of it.
  absl::StatusOr<std::unique_ptr<Job>> Prepare(const std::string& path,
                                               const std::vector<TensorSpec>& specs,
                                               Metadata metadata, bool staged);
  std::unique_ptr<PendingFile> Enqueue(std::unique_ptr<Job> job);
  void IoThread();
  absl::Status RunJob(Job* job);
  absl::Status RunUring(Job* job);
  absl::Status RunEnv(Job* job);
  void SetupRing();
  void RegisterArena();
  // The arena size to allocate for an image of `bytes`: 2 MiB multiples, plus headroom (a later
  // file a little larger, e.g. by its header, still fits) as far as the prepare limit allows.
  uint64_t ArenaSizeFor(uint64_t bytes) const;
  absl::Status EnsureArena(uint64_t bytes);
  // The I/O thread's side of PrepareStaging: allocate, pre-fault, pin, register.
  void PrepareArena(uint64_t bytes, int cuda_device);
  void FreeArena();
  // Waits until the data region has `want` ready bytes (or the job is aborted); returns the ready
  // count. With `block` false returns at once.
  absl::StatusOr<uint64_t> Ready(Job* job, uint64_t want, bool block);

  WriterOptions options_;
  bool uring_path_ = true;
  bool overlap_ = true;

  std::mutex mu_;
  std::condition_variable cv_;  // queue_ or stop_ changed
  std::deque<std::unique_ptr<Job>> queue_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<FileState> current_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  // PrepareStaging(): arena bytes requested (0: none) and the CUDA device to pin on; `preparing_`
  // while a request is queued or running. Begin() waits until it is false.
  uint64_t prepare_request_ ABSL_GUARDED_BY(mu_) = 0;
  int prepare_device_ ABSL_GUARDED_BY(mu_) = -1;
  bool preparing_ ABSL_GUARDED_BY(mu_) = false;
  std::condition_variable prepared_cv_;  // preparing_ became false
  uint64_t prepare_limit_ = 0;
  std::unique_ptr<internal::CopyPool> pool_;
  std::thread thread_;

  // Arena: touched by Begin() only while no job or preparation runs, by the I/O thread only inside
  // a job or a preparation.
  char* arena_ = nullptr;
  uint64_t arena_size_ = 0;
  std::atomic<uint64_t> arena_bytes_{0};  // arena_size_, for arena_bytes() from any thread
  std::atomic<bool> arena_populated_{false};  // every page faulted in (PrepareArena)
  uint64_t arena_resident_ = 0;  // arena bytes [0, n) faulted in: populated, or written by a file
  uint64_t arena_generation_ = 0;
  std::atomic<uint64_t> arena_allocations_{0};
  bool cuda_pinned_ = false;

  // I/O thread only.
  bool ring_ok_ = false;
  struct io_uring ring_;
  unsigned ring_flags_ = 0;
  std::string ring_note_;
  uint64_t registered_generation_ = 0;
  bool registered_ = false;
  std::string register_note_;
  int writes_completed_ = 0;
};

uint64_t FileWriterImpl::ArenaSizeFor(uint64_t bytes) const {
  constexpr uint64_t kHuge = 2ull << 20;
  const uint64_t need = RoundUp(std::max<uint64_t>(bytes, 4096), kHuge);
  const uint64_t with_headroom = RoundUp(need + std::max<uint64_t>(4ull << 20, need / 32), kHuge);
  return std::max(need, std::min(with_headroom, RoundDown(prepare_limit_, kHuge)));
}

absl::Status FileWriterImpl::EnsureArena(uint64_t bytes) {
  if (RoundUp(std::max<uint64_t>(bytes, 4096), 2ull << 20) <= arena_size_) return absl::OkStatus();
  bytes = ArenaSizeFor(bytes);
  FreeArena();
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return ErrnoError(errno, absl::StrCat("allocating a ", bytes, "-byte staging arena"));
  (void)::madvise(p, bytes, MADV_HUGEPAGE);
  arena_ = static_cast<char*>(p);
  arena_size_ = bytes;
  arena_bytes_.store(bytes);
  arena_populated_.store(false);
  arena_resident_ = 0;
  ++arena_generation_;
  arena_allocations_.fetch_add(1);
#if GRIST_CKPTIO_CUDA
  if (options_.pin_for_cuda && CudaAvailable()) {
    cuda_pinned_ = cudaHostRegister(arena_, arena_size_, cudaHostRegisterPortable) == cudaSuccess;
  }
#endif
  return absl::OkStatus();
}

void FileWriterImpl::FreeArena() {
  if (arena_ == nullptr) return;
#if GRIST_CKPTIO_CUDA
  if (cuda_pinned_) cudaHostUnregister(arena_);
#endif
  cuda_pinned_ = false;
  ::munmap(arena_, arena_size_);
  arena_ = nullptr;
  arena_size_ = 0;
  arena_bytes_.store(0);
  arena_populated_.store(false);
  arena_resident_ = 0;
}

absl::StatusOr<uint64_t> FileWriterImpl::PrepareStaging(const StagingEstimate& estimate) {
  const uint64_t image = StagingBytesFor(estimate, options_.checksum_block);
  const uint64_t need = RoundUp(std::max<uint64_t>(image, 4096), 2ull << 20);
  if (need > prepare_limit_) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "preparing ", need, " bytes of checkpoint staging memory exceeds the prepare limit of ",
        prepare_limit_, " bytes (WriterOptions::prepare_limit, GRIST_CKPT_PREPARE_MAX)"));
  }
  int device = -1;
#if GRIST_CKPTIO_CUDA
  if (options_.pin_for_cuda && CudaAvailable() && cudaGetDevice(&device) != cudaSuccess) device = -1;
#endif
  std::unique_lock<std::mutex> l(mu_);
  // Begin() does not look at the arena while preparing_; the I/O thread serves the request once
  // the file in flight (if any) is done.
  prepared_cv_.wait(l, [this] { return !preparing_; });
  if ((current_ == nullptr || current_->done_flag.load()) && need <= arena_bytes_.load() &&
      arena_populated_.load()) {
    return arena_bytes_.load();
  }
  prepare_request_ = image;
  prepare_device_ = device;
  preparing_ = true;
  l.unlock();
  cv_.notify_all();
  return std::max(ArenaSizeFor(image), arena_bytes_.load());
}

void FileWriterImpl::WaitStaging() {
  std::unique_lock<std::mutex> l(mu_);
  prepared_cv_.wait(l, [this] { return !preparing_; });
}

void FileWriterImpl::PrepareArena(uint64_t bytes, int cuda_device) {
#if GRIST_CKPTIO_CUDA
  // Pin on the caller's device (the I/O thread's current device would be device 0).
  if (cuda_device >= 0) (void)cudaSetDevice(cuda_device);
#else
  (void)cuda_device;
#endif
  if (!EnsureArena(bytes).ok()) return;  // the next Begin() tries again and reports the error
  if (!arena_populated_.load()) {
    // Fault every page in now (MADV_POPULATE_WRITE, Linux 5.14; else one write per page), so the
    // caller's copy finds it resident.
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
    if (::madvise(arena_, arena_size_, MADV_POPULATE_WRITE) != 0) {
      const long page = ::sysconf(_SC_PAGESIZE) > 0 ? ::sysconf(_SC_PAGESIZE) : 4096;
      for (uint64_t off = 0; off < arena_size_; off += static_cast<uint64_t>(page)) {
        reinterpret_cast<volatile char*>(arena_)[off] = 0;
      }
    }
    arena_populated_.store(true);
    arena_resident_ = arena_size_;
  }
  RegisterArena();
}

absl::StatusOr<std::unique_ptr<PendingFile>> FileWriterImpl::Begin(
    const std::string& path, const std::vector<TensorSpec>& specs, Metadata metadata) {
  ASSIGN_OR_RETURN(std::unique_ptr<Job> job, Prepare(path, specs, std::move(metadata), /*staged=*/true));
  return Enqueue(std::move(job));
}

absl::StatusOr<std::unique_ptr<Job>> FileWriterImpl::Prepare(const std::string& path,
                                                             const std::vector<TensorSpec>& specs,
                                                             Metadata metadata, bool staged) {
  if (options_.queue_depth < 1 || options_.queue_depth > 4096) {
    return absl::InvalidArgumentError(absl::StrCat("queue depth ", options_.queue_depth, " not in [1, 4096]"));
  }
  if (options_.block_size < 4096 || options_.block_size % 4096 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("block size ", options_.block_size, " is not a positive multiple of 4096"));
  }
  std::shared_ptr<FileState> previous;
  {
    std::lock_guard<std::mutex> l(mu_);
    previous = current_;
  }
  if (previous) {  // the arena holds one file at a time
    std::unique_lock<std::mutex> l(previous->mu);
    previous->cv.wait(l, [&] { return previous->done; });
  }
  {  // a background preparation owns the arena until it is finished
    std::unique_lock<std::mutex> l(mu_);
    prepared_cv_.wait(l, [this] { return !preparing_; });
  }
  auto job = std::make_unique<Job>();
  job->state = std::make_shared<FileState>();
  job->path = path;
  uint64_t align = kDataAlign;
  if (uring_path_) {
    ASSIGN_OR_RETURN(internal::OpenedFile f,
                     internal::OpenForWrite(path, options_.mode == IoMode::kDirect));
    job->fd = f.fd;
    job->direct = f.direct;
    job->notes = std::move(f.notes);
    if (f.direct) {
      align = std::max<uint64_t>(align, f.dio_offset_align);
      job->mem_align = std::max<uint64_t>(1, f.dio_mem_align);
    }
  }
  job->align = align;
  auto layout = PlanFile(specs, std::move(metadata), options_.checksum_block, align);
  if (!layout.ok()) {
    if (job->fd >= 0) {
      ::close(job->fd);
      ::unlink(path.c_str());
    }
    return layout.status();
  }
  job->state->layout = std::move(*layout);
  const uint64_t image = RoundUp(job->state->layout.file_size, align);
  const uint64_t generation = arena_generation_;
  if (absl::Status s = EnsureArena(image); !s.ok()) {
    if (job->fd >= 0) {
      ::close(job->fd);
      ::unlink(path.c_str());
    }
    return s;
  }
  job->arena = arena_;
  if (!staged) {
    job->staging_fresh_bytes = image;
  } else {
    if (arena_generation_ == generation && image <= arena_resident_) {
      job->staging_fresh_bytes = 0;
    } else {
      job->staging_fresh_bytes = image - (arena_generation_ == generation ? arena_resident_ : 0);
    }
    arena_resident_ = std::max(arena_resident_, image);
  }
  std::memset(arena_ + job->state->layout.file_size, 0, image - job->state->layout.file_size);
  return job;
}

std::unique_ptr<PendingFile> FileWriterImpl::Enqueue(std::unique_ptr<Job> job) {
  auto handle = std::make_unique<PendingFileImpl>(job->state, &job->state->layout,
                                                  arena_ + job->state->layout.data_start, pool_.get());
  {
    std::lock_guard<std::mutex> l(mu_);
    current_ = job->state;
    queue_.push_back(std::move(job));
  }
  cv_.notify_all();
  return handle;
}

absl::StatusOr<std::unique_ptr<PendingFile>> FileWriterImpl::SaveInPlace(
    const std::string& path, const std::vector<HostTensor>& tensors, Metadata metadata) {
  std::vector<TensorSpec> specs;
  specs.reserve(tensors.size());
  for (const HostTensor& t : tensors) specs.push_back(t.spec);
  ASSIGN_OR_RETURN(std::unique_ptr<Job> job, Prepare(path, specs, std::move(metadata), /*staged=*/false));
  const FileLayout& L = job->state->layout;
  // Buffered I/O has no alignment rule: everything is written from the caller's memory.
  const uint64_t A = job->direct ? job->align : 1;
  const uint64_t M = job->direct ? job->mem_align : 1;
  const uint64_t min_len = std::max<uint64_t>(options_.in_place_min_bytes, 1);
  std::vector<internal::CopyPiece> staged;
  auto stage = [&](uint64_t b, uint64_t e, const char* src) {
    if (e > b) staged.push_back({job->arena + b, src, e - b, 0});
  };
  for (size_t i = 0; i < tensors.size(); ++i) {
    const TensorInfo& t = L.tensors[i];
    const uint64_t n = t.nbytes();
    if (n == 0) continue;
    const char* src = static_cast<const char*>(tensors[i].data);
    if (src == nullptr) {
      if (job->fd >= 0) {
        ::close(job->fd);
        ::unlink(path.c_str());
      }
      return absl::InvalidArgumentError(absl::StrCat("tensor '", t.name, "' has no data"));
    }
    job->sources.push_back({t.begin, n, src});
    const uint64_t fs = L.data_start + t.begin;
    const uint64_t fe = fs + n;
    const uint64_t a = RoundUp(fs, A);
    const uint64_t b = RoundDown(fe, A);
    if (b > a && b - a >= min_len && reinterpret_cast<uintptr_t>(src + (a - fs)) % M == 0) {
      stage(fs, a, src);
      job->in_place.push_back({a, b, src + (a - fs)});
      job->in_place_bytes += b - a;
      stage(b, fe, src + (b - fs));
    } else {
      stage(fs, fe, src);
    }
  }
  pool_->Copy(staged, CopyChunk(L.data_len, pool_->threads()), nullptr);
  std::unique_ptr<PendingFile> pending = Enqueue(std::move(job));
  pending->Commit();
  return pending;
}

void FileWriterImpl::IoThread() {
  SetupRing();
  while (true) {
    std::unique_ptr<Job> job;
    {
      std::unique_lock<std::mutex> l(mu_);
      cv_.wait(l, [this] { return stop_ || !queue_.empty() || prepare_request_ > 0; });
      if (queue_.empty() && prepare_request_ > 0 && !stop_) {  // between files: the next arena
        const uint64_t bytes = prepare_request_;
        const int device = prepare_device_;
        l.unlock();
        PrepareArena(bytes, device);
        l.lock();
        prepare_request_ = 0;
        preparing_ = false;
        l.unlock();
        prepared_cv_.notify_all();
        continue;
      }
      if (queue_.empty()) {
        prepare_request_ = 0;
        preparing_ = false;
        l.unlock();
        prepared_cv_.notify_all();
        break;
      }
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    absl::Status s = RunJob(job.get());
    absl::StatusOr<FileResult> result = absl::UnknownError("unset");
    if (!s.ok()) result = s;
    if (s.ok()) {
      FileResult r;
      r.path = job->path;
      r.size = job->state->layout.file_size;
      r.data_len = job->state->layout.data_len;
      r.tensors = job->state->layout.tensors.size();
      r.data_hash = DataHashOf(job->block_hashes);
      r.header_hash = job->header_hash;
      r.direct = job->direct;
      r.dio_align = job->direct ? job->align : 0;
      r.ring_flags = (uring_path_ && ring_ok_) ? ring_flags_ : 0;
      r.fixed_buffers = uring_path_ && ring_ok_ && registered_;
      r.seconds = job->clock.Seconds();
      r.in_place_bytes = job->in_place_bytes;
      r.staging_fresh_bytes = job->staging_fresh_bytes;
      r.notes = job->notes;
      result = std::move(r);
    }
    {
      std::lock_guard<std::mutex> l(job->state->mu);
      job->state->result = std::move(result);
      job->state->done = true;
      job->state->done_flag.store(true);
    }
    job->state->cv.notify_all();
  }
  if (ring_ok_) io_uring_queue_exit(&ring_);
}

void FileWriterImpl::SetupRing() {
  if (!uring_path_) return;
  const unsigned entries = static_cast<unsigned>(std::clamp(options_.queue_depth, 1, 4096));
  auto flags = internal::SetupRing(&ring_, std::max(entries, 4u));
  if (flags.ok()) {
    ring_ok_ = true;
    ring_flags_ = *flags;
  } else {
    ring_note_ = absl::StrCat("io_uring unavailable (", std::string(flags.status().message()),
                              "): synchronous pwrite used");
  }
}

void FileWriterImpl::RegisterArena() {
  if (!ring_ok_ || !options_.register_buffers || registered_generation_ == arena_generation_) return;
  if (registered_) io_uring_unregister_buffers(&ring_);
  registered_ = false;
  registered_generation_ = arena_generation_;
  std::vector<struct iovec> iov;
  for (uint64_t off = 0; off < arena_size_; off += kRegChunk) {
    iov.push_back({arena_ + off, static_cast<size_t>(std::min(kRegChunk, arena_size_ - off))});
  }
  int r = io_uring_register_buffers(&ring_, iov.data(), static_cast<unsigned>(iov.size()));
  if (r == 0) {
    registered_ = true;
    register_note_.clear();
  } else {
    register_note_ = absl::StrCat("io_uring buffer registration refused (", std::strerror(-r),
                                  "): plain writes used");
  }
}

absl::StatusOr<uint64_t> FileWriterImpl::Ready(Job* job, uint64_t want, bool block) {
  FileState* st = job->state.get();
  std::unique_lock<std::mutex> l(st->mu);
  if (block) st->cv.wait(l, [st, want] { return st->ready >= want || !st->abort.ok(); });
  if (!st->abort.ok()) return st->abort;
  return st->ready;
}

absl::Status FileWriterImpl::RunJob(Job* job) {
  absl::Status s = uring_path_ ? RunUring(job) : RunEnv(job);
  if (job->fd >= 0) {
    if (::close(job->fd) != 0 && s.ok()) s = ErrnoError(errno, absl::StrCat("closing ", job->path));
    job->fd = -1;
  }
  if (!s.ok()) {
    if (uring_path_) {
      ::unlink(job->path.c_str());
    } else {
      (void)options_.env->RemoveFile(job->path);
    }
  }
  return s;
}

// Through the Env: sequential appends after the whole image is ready (tests, non-POSIX targets).
absl::Status FileWriterImpl::RunEnv(Job* job) {
  const FileLayout& L = job->state->layout;
  ASSIGN_OR_RETURN(uint64_t ready, Ready(job, L.data_len, /*block=*/true));
  (void)ready;
  const char* data = job->arena + L.data_start;
  job->block_hashes.resize(L.num_blocks());
  size_t cursor = 0;
  for (uint64_t b = 0; b < L.num_blocks(); ++b) {
    uint64_t off = b * L.checksum_block;
    job->block_hashes[b] = HashDataRange(job->sources, data,  off,
                                         std::min(L.data_len, off + L.checksum_block), &cursor);
  }
  std::string header = RenderHeader(L, job->block_hashes);
  job->header_hash = Hash64(header);
  ASSIGN_OR_RETURN(auto file, options_.env->NewWritableFile(job->path));
  RETURN_IF_ERROR(file->Append(header));
  std::vector<DataSource> sources = job->sources;
  if (sources.empty()) sources.push_back({0, L.data_len, data});
  for (const DataSource& src : sources) {
    for (uint64_t off = 0; off < src.len; off += options_.block_size) {
      RETURN_IF_ERROR(file->Append(
          std::string_view(src.ptr + off, std::min(options_.block_size, src.len - off))));
    }
  }
  RETURN_IF_ERROR(crash::Point(internal::kCrashAfterDataWrites));
  RETURN_IF_ERROR(file->Sync());
  RETURN_IF_ERROR(crash::Point(internal::kCrashAfterFileFsync));
  return file->Close();
}

absl::Status FileWriterImpl::RunUring(Job* job) {
  const FileLayout& L = job->state->layout;
  if (!ring_note_.empty()) job->notes.push_back(ring_note_);
  RegisterArena();
  if (!register_note_.empty()) job->notes.push_back(register_note_);
  const bool fixed = ring_ok_ && registered_;
  const uint64_t align = job->direct ? job->align : 1;
  const uint64_t image_end = RoundUp(L.file_size, job->align);
  const uint64_t io_end = job->direct ? image_end : L.file_size;
  if (options_.preallocate && image_end > 0) {
    if (::fallocate(job->fd, 0, 0, static_cast<off_t>(image_end)) != 0) {
      int e = errno;
      if (e == ENOSPC || e == EDQUOT || e == EFBIG) {
        return ErrnoError(e, absl::StrCat("preallocating ", image_end, " bytes for ", job->path));
      }
      job->notes.push_back(absl::StrCat("fallocate not supported (", std::strerror(e), ")"));
    }
  }

  struct Op {
    uint64_t off = 0;
    uint64_t end = 0;
    bool in_use = false;
    const char* buf = nullptr;  // the bytes of `off`: in the arena, or the caller's (in place)
    bool fixed = false;         // buf is in the registered arena
  };
  // The write starting at file offset `off`, at most up to `limit`: it stays inside one in-place
  // extent or one staged gap between them, and inside one registered arena chunk.
  size_t extent = 0;
  auto piece_at = [&](uint64_t off, uint64_t limit) -> Op {
    const auto& ext = job->in_place;
    while (extent < ext.size() && ext[extent].end <= off) ++extent;
    if (extent < ext.size() && ext[extent].begin <= off) {
      const InPlaceExtent& x = ext[extent];
      return {off, std::min(limit, x.end), true, x.src + (off - x.begin), false};
    }
    uint64_t end = std::min(limit, RoundDown(off, kRegChunk) + kRegChunk);
    if (extent < ext.size()) end = std::min(end, ext[extent].begin);
    return {off, end, true, job->arena + off, fixed};
  };
  std::vector<Op> ops(static_cast<size_t>(options_.queue_depth) + 1);
  int inflight = 0;
  absl::Status error;

  auto prep_write = [&](size_t slot) {
    Op& op = ops[slot];
    const uint64_t len = internal::ShapeRequest(internal::RingOp::kWrite, op.end - op.off);
    struct io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    GRIST_CHECK(sqe != nullptr, "submission queue full");
    if (op.fixed) {
      io_uring_prep_write_fixed(sqe, job->fd, op.buf, static_cast<unsigned>(len), op.off,
                                static_cast<int>((op.buf - job->arena) / static_cast<int64_t>(kRegChunk)));
    } else {
      io_uring_prep_write(sqe, job->fd, op.buf, static_cast<unsigned>(len), op.off);
    }
    io_uring_sqe_set_data64(sqe, slot);
  };
  auto sync_write = [&](uint64_t off, uint64_t end) -> absl::Status {
    while (off < end) {
      const Op p = piece_at(off, end);
      const uint64_t len = internal::ShapeRequest(internal::RingOp::kWrite, p.end - off);
      ssize_t w = ::pwrite(job->fd, p.buf, len, static_cast<off_t>(off));
      if (w < 0 && errno == EINTR) continue;
      if (w >= 0) {
        const int f = internal::FilterCompletion(internal::RingOp::kWrite, static_cast<int>(w));
        if (f < 0) {
          errno = -f;
          w = -1;
        } else {
          w = f;
        }
      }
      ++writes_completed_;
      int injected = (options_.faults.fail_write_at > 0 &&
                      writes_completed_ == options_.faults.fail_write_at) ? options_.faults.write_errno : 0;
      if (w < 0 || injected) {
        return ErrnoError(injected ? injected : errno, absl::StrCat("writing ", job->path, " at offset ", off));
      }
      if (w == 0) return absl::DataLossError(absl::StrCat("writing ", job->path, ": zero-length write"));
      off += static_cast<uint64_t>(w);
    }
    return absl::OkStatus();
  };
  // Reaps completions; blocks for at least one when `wait`.
  auto reap = [&](bool wait) {
    struct io_uring_cqe* cqe = nullptr;
    if (wait && inflight > 0) {
      int r = io_uring_wait_cqe(&ring_, &cqe);
      if (r < 0 && r != -EINTR && error.ok()) error = ErrnoError(-r, "io_uring_wait_cqe");
    } else if (inflight > 0) {
      // The ring runs completion work only when this thread enters the kernel (DEFER_TASKRUN,
      // COOP_TASKRUN): without that, writes that finished while this thread hashed or waited for
      // the copy stay invisible, their slots are not refilled, and the queue runs dry.
      (void)io_uring_get_events(&ring_);
    }
    unsigned head;
    unsigned seen = 0;
    std::vector<size_t> resubmit;
    io_uring_for_each_cqe(&ring_, head, cqe) {
      ++seen;
      size_t slot = static_cast<size_t>(io_uring_cqe_get_data64(cqe));
      Op& op = ops[slot];
      int res = internal::FilterCompletion(internal::RingOp::kWrite, cqe->res);
      ++writes_completed_;
      if (options_.faults.fail_write_at > 0 && writes_completed_ == options_.faults.fail_write_at) {
        res = -options_.faults.write_errno;
      }
      if (res == -EAGAIN || res == -EINTR) {
        resubmit.push_back(slot);
      } else if (res < 0) {
        if (error.ok()) {
          error = ErrnoError(-res, absl::StrCat("writing ", job->path, " at offset ", op.off));
        }
        op.in_use = false;
        --inflight;
      } else if (res == 0) {
        if (error.ok()) error = absl::DataLossError(absl::StrCat("writing ", job->path, ": zero-length write"));
        op.in_use = false;
        --inflight;
      } else if (static_cast<uint64_t>(res) < op.end - op.off) {
        op.off += static_cast<uint64_t>(res);  // short write: the rest goes again
        op.buf += res;
        resubmit.push_back(slot);
      } else {
        op.in_use = false;
        --inflight;
      }
    }
    io_uring_cq_advance(&ring_, seen);
    for (size_t slot : resubmit) {
      if (error.ok()) {
        prep_write(slot);
      } else {
        ops[slot].in_use = false;
        --inflight;
      }
    }
    if (!resubmit.empty() && inflight > 0) io_uring_submit(&ring_);
  };

  // Data region first, in order as it becomes ready. Checksums are computed once the snapshot is
  // complete (while the writes are in flight), so hashing never competes with the caller's copy.
  job->block_hashes.assign(L.num_blocks(), 0);
  uint64_t hashed = 0;
  uint64_t next = L.data_start;
  const char* data = job->arena + L.data_start;
  size_t hash_cursor = 0;
  auto hash_some = [&](uint64_t ready, uint64_t max_blocks) {
    for (uint64_t k = 0; k < max_blocks && hashed < L.num_blocks(); ++k) {
      uint64_t b = hashed * L.checksum_block;
      uint64_t e = std::min(L.data_len, b + L.checksum_block);
      if (e > ready) break;
      job->block_hashes[hashed++] = HashDataRange(job->sources, data, b, e, &hash_cursor);
    }
  };
  // GRIST_CKPT_TRACE: milliseconds since the job started (its Begin()) at each phase.
  double t_first_write = -1, t_committed = -1, t_data_written = -1, hash_ms = 0;
  auto ms_now = [&] { return job->clock.Seconds() * 1e3; };
  while (error.ok()) {
    if (next >= io_end && hashed == L.num_blocks()) break;
    auto ready_or = Ready(job, 0, false);
    if (!ready_or.ok()) {
      error = ready_or.status();
      break;
    }
    uint64_t ready = *ready_or;
    const bool committed = ready == L.data_len;
    if (!committed && !overlap_) {
      auto r = Ready(job, L.data_len, true);
      if (!r.ok()) {
        error = r.status();
        break;
      }
      continue;
    }
    // Block for more data only when there is nothing in flight to wait for instead.
    if (!committed && (!ring_ok_ || inflight == 0)) {
      // Wait for one whole write's worth (writes are never smaller than a block before commit).
      const uint64_t next_end = std::min({io_end, next + options_.block_size, RoundDown(next, kRegChunk) + kRegChunk});
      uint64_t want = std::min(L.data_len, next_end - L.data_start);
      auto r = Ready(job, want, true);
      if (!r.ok()) {
        error = r.status();
        break;
      }
      ready = *r;
    }
    // Everything is ready once the whole data region is; the padding past it is zeroed already.
    const uint64_t ready_abs = ready == L.data_len ? io_end : RoundDown(L.data_start + ready, align);
    if (!ring_ok_) {
      uint64_t end = std::min(io_end, ready_abs);
      if (end > next) {
        error = sync_write(next, end);
        next = end;
      }
      if (ready == L.data_len) hash_some(ready, ~0ull);
      continue;
    }
    bool submitted = false;
    while (inflight < options_.queue_depth && next < io_end) {
      const Op piece = piece_at(next, std::min(io_end, next + options_.block_size));
      if (piece.end > ready_abs) break;  // only whole writes until the snapshot is committed
      size_t slot = 0;
      while (ops[slot].in_use) ++slot;
      ops[slot] = piece;
      prep_write(slot);
      ++inflight;
      next = piece.end;
      submitted = true;
    }
    if (submitted) io_uring_submit(&ring_);
    if (submitted && t_first_write < 0) t_first_write = ms_now();
    if (committed && t_committed < 0) t_committed = ms_now();
    bool hashing = false;
    if (ready == L.data_len && hashed < L.num_blocks()) {
      const double h0 = TraceEnabled() ? ms_now() : 0;
      hash_some(ready, 4);
      if (TraceEnabled()) hash_ms += ms_now() - h0;
      hashing = hashed < L.num_blocks();
    }
    if (inflight > 0) {
      reap(/*wait=*/!hashing && (!submitted || inflight >= options_.queue_depth || next >= io_end));
    }
  }
  while (inflight > 0) reap(true);  // never leave the kernel writing from a buffer we reuse
  RETURN_IF_ERROR(error);
  t_data_written = ms_now();

  // Header last, now that the checksums are known.
  std::string header = RenderHeader(L, job->block_hashes);
  job->header_hash = Hash64(header);
  std::memcpy(job->arena, header.data(), header.size());
  if (!ring_ok_) {
    RETURN_IF_ERROR(sync_write(0, L.data_start));
  } else {
    ops[0] = {0, L.data_start, true, job->arena, fixed};
    prep_write(0);
    ++inflight;
    io_uring_submit(&ring_);
    while (inflight > 0) reap(true);
    RETURN_IF_ERROR(error);
  }
  RETURN_IF_ERROR(crash::Point(internal::kCrashAfterDataWrites));
  const double t_header = ms_now();
  if ((io_end != L.file_size || (options_.preallocate && image_end != L.file_size)) &&
      ::ftruncate(job->fd, static_cast<off_t>(L.file_size)) != 0) {
    return ErrnoError(errno, absl::StrCat("truncating ", job->path));
  }
  // fsync only after every write completed: an fsync queued beside a write does not cover it.
  int fsync_res = 0;
  if (ring_ok_) {
    struct io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    io_uring_prep_fsync(sqe, job->fd, 0);
    io_uring_sqe_set_data64(sqe, 0);
    io_uring_submit(&ring_);
    struct io_uring_cqe* cqe = nullptr;
    int r;
    do {
      r = io_uring_wait_cqe(&ring_, &cqe);
    } while (r == -EINTR);
    if (r < 0) return ErrnoError(-r, "io_uring_wait_cqe");
    fsync_res = cqe->res;
    io_uring_cqe_seen(&ring_, cqe);
  } else if (::fsync(job->fd) != 0) {
    fsync_res = -errno;
  }
  fsync_res = internal::FilterCompletion(internal::RingOp::kFsync, fsync_res);
  if (options_.faults.fail_fsync) fsync_res = -EIO;
  if (fsync_res < 0) return ErrnoError(-fsync_res, absl::StrCat("fsync ", job->path));
  if (TraceEnabled()) {
    std::fprintf(stderr,
                 "ckptio trace: %s: I/O thread (ms from Begin): first write %.2f, committed %.2f, "
                 "data written %.2f, header written %.2f, fsynced %.2f; hashing %.2f ms\n",
                 job->path.c_str(), t_first_write, t_committed, t_data_written, t_header, ms_now(),
                 hash_ms);
  }
  return crash::Point(internal::kCrashAfterFileFsync);
}

}  // namespace

absl::StatusOr<std::unique_ptr<FileWriter>> FileWriter::Create(const WriterOptions& options) {
  if (options.checksum_block == 0) return absl::InvalidArgumentError("checksum block size must be > 0");
  if (options.copy_threads < 0 || options.copy_threads > 256) {
    return absl::InvalidArgumentError(
        absl::StrCat("copy threads ", options.copy_threads, " not in [0, 256] (0: default)"));
  }
  return std::unique_ptr<FileWriter>(new FileWriterImpl(options));
}

absl::StatusOr<std::unique_ptr<PendingFile>> FileWriter::Save(const std::string& path,
                                                               const std::vector<HostTensor>& tensors,
                                                               Metadata metadata) {
  std::vector<TensorSpec> specs;
  specs.reserve(tensors.size());
  for (const HostTensor& t : tensors) specs.push_back(t.spec);
  const bool trace = TraceEnabled();
  const auto t0 = std::chrono::steady_clock::now();
  ASSIGN_OR_RETURN(auto pending, Begin(path, specs, std::move(metadata)));
  const auto t1 = std::chrono::steady_clock::now();
  const FileLayout& L = pending->layout();
  std::vector<HostSpan> spans;
  spans.reserve(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    const TensorInfo& t = L.tensors[i];
    const uint64_t n = t.nbytes();
    if (n == 0) continue;
    if (tensors[i].data == nullptr) {
      pending->Abort(absl::InvalidArgumentError(absl::StrCat("tensor '", t.name, "' has no data")));
      return pending->Wait().status();
    }
    spans.push_back({t.begin, tensors[i].data, n});
  }
  // Tensors are contiguous in the data region: the copied prefix is ready to be written.
  pending->CopyIn(spans, /*mark_ready=*/true);
  pending->Commit();
  if (trace) {  // GRIST_CKPT_TRACE: where the caller's time goes
    const auto t2 = std::chrono::steady_clock::now();
    auto ms = [](auto d) { return std::chrono::duration<double, std::milli>(d).count(); };
    std::fprintf(stderr, "ckptio trace: %s: begin %.2f ms, copy %.2f ms (%.2f GB/s)\n", path.c_str(),
                 ms(t1 - t0), ms(t2 - t1), L.data_len / 1e6 / std::max(1e-9, ms(t2 - t1)));
  }
  return pending;
}

absl::StatusOr<FileResult> FileWriter::Write(const std::string& path,
                                             const std::vector<HostTensor>& tensors,
                                             Metadata metadata) {
  ASSIGN_OR_RETURN(auto pending, SaveInPlace(path, tensors, std::move(metadata)));
  return pending->Wait();
}

}  // namespace grist::ckptio
