// The stream splits of a compressed file without a frame index: one sequential decode cut into the
// record-aligned pieces of its splits. Internal to common/ (the record readers and SplitDecoders).
//
// Definition (docs/formats/documents.md, "Compressed inputs without a frame index"): the file's
// compressed bytes are cut every `stride` bytes into segments; segment k is what the decoder
// outputs while it is fed compressed bytes [k * stride, (k + 1) * stride) (DecodingSource's input
// limit: everything the bytes before a limit decode to comes out before the limit is raised).
// Split k holds the records that start in segment k's output: a JSONL line, or (text in blocks
// mode) a line that follows a blank line, belongs to the split of the segment its first byte comes
// out in; a record never crosses splits, so a split's bytes run from its first record start to the
// next split's. Splits whose segments hold no record start are empty. The cut depends only on the
// file's bytes and `stride` (the same decoder calls in the same order every time), so every reader,
// thread and task finds the same splits, and their concatenation is the file's decoded bytes.
#ifndef GRIST_COMMON_INTERNAL_STREAM_CUTTER_H_
#define GRIST_COMMON_INTERNAL_STREAM_CUTTER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/document.h"
#include "common/input_plan.h"
#include "common/internal/byte_sources.h"

namespace grist::internal {

// A run of decoded bytes of one split. Shares its buffer with the pieces decoded before and after
// it into the same buffer.
struct StreamPiece {
  uint64_t split = 0;         // the split's index in the file (its begin / stride)
  uint64_t lines_before = 0;  // '\n' bytes in the decoded stream before the piece's first byte
  std::shared_ptr<char[]> buf;
  size_t offset = 0, size = 0;
  const char* data() const { return buf.get() + offset; }
};

// The buffers pieces are decoded into: kReadChunk bytes each, handed out again once every piece
// in one is released (from any thread), so a decoder allocates nothing once it runs. At most
// kKeptFree free buffers are kept; the rest are freed. Thread-safe.
class PieceBuffers : public std::enable_shared_from_this<PieceBuffers> {
 public:
  static constexpr size_t kKeptFree = 8;
  static std::shared_ptr<PieceBuffers> Create();
  ~PieceBuffers();
  // A buffer of kReadChunk bytes; released to this pool when its last owner lets it go.
  std::shared_ptr<char[]> Get();
  size_t allocated() const;  // buffers allocated so far (for tests)

 private:
  PieceBuffers() = default;
  void Put(char* p);
  mutable absl::Mutex mu_;
  std::vector<char*> free_ ABSL_GUARDED_BY(mu_);
  size_t allocated_ ABSL_GUARDED_BY(mu_) = 0;
};

// Not thread-safe: one thread cuts a file.
class StreamCutter {
 public:
  // `blocks`: records are blank-line-separated blocks (a cut only after a blank line). Pieces are
  // decoded one after another into buffers of `buffers` (null: a pool of the cutter's own), a new
  // one when less than kMinPieceRoom is left in the current one.
  static constexpr size_t kMinPieceRoom = 64 << 10;
  StreamCutter(std::unique_ptr<DecodingSource> src, uint64_t stride, bool blocks,
               std::shared_ptr<PieceBuffers> buffers = nullptr);
  // The next piece, in stream order (pieces of a split are consecutive and in order; a split with
  // no piece is empty). False at the end of the stream. An error (read failure, damaged stream)
  // comes after every piece decoded before the damage; it belongs to split current_split().
  absl::StatusOr<bool> Next(StreamPiece* piece);
  // The split the cutter is filling: that of the last piece returned, or of the record the decoder
  // is in when Next fails.
  uint64_t current_split() const { return cur_; }

 private:
  // The first position in [0, n) of a record start that is after the current segment's start, or n.
  // Updates the line state up to that position.
  size_t FindCut(const char* p, size_t n);
  // Updates the line state over p[0, n).
  void Advance(const char* p, size_t n);

  std::unique_ptr<DecodingSource> src_;
  uint64_t stride_;
  bool blocks_;
  uint64_t seg_ = 0;  // the segment being decoded
  uint64_t cur_ = 0;  // the split being filled (<= seg_)
  uint64_t lines_ = 0;  // '\n' bytes before the next byte
  bool eof_ = false;
  // Line state at the next byte: whether it starts a line, whether the line before it was blank,
  // and (inside a line) whether the line is blank so far.
  bool at_line_start_ = true, prev_blank_ = true, line_blank_ = true;
  StreamPiece pending_;  // the tail of a piece after a cut, returned next
  bool has_pending_ = false;
  std::shared_ptr<PieceBuffers> buffers_;
  std::shared_ptr<char[]> buf_;  // the buffer being filled
  size_t used_ = 0;              // its bytes handed out in pieces
};

// The bytes of one stream split, for the record readers: from a SplitDecoders' shared decoder,
// or decoded privately from the file's start. Errors that belong to the split (see Next above) are
// returned by Read after its bytes; an error before the split makes it empty.
class StreamSplitSource : public ByteSource {
 public:
  // '\n' bytes in the decoded stream before the split's first byte.
  virtual uint64_t lines_before() const = 0;
};

}  // namespace grist::internal

namespace grist {
class SplitDecoders;
namespace internal {
// Opens the source of stream split `split` of `file` (blocking until its first piece, or its end,
// is known). `decoders` may be null.
absl::StatusOr<std::unique_ptr<StreamSplitSource>> OpenStreamSplit(Env* env, const InputFile& file,
                                                                   const InputSplit& split,
                                                                   const InputOptions& options,
                                                                   SplitDecoders* decoders);
}  // namespace internal
}  // namespace grist

#endif  // GRIST_COMMON_INTERNAL_STREAM_CUTTER_H_
