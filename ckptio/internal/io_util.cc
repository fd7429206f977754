#include "ckptio/internal/io_util.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace grist::ckptio::internal {

DioAlign QueryDioAlign(int fd) {
  // glibc's struct statx predates the DIO fields: read them from the kernel's layout.
  constexpr unsigned kStatxDioAlign = 0x2000;
  alignas(8) unsigned char buf[256];
  std::memset(buf, 0, sizeof(buf));
  DioAlign out;
  if (::syscall(SYS_statx, fd, "", AT_EMPTY_PATH, kStatxDioAlign, buf) != 0) return out;
  uint32_t mask, mem, off;
  std::memcpy(&mask, buf, 4);
  std::memcpy(&mem, buf + 0x98, 4);
  std::memcpy(&off, buf + 0x9c, 4);
  if (!(mask & kStatxDioAlign)) return out;
  out.known = true;
  out.mem_align = mem;
  out.offset_align = off;
  return out;
}

namespace {

absl::StatusOr<OpenedFile> Open(const std::string& path, int base_flags, bool want_direct,
                                const char* what) {
  OpenedFile f;
  if (want_direct) {
    f.fd = ::open(path.c_str(), base_flags | O_DIRECT, 0644);
    if (f.fd >= 0) {
      f.direct = true;
    } else if (errno == EINVAL) {
      f.notes.push_back(absl::StrCat("O_DIRECT refused by the file system for ", path,
                                     ": buffered I/O used"));
    } else {
      return ErrnoError(errno, absl::StrCat(what, " ", path));
    }
  }
  if (f.fd < 0) {
    f.fd = ::open(path.c_str(), base_flags, 0644);
    if (f.fd < 0) return ErrnoError(errno, absl::StrCat(what, " ", path));
  }
  if (f.direct) {
    DioAlign a = QueryDioAlign(f.fd);
    if (a.known && a.offset_align == 0) {
      f.notes.push_back(absl::StrCat("STATX_DIOALIGN says ", path,
                                     " does not support O_DIRECT: buffered I/O used"));
      int fl = ::fcntl(f.fd, F_GETFL);
      if (fl < 0 || ::fcntl(f.fd, F_SETFL, fl & ~O_DIRECT) != 0) {
        int e = errno;
        ::close(f.fd);
        return ErrnoError(e, absl::StrCat("clearing O_DIRECT on ", path));
      }
      f.direct = false;
    } else {
      f.dio_offset_align = a.known ? a.offset_align : 4096;
      f.dio_mem_align = a.known ? std::max<uint32_t>(a.mem_align, 1) : 4096;
      if (!a.known) f.notes.push_back("STATX_DIOALIGN unsupported: assuming 4096-byte alignment");
      if (a.known && a.mem_align > 4096) {
        f.notes.push_back(absl::StrCat("O_DIRECT memory alignment ", a.mem_align,
                                       " exceeds a page: buffered I/O used"));
        int fl = ::fcntl(f.fd, F_GETFL);
        (void)::fcntl(f.fd, F_SETFL, fl & ~O_DIRECT);
        f.direct = false;
      }
    }
  }
  return f;
}

}  // namespace

absl::StatusOr<OpenedFile> OpenForWrite(const std::string& path, bool want_direct) {
  return Open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, want_direct, "creating");
}

absl::StatusOr<OpenedFile> OpenForRead(const std::string& path, bool want_direct) {
  return Open(path, O_RDONLY | O_CLOEXEC, want_direct, "opening");
}

absl::StatusOr<unsigned> SetupRing(struct io_uring* ring, unsigned entries) {
  const unsigned candidates[] = {
      IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN,
      IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_COOP_TASKRUN,
      IORING_SETUP_COOP_TASKRUN,
      0,
  };
  int last = 0;
  for (unsigned flags : candidates) {
    struct io_uring_params p;
    std::memset(&p, 0, sizeof(p));
    p.flags = flags;
    last = io_uring_queue_init_params(entries, ring, &p);
    if (last == 0) return flags;
    if (last != -EINVAL) break;
  }
  return ErrnoError(-last, "io_uring_queue_init");
}

}  // namespace grist::ckptio::internal
