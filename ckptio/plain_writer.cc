#include "ckptio/plain_writer.h"

#include <fcntl.h>
#include <liburing.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ckptio/internal/ring_loop.h"
#include "common/status_macros.h"
#include "common/sysinfo.h"

namespace grist::ckptio {

absl::StatusOr<PlainWriteResult> PlainUringWrite(const std::string& path, const char* data,
                                                 uint64_t len, int queue_depth, uint64_t block_size,
                                                 bool direct) {
  if (queue_depth < 1 || block_size == 0 || block_size % 4096 != 0) {
    return absl::InvalidArgumentError("queue depth >= 1 and a block size multiple of 4096 needed");
  }
  PlainWriteResult out;
  Stopwatch clock;
  int fd = -1;
  if (direct) fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_DIRECT, 0644);
  out.direct = fd >= 0;
  if (fd < 0) fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoError(errno, absl::StrCat("creating ", path));
  struct io_uring ring;
  int r = io_uring_queue_init(static_cast<unsigned>(queue_depth), &ring, 0);
  if (r < 0) {
    ::close(fd);
    return ErrnoError(-r, "io_uring_queue_init");
  }
  // O_DIRECT writes whole 4096-byte blocks; a tail shorter than that goes with pwrite afterwards.
  const uint64_t aligned = out.direct ? len / 4096 * 4096 : len;
  // [0, aligned) in blocks of block_size, one request per block in flight (a slot each).
  struct Blocks {
    int fd;
    const char* data;
    const std::string& path;
    internal::BlockSlots slots;

    bool Next(uint64_t* slot) { return slots.Next(slot); }
    void Prep(struct io_uring_sqe* sqe, uint64_t slot) {
      const internal::BlockSlots::Op& op = slots.op(slot);
      io_uring_prep_write(sqe, fd, data + op.off, static_cast<unsigned>(op.end - op.off), op.off);
      io_uring_sqe_set_data64(sqe, slot);
    }
    int Filter(int res) { return res; }
    absl::StatusOr<bool> Complete(uint64_t slot, int res) {
      if (res < 0) return ErrnoError(-res, absl::StrCat("writing ", path));
      if (res == 0) {
        return absl::DataLossError(absl::StrCat("writing ", path, ": zero-length write"));
      }
      internal::BlockSlots::Op& op = slots.op(slot);
      op.off += static_cast<uint64_t>(res);
      if (op.off < op.end) return true;  // short write: the rest again
      slots.Free(slot);
      return false;
    }
  };
  Blocks blocks{fd, data, path,
                internal::BlockSlots(aligned, block_size, static_cast<unsigned>(queue_depth))};
  absl::Status error = internal::RunRing(&ring, static_cast<unsigned>(queue_depth), blocks);
  io_uring_queue_exit(&ring);
  if (error.ok() && aligned < len) {
    (void)::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_DIRECT);
    if (::pwrite(fd, data + aligned, len - aligned, static_cast<off_t>(aligned)) !=
        static_cast<ssize_t>(len - aligned)) {
      error = ErrnoError(errno, absl::StrCat("writing the tail of ", path));
    }
  }
  const double written_s = clock.Seconds();
  if (error.ok() && ::fsync(fd) != 0) error = ErrnoError(errno, absl::StrCat("fsync ", path));
  ::close(fd);
  RETURN_IF_ERROR(error);
  out.seconds = clock.Seconds();
  if (std::getenv("GRIST_CKPT_TRACE") != nullptr) {  // as the writer's trace (writer.cc)
    std::fprintf(stderr, "plain writer trace: %s: data written %.2f, fsynced %.2f ms\n", path.c_str(),
                 written_s * 1e3, out.seconds * 1e3);
  }
  return out;
}

}  // namespace grist::ckptio
