// A plain io_uring writer: what a user writes to stream a buffer to a file as fast as the disk
// goes, without grist's staging, checksums, header or publishing. `grist bench ckpt` measures it
// beside grist's writer, on the same bytes, as the file system's ceiling (fio is measured too where
// installed).
#ifndef GRIST_CKPTIO_PLAIN_WRITER_H_
#define GRIST_CKPTIO_PLAIN_WRITER_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace grist::ckptio {

struct PlainWriteResult {
  double seconds = 0;   // open to fsync done
  bool direct = false;  // O_DIRECT was used (falls back to buffered where refused)
};

// Writes `len` bytes from `data` (4096-aligned for O_DIRECT) to `path` (created, truncated) with
// `queue_depth` writes of `block_size` bytes in flight on one io_uring, then fsync, then close.
absl::StatusOr<PlainWriteResult> PlainUringWrite(const std::string& path, const char* data,
                                                 uint64_t len, int queue_depth, uint64_t block_size,
                                                 bool direct);

}  // namespace grist::ckptio

#endif  // GRIST_CKPTIO_PLAIN_WRITER_H_
