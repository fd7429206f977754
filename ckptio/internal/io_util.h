// Private helpers of ckptio: alignment arithmetic, opening files for O_DIRECT with STATX_DIOALIGN,
// io_uring ring setup with flag fallback.
#ifndef GRIST_CKPTIO_INTERNAL_IO_UTIL_H_
#define GRIST_CKPTIO_INTERNAL_IO_UTIL_H_

#include <liburing.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace grist::ckptio::internal {

inline uint64_t RoundUp(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }
inline uint64_t RoundDown(uint64_t v, uint64_t a) { return v / a * a; }

struct DioAlign {
  bool known = false;        // the kernel answered STATX_DIOALIGN
  uint32_t mem_align = 0;    // 0 with known: O_DIRECT unsupported for this file
  uint32_t offset_align = 0;
};
DioAlign QueryDioAlign(int fd);

struct OpenedFile {
  int fd = -1;
  bool direct = false;
  uint64_t dio_offset_align = 0;
  uint64_t dio_mem_align = 0;  // memory alignment O_DIRECT needs (4096 when the kernel does not say)
  std::vector<std::string> notes;
};
// Creates/truncates `path` for writing; with `want_direct`, O_DIRECT where the file system allows
// it (else buffered, with a note saying why).
absl::StatusOr<OpenedFile> OpenForWrite(const std::string& path, bool want_direct);
// Opens `path` for reading, O_DIRECT where allowed.
absl::StatusOr<OpenedFile> OpenForRead(const std::string& path, bool want_direct);

// Initializes `ring` with the most capable setup flags this kernel accepts (single issuer + defer
// taskrun, then cooperative taskrun, then none; each retried without on EINVAL). Returns the flags.
absl::StatusOr<unsigned> SetupRing(struct io_uring* ring, unsigned entries);

}  // namespace grist::ckptio::internal

#endif  // GRIST_CKPTIO_INTERNAL_IO_UTIL_H_
