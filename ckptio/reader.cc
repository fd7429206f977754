#include "ckptio/reader.h"

#include <fcntl.h>
#include <liburing.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "ckptio/checkpoint_format.h"
#include "ckptio/internal/io_util.h"
#include "ckptio/writer.h"
#include "common/status_macros.h"

#if GRIST_CKPTIO_CUDA
#include <cuda_runtime_api.h>
#endif

namespace grist::ckptio {
namespace {

using internal::RoundUp;

absl::Status ReadWithUring(int fd, char* buf, uint64_t size, uint64_t io_end, const ReadOptions& o,
                           const std::string& path) {
  struct io_uring ring;
  const unsigned qd = static_cast<unsigned>(std::clamp(o.queue_depth, 1, 4096));
  auto flags = internal::SetupRing(&ring, std::max(qd, 4u));
  if (!flags.ok()) {  // io_uring unavailable: plain reads
    uint64_t off = 0;
    while (off < size) {
      ssize_t r = ::pread(fd, buf + off, io_end - off, static_cast<off_t>(off));
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) return ErrnoError(errno, absl::StrCat("reading ", path));
      if (r == 0) break;
      off += static_cast<uint64_t>(r);
    }
    if (off < size) return absl::DataLossError(absl::StrCat(path, ": file shrank while reading"));
    return absl::OkStatus();
  }
  struct Op {
    uint64_t off, end;
  };
  std::vector<Op> ops(qd);
  std::vector<size_t> free_slots;
  for (size_t i = 0; i < qd; ++i) free_slots.push_back(qd - 1 - i);
  uint64_t next = 0;
  uint64_t got = 0;  // bytes below `size` delivered
  unsigned inflight = 0;
  absl::Status error;
  auto prep = [&](size_t slot) {
    struct io_uring_sqe* sqe = io_uring_get_sqe(&ring);
    io_uring_prep_read(sqe, fd, buf + ops[slot].off, static_cast<unsigned>(ops[slot].end - ops[slot].off),
                       ops[slot].off);
    io_uring_sqe_set_data64(sqe, slot);
  };
  while (error.ok() && (next < io_end || inflight > 0)) {
    bool submitted = false;
    while (!free_slots.empty() && next < io_end) {
      size_t slot = free_slots.back();
      free_slots.pop_back();
      ops[slot] = {next, std::min(io_end, next + o.block_size)};
      next = ops[slot].end;
      prep(slot);
      ++inflight;
      submitted = true;
    }
    if (submitted) io_uring_submit(&ring);
    struct io_uring_cqe* cqe = nullptr;
    int r = io_uring_wait_cqe(&ring, &cqe);
    if (r == -EINTR) continue;
    if (r < 0) {
      error = ErrnoError(-r, "io_uring_wait_cqe");
      break;
    }
    size_t slot = static_cast<size_t>(io_uring_cqe_get_data64(cqe));
    int res = cqe->res;
    io_uring_cqe_seen(&ring, cqe);
    Op& op = ops[slot];
    if (res == -EAGAIN || res == -EINTR) {
      prep(slot);
      io_uring_submit(&ring);
      continue;
    }
    --inflight;
    if (res < 0) {
      error = ErrnoError(-res, absl::StrCat("reading ", path, " at offset ", op.off));
      break;
    }
    const uint64_t end = op.off + static_cast<uint64_t>(res);
    got += std::min(end, size) - std::min(op.off, size);
    if (res > 0 && end < op.end && end < size) {  // short read before EOF: read the rest
      op.off = end;
      prep(slot);
      ++inflight;
      io_uring_submit(&ring);
      continue;
    }
    free_slots.push_back(slot);
  }
  while (inflight > 0) {
    struct io_uring_cqe* cqe = nullptr;
    if (io_uring_wait_cqe(&ring, &cqe) < 0) break;
    io_uring_cqe_seen(&ring, cqe);
    --inflight;
  }
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

absl::StatusOr<std::unique_ptr<LoadedFile>> ReadCheckpointFile(const std::string& path,
                                                               const ReadOptions& options,
                                                               const ManifestFile* expected) {
  Env* env = options.env ? options.env : Env::Default();
  if (options.block_size < 4096 || options.block_size % 4096 != 0) {
    return absl::InvalidArgumentError("read block size must be a positive multiple of 4096");
  }
  std::unique_ptr<LoadedFile> f(new LoadedFile());
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
    f->pinned_ = cudaHostRegister(f->buffer_, f->capacity_, cudaHostRegisterDefault) == cudaSuccess;
  }
#endif
  if (fd >= 0) {
    absl::Status s = ReadWithUring(fd, f->buffer_, f->size_, f->direct_ ? io_end : f->size_, options, path);
    ::close(fd);
    fd = -1;
    RETURN_IF_ERROR(s);
  } else {
    ASSIGN_OR_RETURN(auto raf, env->NewRandomAccessFile(path));
    uint64_t off = 0;
    while (off < f->size_) {
      ASSIGN_OR_RETURN(size_t n, raf->ReadAt(off, f->buffer_ + off, std::min<uint64_t>(f->size_ - off, options.block_size)));
      if (n == 0) return absl::DataLossError(absl::StrCat(path, ": file shrank while reading"));
      off += n;
    }
  }
  ASSIGN_OR_RETURN(f->header_, ParseHeader(std::string_view(f->buffer_, f->size_), f->size_, path));
  const ParsedHeader& h = f->header_;
  if (!options.verify) return f;
  if (!h.data_hash) {
    if (options.require_checksums || expected) {
      return absl::DataLossError(absl::StrCat(path, ": no grist checksums in the header"));
    }
    return f;
  }
  if (expected && Hash64(f->buffer_, h.data_start) != expected->header_hash) {
    return absl::DataLossError(absl::StrCat(path, ": header checksum mismatch (bytes [0, ", h.data_start, "))"));
  }
  const uint64_t data_len = f->size_ - h.data_start;
  const char* data = f->buffer_ + h.data_start;
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
  return f;
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
