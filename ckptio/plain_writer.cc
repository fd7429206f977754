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
  struct Op {
    uint64_t off, end;
  };
  std::vector<Op> ops(static_cast<size_t>(queue_depth));
  std::vector<size_t> free_slots;
  for (size_t i = 0; i < ops.size(); ++i) free_slots.push_back(i);
  uint64_t next = 0;
  int inflight = 0;
  absl::Status error;
  auto submit = [&](size_t slot) {
    struct io_uring_sqe* sqe = io_uring_get_sqe(&ring);
    io_uring_prep_write(sqe, fd, data + ops[slot].off, static_cast<unsigned>(ops[slot].end - ops[slot].off),
                        ops[slot].off);
    io_uring_sqe_set_data64(sqe, slot);
  };
  while (error.ok() && (next < aligned || inflight > 0)) {
    bool any = false;
    while (next < aligned && !free_slots.empty()) {
      const size_t slot = free_slots.back();
      free_slots.pop_back();
      ops[slot] = {next, std::min(aligned, next + block_size)};
      next = ops[slot].end;
      submit(slot);
      ++inflight;
      any = true;
    }
    if (any) io_uring_submit(&ring);
    struct io_uring_cqe* cqe = nullptr;
    r = io_uring_wait_cqe(&ring, &cqe);
    if (r == -EINTR) continue;
    if (r < 0) {
      error = ErrnoError(-r, "io_uring_wait_cqe");
      break;
    }
    const size_t slot = static_cast<size_t>(io_uring_cqe_get_data64(cqe));
    const int res = cqe->res;
    io_uring_cqe_seen(&ring, cqe);
    --inflight;
    if (res < 0) {
      error = ErrnoError(-res, absl::StrCat("writing ", path));
    } else if (res == 0) {
      error = absl::DataLossError(absl::StrCat("writing ", path, ": zero-length write"));
    } else if (ops[slot].off + static_cast<uint64_t>(res) < ops[slot].end) {
      ops[slot].off += static_cast<uint64_t>(res);  // short write: the rest again
      submit(slot);
      io_uring_submit(&ring);
      ++inflight;
    } else {
      free_slots.push_back(slot);
    }
  }
  while (inflight > 0) {  // never leave the kernel writing after an error
    struct io_uring_cqe* cqe = nullptr;
    if (io_uring_wait_cqe(&ring, &cqe) == 0) {
      io_uring_cqe_seen(&ring, cqe);
      --inflight;
    }
  }
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
