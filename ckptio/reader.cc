#include "ckptio/reader.h"

#include <fcntl.h>
#include <liburing.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <functional>

#include "absl/strings/str_cat.h"
#include "ckptio/checkpoint_format.h"
#include "ckptio/internal/io_util.h"
#include "ckptio/internal/ring.h"
#include "ckptio/internal/ring_loop.h"
#include "ckptio/writer.h"
#include "common/status_macros.h"

#if GRIST_CKPTIO_CUDA
#include <cuda_runtime_api.h>
#endif

namespace grist::ckptio {
namespace {

using internal::RoundUp;

// Reads [0, size) of `fd` into `buf`; `progress(prefix)` reports each growth of the contiguous
// prefix that is in memory.
absl::Status ReadWithUring(int fd, char* buf, uint64_t size, uint64_t io_end, const ReadOptions& o,
                           const std::string& path, const std::function<void(uint64_t)>& progress) {
  struct io_uring ring;
  const unsigned qd = static_cast<unsigned>(std::clamp(o.queue_depth, 1, 4096));
  auto flags = internal::SetupRing(&ring, std::max(qd, 4u));
  if (!flags.ok()) {  // io_uring unavailable: plain reads
    uint64_t off = 0;
    while (off < size) {
      const uint64_t len = internal::ShapeRequest(internal::RingOp::kRead, io_end - off);
      ssize_t r = ::pread(fd, buf + off, len, static_cast<off_t>(off));
      if (r < 0 && errno == EINTR) continue;
      if (r >= 0) {
        const int f = internal::FilterCompletion(internal::RingOp::kRead, static_cast<int>(r));
        if (f < 0) errno = -f;
        r = f < 0 ? -1 : f;
      }
      if (r < 0) return ErrnoError(errno, absl::StrCat("reading ", path));
      if (r == 0) break;
      off += static_cast<uint64_t>(r);
      progress(std::min(off, size));
    }
    if (off < size) return absl::DataLossError(absl::StrCat(path, ": file shrank while reading"));
    return absl::OkStatus();
  }
  // The file in blocks of o.block_size, one request per block in flight (a slot each); `progress`
  // hears of each growth of the prefix of whole blocks.
  struct Blocks {
    int fd;
    char* buf;
    uint64_t size, block_size;
    const std::string& path;
    const std::function<void(uint64_t)>& progress;
    internal::BlockSlots slots;  // [0, io_end)
    std::vector<bool> block_done;
    uint64_t prefix_block = 0;
    uint64_t got = 0;  // bytes below `size` delivered

    bool Next(uint64_t* slot) { return slots.Next(slot); }
    void Prep(struct io_uring_sqe* sqe, uint64_t slot) {
      const internal::BlockSlots::Op& op = slots.op(slot);
      const uint64_t len = internal::ShapeRequest(internal::RingOp::kRead, op.end - op.off);
      io_uring_prep_read(sqe, fd, buf + op.off, static_cast<unsigned>(len), op.off);
      io_uring_sqe_set_data64(sqe, slot);
    }
    int Filter(int res) { return internal::FilterCompletion(internal::RingOp::kRead, res); }
    absl::StatusOr<bool> Complete(uint64_t slot, int res) {
      internal::BlockSlots::Op& op = slots.op(slot);
      if (res < 0) return ErrnoError(-res, absl::StrCat("reading ", path, " at offset ", op.off));
      const uint64_t end = op.off + static_cast<uint64_t>(res);
      got += std::min(end, size) - std::min(op.off, size);
      if (res > 0 && end < op.end && end < size) {  // short read before EOF: read the rest
        op.off = end;
        return true;
      }
      // op.end - 1 lies in the op's block even after short-read resubmits.
      block_done[(op.end - 1) / block_size] = true;
      const uint64_t before = prefix_block;
      while (prefix_block < block_done.size() && block_done[prefix_block]) ++prefix_block;
      if (prefix_block != before) progress(std::min(size, prefix_block * block_size));
      slots.Free(slot);
      return false;
    }
  };
  Blocks blocks{fd,
                buf,
                size,
                o.block_size,
                path,
                progress,
                internal::BlockSlots(io_end, o.block_size, qd),
                std::vector<bool>((io_end + o.block_size - 1) / o.block_size, false)};
  const absl::Status error = internal::RunRing(&ring, qd, blocks);
  const uint64_t got = blocks.got;
  io_uring_queue_exit(&ring);
  RETURN_IF_ERROR(error);
  if (got < size) {
    return absl::DataLossError(absl::StrCat(path, ": read ", got, " of ", size, " bytes (file shrank?)"));
  }
  return absl::OkStatus();
}

}  // namespace

LoadedFile::~LoadedFile() {
  if (buffer_ == nullptr) return;
#if GRIST_CKPTIO_CUDA
  if (pinned_) cudaHostUnregister(buffer_);
#endif
  ::munmap(buffer_, capacity_);
}

std::optional<std::string> LoadedFile::Metadata(std::string_view key) const {
  for (const auto& [k, v] : header_.metadata) {
    if (k == key) return v;
  }
  return std::nullopt;
}

namespace {

absl::Status Verify(const LoadedFile& f, const char* buffer, const ReadOptions& options,
                    const ManifestFile* expected) {
  const ParsedHeader& h = f.header();
  const std::string& path = f.path();
  if (!options.verify) return absl::OkStatus();
  if (!h.data_hash) {
    if (options.require_checksums || expected) {
      return absl::DataLossError(absl::StrCat(path, ": no grist checksums in the header"));
    }
    return absl::OkStatus();
  }
  if (expected && Hash64(buffer, h.data_start) != expected->header_hash) {
    return absl::DataLossError(absl::StrCat(path, ": header checksum mismatch (bytes [0, ", h.data_start, "))"));
  }
  const uint64_t data_len = f.file_size() - h.data_start;
  const char* data = buffer + h.data_start;
  for (size_t b = 0; b < h.block_hashes.size(); ++b) {
    const uint64_t off = b * h.checksum_block;
    const uint64_t n = std::min(h.checksum_block, data_len - off);
    if (Hash64(data + off, n) != h.block_hashes[b]) {
      return absl::DataLossError(absl::StrCat(path, ": checksum mismatch in block ", b, " (file bytes [",
                                              h.data_start + off, ", ", h.data_start + off + n, "))"));
    }
  }
  if (DataHashOf(h.block_hashes) != *h.data_hash ||
      (expected && expected->data_hash != *h.data_hash)) {
    return absl::DataLossError(absl::StrCat(path, ": file checksum mismatch"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<StreamingRead>> StreamingRead::Start(const std::string& path,
                                                                    const ReadOptions& options,
                                                                    const ManifestFile* expected) {
  Env* env = options.env ? options.env : Env::Default();
  if (options.block_size < 4096 || options.block_size % 4096 != 0) {
    return absl::InvalidArgumentError("read block size must be a positive multiple of 4096");
  }
  std::unique_ptr<StreamingRead> sr(new StreamingRead());
  sr->options_ = options;
  if (expected) {
    sr->has_expected_ = true;
    sr->expected_ = *expected;
  }
  sr->file_.reset(new LoadedFile());
  LoadedFile* f = sr->file_.get();
  f->path_ = path;
  uint64_t align = 4096;
  int fd = -1;
  if (env == Env::Default()) {
    ASSIGN_OR_RETURN(internal::OpenedFile of, internal::OpenForRead(path, options.direct));
    fd = of.fd;
    f->direct_ = of.direct;
    if (of.direct) align = std::max<uint64_t>(align, of.dio_offset_align);
    struct stat st;
    if (::fstat(fd, &st) != 0) {
      int e = errno;
      ::close(fd);
      return ErrnoError(e, absl::StrCat("stat ", path));
    }
    f->size_ = static_cast<uint64_t>(st.st_size);
  } else {
    ASSIGN_OR_RETURN(f->size_, env->GetFileSize(path));
  }
  auto fail = [&](absl::Status s) {
    if (fd >= 0) ::close(fd);
    return s;
  };
  if (expected && expected->size != f->size_) {
    return fail(absl::DataLossError(absl::StrCat(path, ": ", f->size_, " bytes, the manifest says ",
                                                 expected->size, " (truncated or replaced)")));
  }
  if (f->size_ < 8) return fail(absl::DataLossError(absl::StrCat(path, ": file shorter than 8 bytes")));
  const uint64_t io_end = RoundUp(f->size_, align);
  f->capacity_ = RoundUp(io_end, 4096);
  void* p = ::mmap(nullptr, f->capacity_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    f->capacity_ = 0;
    return fail(ErrnoError(errno, absl::StrCat("allocating ", io_end, " bytes to read ", path)));
  }
  (void)::madvise(p, f->capacity_, MADV_HUGEPAGE);
  f->buffer_ = static_cast<char*>(p);
#if GRIST_CKPTIO_CUDA
  if (options.pin_for_cuda && CudaAvailable()) {
    f->pinned_ = cudaHostRegister(f->buffer_, f->capacity_, cudaHostRegisterPortable) == cudaSuccess;
  }
#endif
  StreamingRead* self = sr.get();
  auto progress = [self](uint64_t prefix) { self->Progress(prefix, absl::OkStatus(), false); };
  if (fd >= 0) {
    const uint64_t end = f->direct_ ? io_end : f->size_;
    sr->thread_ = std::thread([self, fd, f, end, options, path, progress] {
      absl::Status s = ReadWithUring(fd, f->buffer_, f->size_, end, options, path, progress);
      ::close(fd);
      self->Progress(f->size_, s, true);
    });
  } else {
    sr->thread_ = std::thread([self, env, f, options, path, progress] {
      absl::Status s = [&]() -> absl::Status {
        ASSIGN_OR_RETURN(auto raf, env->NewRandomAccessFile(path));
        uint64_t off = 0;
        while (off < f->size_) {
          ASSIGN_OR_RETURN(size_t n, raf->ReadAt(off, f->buffer_ + off,
                                                 std::min<uint64_t>(f->size_ - off, options.block_size)));
          if (n == 0) return absl::DataLossError(absl::StrCat(path, ": file shrank while reading"));
          off += n;
          progress(off);
        }
        return absl::OkStatus();
      }();
      self->Progress(f->size_, s, true);
    });
  }
  return sr;
}

StreamingRead::~StreamingRead() {
  if (thread_.joinable()) thread_.join();
}

void StreamingRead::Progress(uint64_t prefix, const absl::Status& error, bool finished) {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (error.ok()) prefix_ = std::max(prefix_, prefix);
    if (!error.ok() && error_.ok()) error_ = error;
    if (finished) finished_ = true;
  }
  cv_.notify_all();
}

absl::Status StreamingRead::WaitPrefix(uint64_t bytes) {
  std::unique_lock<std::mutex> l(mu_);
  cv_.wait(l, [&] { return prefix_ >= bytes || !error_.ok() || finished_; });
  if (!error_.ok()) return error_;
  if (prefix_ < bytes) return absl::DataLossError(absl::StrCat(file_->path(), ": file ended early"));
  return absl::OkStatus();
}

absl::StatusOr<const ParsedHeader*> StreamingRead::Header() {
  if (!file_) return absl::FailedPreconditionError("StreamingRead used after Finish()");
  if (!header_parsed_) {
    const LoadedFile* f = file_.get();
    RETURN_IF_ERROR(WaitPrefix(8));
    ASSIGN_OR_RETURN(uint64_t need, HeaderBytesNeeded(std::string_view(f->buffer_, 8), f->size_, f->path()));
    RETURN_IF_ERROR(WaitPrefix(need));
    ASSIGN_OR_RETURN(file_->header_, ParseHeader(std::string_view(f->buffer_, need), f->size_, f->path()));
    header_parsed_ = true;
  }
  return &file_->header_;
}

const char* StreamingRead::data() const { return file_->buffer_ + file_->header_.data_start; }
bool StreamingRead::pinned() const { return file_->pinned_; }

absl::Status StreamingRead::WaitData(uint64_t upto) {
  ASSIGN_OR_RETURN(const ParsedHeader* h, Header());
  return WaitPrefix(h->data_start + upto);
}

absl::StatusOr<std::unique_ptr<LoadedFile>> StreamingRead::Finish() {
  if (!file_) return absl::FailedPreconditionError("StreamingRead::Finish() called twice");
  if (thread_.joinable()) thread_.join();
  {
    std::lock_guard<std::mutex> l(mu_);
    RETURN_IF_ERROR(error_);
  }
  RETURN_IF_ERROR(Header().status());
  RETURN_IF_ERROR(Verify(*file_, file_->buffer_, options_, has_expected_ ? &expected_ : nullptr));
  return std::move(file_);
}

namespace {

struct ReadOp {
  uint64_t off = 0;  // file offset
  uint64_t len = 0;  // bytes to read (aligned for O_DIRECT; may run past EOF)
  char* dst = nullptr;
};

// Reads every op (queue depth `qd`); a read may stop short only at the end of the file
// (`file_size`), and the bytes below it must all arrive. `done(i)`, when given, runs once op i's
// bytes are all in, on this thread while later reads are in flight (e.g. to verify them); its
// error stops the reading.
absl::Status ReadOps(int fd, std::vector<ReadOp> ops, uint64_t file_size, int qd_in,
                     const std::string& path,
                     const std::function<absl::Status(size_t)>& done_fn = nullptr) {
  struct io_uring ring;
  const unsigned qd = static_cast<unsigned>(std::clamp(qd_in, 1, 4096));
  auto flags = internal::SetupRing(&ring, std::max(qd, 4u));
  auto need = [&](const ReadOp& op) { return std::min(op.off + op.len, file_size) - std::min(op.off, file_size); };
  if (!flags.ok()) {
    for (const ReadOp& op : ops) {
      uint64_t got = 0;
      const uint64_t want = need(op);
      while (got < want) {
        ssize_t r = ::pread(fd, op.dst + got, op.len - got, static_cast<off_t>(op.off + got));
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return ErrnoError(errno, absl::StrCat("reading ", path, " at offset ", op.off + got));
          if (r == 0) return absl::DataLossError(absl::StrCat(path, ": file shrank while reading"));
        got += static_cast<uint64_t>(r);
      }
      if (done_fn) RETURN_IF_ERROR(done_fn(static_cast<size_t>(&op - ops.data())));
    }
    return absl::OkStatus();
  }
  struct Scattered {
    int fd;
    const std::string& path;
    const std::vector<ReadOp>& ops;
    uint64_t file_size;
    const std::function<absl::Status(size_t)>& done_fn;
    std::vector<uint64_t> done;  // bytes of each op read so far
    size_t next = 0;

    uint64_t Need(size_t i) const {
      return std::min(ops[i].off + ops[i].len, file_size) - std::min(ops[i].off, file_size);
    }
    bool Next(uint64_t* i) {
      if (next >= ops.size()) return false;
      *i = next++;
      return true;
    }
    void Prep(struct io_uring_sqe* sqe, uint64_t i) {
      io_uring_prep_read(sqe, fd, ops[i].dst + done[i], static_cast<unsigned>(ops[i].len - done[i]),
                         ops[i].off + done[i]);
      io_uring_sqe_set_data64(sqe, i);
    }
    int Filter(int res) { return res; }
    absl::StatusOr<bool> Complete(uint64_t i, int res) {
      if (res < 0) {
        return ErrnoError(-res, absl::StrCat("reading ", path, " at offset ", ops[i].off + done[i]));
      }
      done[i] += static_cast<uint64_t>(res);
      if (done[i] >= Need(i)) return false;
      if (res == 0) return absl::DataLossError(absl::StrCat(path, ": file shrank while reading"));
      return true;  // a short read before the end of the file: read the rest
    }
    absl::Status Retired(uint64_t i) { return done_fn ? done_fn(static_cast<size_t>(i)) : absl::OkStatus(); }
  };
  Scattered scattered{fd, path, ops, file_size, done_fn, std::vector<uint64_t>(ops.size(), 0)};
  const absl::Status error = internal::RunRing(&ring, qd, scattered);
  io_uring_queue_exit(&ring);
  return error;
}

}  // namespace

RangeRead::~RangeRead() {
  if (buffer_ != nullptr) ::munmap(buffer_, capacity_);
}

absl::StatusOr<std::unique_ptr<RangeRead>> RangeRead::Read(const std::string& path,
                                                           const ManifestFile& expected,
                                                           const std::vector<DataRange>& ranges,
                                                           const ReadOptions& options) {
  std::unique_ptr<RangeRead> rr(new RangeRead());
  ASSIGN_OR_RETURN(internal::OpenedFile of, internal::OpenForRead(path, options.direct));
  struct Fd {
    int fd;
    ~Fd() {
      if (fd >= 0) ::close(fd);
    }
  } fd{of.fd};
  struct stat st;
  if (::fstat(fd.fd, &st) != 0) return ErrnoError(errno, absl::StrCat("stat ", path));
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size != expected.size) {
    return absl::DataLossError(absl::StrCat(path, ": ", size, " bytes, the manifest says ", expected.size,
                                            " (truncated or replaced)"));
  }
  if (size < 8) return absl::DataLossError(absl::StrCat(path, ": file shorter than 8 bytes"));
  uint64_t align = of.direct ? std::max<uint64_t>(4096, of.dio_offset_align) : 4096;
  auto alloc = [](uint64_t n, const std::string& what) -> absl::StatusOr<char*> {
    void* p = ::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return ErrnoError(errno, absl::StrCat("allocating ", n, " bytes to read ", what));
    return static_cast<char*>(p);
  };
  // The header: its first aligned block tells its length.
  std::string head;
  {
    uint64_t want = std::min<uint64_t>(RoundUp(std::min<uint64_t>(size, 4096), align), RoundUp(size, align));
    for (int pass = 0; pass < 2; ++pass) {
      ASSIGN_OR_RETURN(char* hb, alloc(want, path));
      absl::Status s = ReadOps(fd.fd, {{0, want, hb}}, size, 1, path);
      if (s.ok()) head.assign(hb, std::min(want, size));
      ::munmap(hb, want);
      RETURN_IF_ERROR(s);
      ASSIGN_OR_RETURN(uint64_t need, HeaderBytesNeeded(std::string_view(head.data(), 8), size, path));
      if (need <= head.size()) break;
      want = RoundUp(need, align);
    }
  }
  ASSIGN_OR_RETURN(uint64_t need, HeaderBytesNeeded(std::string_view(head.data(), 8), size, path));
  ASSIGN_OR_RETURN(rr->header_, ParseHeader(std::string_view(head.data(), need), size, path));
  const ParsedHeader& h = rr->header_;
  if (!h.data_hash) return absl::DataLossError(absl::StrCat(path, ": no grist checksums in the header"));
  if (options.verify) {
    if (Hash64(head.data(), h.data_start) != expected.header_hash) {
      return absl::DataLossError(absl::StrCat(path, ": header checksum mismatch (bytes [0, ", h.data_start, "))"));
    }
    if (DataHashOf(h.block_hashes) != *h.data_hash || expected.data_hash != *h.data_hash) {
      return absl::DataLossError(absl::StrCat(path, ": file checksum mismatch"));
    }
  }
  const uint64_t data_len = size - h.data_start;
  const uint64_t B = h.checksum_block;
  if (data_len != expected.data_len) {
    return absl::DataLossError(absl::StrCat(path, ": ", data_len, " data bytes, the manifest says ", expected.data_len));
  }
  if (B == 0 || B % 4096 != 0) {
    return absl::DataLossError(absl::StrCat(path, ": checksum block of ", B, " bytes is not a multiple of 4096"));
  }
  // O_DIRECT needs every read aligned; a file written for another alignment is read buffered.
  int rfd = fd.fd;
  Fd buffered{-1};
  if (of.direct && (h.data_start % align != 0 || B % align != 0)) {
    ASSIGN_OR_RETURN(internal::OpenedFile bf, internal::OpenForRead(path, false));
    buffered.fd = bf.fd;
    rfd = bf.fd;
    align = 4096;
  } else {
    rr->direct_ = of.direct;
  }
  // Needed blocks, merged into runs [first, last] of consecutive blocks.
  std::vector<std::pair<uint64_t, uint64_t>> blocks;
  for (const DataRange& r : ranges) {
    if (r.end < r.begin || r.end > data_len) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": range [", r.begin, ", ", r.end,
                                                     ") is not inside the data region of ", data_len, " bytes"));
    }
    if (r.end > r.begin) blocks.emplace_back(r.begin / B, (r.end - 1) / B);
  }
  std::sort(blocks.begin(), blocks.end());
  std::vector<std::pair<uint64_t, uint64_t>> runs;
  for (const auto& b : blocks) {
    if (!runs.empty() && b.first <= runs.back().second + 1) {
      runs.back().second = std::max(runs.back().second, b.second);
    } else {
      runs.push_back(b);
    }
  }
  std::vector<uint64_t> run_offset(runs.size());
  uint64_t total = 0;
  for (size_t i = 0; i < runs.size(); ++i) {
    run_offset[i] = total;
    const uint64_t bytes = std::min(data_len, (runs[i].second + 1) * B) - runs[i].first * B;
    total += RoundUp(bytes, align);
  }
  rr->capacity_ = RoundUp(std::max<uint64_t>(total, 4096), 4096);
  ASSIGN_OR_RETURN(rr->buffer_, alloc(rr->capacity_, path));
  std::vector<ReadOp> ops;
  std::vector<std::pair<uint64_t, uint64_t>> op_data;  // per op: its data-region range
  const uint64_t chunk = std::max<uint64_t>(RoundUp(options.block_size, B), B);
  for (size_t i = 0; i < runs.size(); ++i) {
    const uint64_t begin = runs[i].first * B;
    const uint64_t end = std::min(data_len, (runs[i].second + 1) * B);
    for (uint64_t off = begin; off < end; off += chunk) {
      const uint64_t n = std::min(chunk, end - off);
      ops.push_back({h.data_start + off, RoundUp(n, align), rr->buffer_ + run_offset[i] + (off - begin)});
      op_data.emplace_back(off, off + n);
    }
    rr->bytes_read_ += end - begin;
  }
  // Each op holds whole checksum blocks (runs start on a block, chunks are block multiples): its
  // blocks are verified as soon as it lands, while the later reads are in flight.
  std::function<absl::Status(size_t)> verify_op;
  if (options.verify) {
    verify_op = [&](size_t i) -> absl::Status {
      const char* base = ops[i].dst;
      for (uint64_t off = op_data[i].first; off < op_data[i].second; off += B) {
        const uint64_t b = off / B;
        const uint64_t n = std::min(B, data_len - off);
        if (b >= h.block_hashes.size() || Hash64(base + (off - op_data[i].first), n) != h.block_hashes[b]) {
          return absl::DataLossError(absl::StrCat(path, ": checksum mismatch in block ", b, " (file bytes [",
                                                  h.data_start + off, ", ", h.data_start + off + n, "))"));
        }
      }
      return absl::OkStatus();
    };
  }
  RETURN_IF_ERROR(ReadOps(rfd, ops, size, options.queue_depth, path, verify_op));
  rr->range_offsets_.resize(ranges.size());
  for (size_t i = 0; i < ranges.size(); ++i) {
    const DataRange& r = ranges[i];
    if (r.end == r.begin) {
      rr->range_offsets_[i] = 0;
      continue;
    }
    const uint64_t b = r.begin / B;
    size_t k = static_cast<size_t>(std::upper_bound(runs.begin(), runs.end(), std::make_pair(b, UINT64_MAX)) -
                                   runs.begin()) - 1;
    rr->range_offsets_[i] = run_offset[k] + (r.begin - runs[k].first * B);
  }
  return rr;
}

absl::StatusOr<std::unique_ptr<LoadedFile>> ReadCheckpointFile(const std::string& path,
                                                               const ReadOptions& options,
                                                               const ManifestFile* expected) {
  ASSIGN_OR_RETURN(auto sr, StreamingRead::Start(path, options, expected));
  return sr->Finish();
}

absl::StatusOr<LoadedCheckpoint> LoadCheckpoint(const std::string& dir, const ReadOptions& options,
                                                int rank) {
  Env* env = options.env ? options.env : Env::Default();
  LoadedCheckpoint out;
  ASSIGN_OR_RETURN(out.manifest, ReadManifest(env, dir));
  if (rank >= out.manifest.world_size) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", rank, " but ", dir, " has world_size ",
                                                   out.manifest.world_size));
  }
  for (const ManifestFile& mf : out.manifest.files) {
    if (rank >= 0 && mf.rank != rank) continue;
    ASSIGN_OR_RETURN(auto f, ReadCheckpointFile(JoinPath(dir, mf.name), options, &mf));
    if (f->tensors().size() != mf.tensors) {
      return absl::DataLossError(absl::StrCat(f->path(), ": ", f->tensors().size(),
                                              " tensors, the manifest says ", mf.tensors));
    }
    out.files.push_back(std::move(f));
  }
  return out;
}

absl::Status VerifyCheckpoint(const std::string& dir, const ReadOptions& options) {
  Env* env = options.env ? options.env : Env::Default();
  ASSIGN_OR_RETURN(Manifest m, ReadManifest(env, dir));
  ReadOptions o = options;
  o.verify = true;
  for (const ManifestFile& mf : m.files) {
    ASSIGN_OR_RETURN(auto f, ReadCheckpointFile(JoinPath(dir, mf.name), o, &mf));
    if (f->tensors().size() != mf.tensors) {
      return absl::DataLossError(absl::StrCat(f->path(), ": tensor count differs from the manifest"));
    }
  }
  return absl::OkStatus();
}

}  // namespace grist::ckptio
