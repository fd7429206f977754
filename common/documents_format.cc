#include "common/documents_format.h"

#include <cstring>

#include "common/env.h"
#include "common/hash.h"
#include "common/internal/le.h"
#include "common/status_macros.h"

namespace grist {

using documents_format::kIndexEntryBytes;
using documents_format::kIndexFrameMagic;
using documents_format::kIndexTag;
using documents_format::kIndexTailBytes;

std::string documents_format::IndexFrame(const std::string& entries) {
  const uint64_t count = entries.size() / kIndexEntryBytes;
  std::string content = entries;
  internal::PutLe(&content, count, 4);
  const uint64_t h = Hash64(content.data(), content.size());
  internal::PutLe(&content, h, 8);
  content.append(kIndexTag, 8);
  std::string frame;
  internal::PutLe(&frame, kIndexFrameMagic, 4);
  internal::PutLe(&frame, content.size(), 4);
  return frame + content;
}

absl::StatusOr<std::optional<std::vector<ZstdFrame>>> ReadZstdFrameIndex(const RandomAccessFile& file) {
  const uint64_t size = file.Size();
  std::optional<std::vector<ZstdFrame>> none;
  if (size < 8 + kIndexTailBytes) return none;
  char tail[kIndexTailBytes];
  ASSIGN_OR_RETURN(size_t got, file.ReadAt(size - kIndexTailBytes, tail, kIndexTailBytes));
  if (got != kIndexTailBytes || std::memcmp(tail + 12, kIndexTag, 8) != 0) return none;
  const uint64_t count = internal::GetLe(tail, 4);
  const uint64_t content = count * kIndexEntryBytes + kIndexTailBytes;
  if (count == 0 || content + 8 > size) return none;
  const uint64_t frame_start = size - 8 - content;
  std::string body(8 + content, '\0');
  ASSIGN_OR_RETURN(got, file.ReadAt(frame_start, body.data(), body.size()));
  if (got != body.size() || internal::GetLe(body.data(), 4) != kIndexFrameMagic ||
      internal::GetLe(body.data() + 4, 4) != content ||
      Hash64(body.data() + 8, count * kIndexEntryBytes + 4) != internal::GetLe(body.data() + 8 + content - 16, 8)) {
    return none;
  }
  std::vector<ZstdFrame> frames(count);
  uint64_t offset = 0;
  for (uint64_t i = 0; i < count; ++i) {
    const char* e = body.data() + 8 + i * kIndexEntryBytes;
    frames[i] = {offset, internal::GetLe(e, 8), internal::GetLe(e + 8, 8)};
    if (frames[i].bytes == 0 || frames[i].bytes > frame_start - offset) return none;
    offset += frames[i].bytes;
  }
  if (offset != frame_start) return none;  // the frames must tile the file up to the index
  return std::optional<std::vector<ZstdFrame>>(std::move(frames));
}

}  // namespace grist
