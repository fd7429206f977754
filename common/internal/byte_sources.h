// Byte sources of the record readers: a byte range of a file, and the gzip and zstd decoders.
// Internal to common/ (the record readers and the split planner); not a public interface.
//
// Every source is used by one thread at a time. A source reads its file sequentially and owns it.
// Errors: a file read error is returned as the Env gave it; a damaged compressed stream is
// DATA_LOSS naming the file ("PATH: truncated zstd stream", "PATH: corrupt gzip data (...)").
#ifndef GRIST_COMMON_INTERNAL_BYTE_SOURCES_H_
#define GRIST_COMMON_INTERNAL_BYTE_SOURCES_H_

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "common/env.h"
#include "common/status_macros.h"

namespace grist::internal {

// The read size of the sources and line readers.
inline constexpr size_t kReadChunk = 1 << 20;

// A heap buffer that is not zero-filled (std::vector<char> would clear 1 MiB per file opened).
// Buffers of kReadChunk bytes go back to a cache of the thread that frees them (at most
// kCachedReadChunks a thread: a line reader's and a gzip source's) and are handed out again:
// readers are opened per split, and a fresh 1 MiB buffer (above malloc's mmap threshold) was
// faulted in again for every one of them (dedup's filter at 2 threads: 8-13 K page faults with
// the cache, 20-27 K without).
class Buffer {
 public:
  static constexpr size_t kCachedReadChunks = 2;
  explicit Buffer(size_t n);
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  char* data() { return ptr_.get(); }
  const size_t size;

 private:
  std::unique_ptr<char[]> ptr_;
};

// Reads bytes [begin, end) of a file sequentially (a split of an indexed zstd part).
class RangeFile : public SequentialFile {
 public:
  RangeFile(std::unique_ptr<RandomAccessFile> f, uint64_t begin, uint64_t end)
      : f_(std::move(f)), pos_(begin), end_(std::min<uint64_t>(end, f_->Size())) {}
  absl::StatusOr<size_t> Read(char* buf, size_t n) override {
    if (pos_ >= end_) return size_t{0};
    ASSIGN_OR_RETURN(size_t got, f_->ReadAt(pos_, buf, std::min<uint64_t>(n, end_ - pos_)));
    pos_ += got;
    return got;
  }
  const std::string& path() const override { return f_->path(); }

 private:
  std::unique_ptr<RandomAccessFile> f_;
  uint64_t pos_, end_;
};

// A stream of bytes.
class ByteSource {
 public:
  virtual ~ByteSource() = default;
  // Reads up to n bytes; 0 at the end. A truncated or corrupt stream is an error.
  virtual absl::StatusOr<size_t> Read(char* buf, size_t n) = 0;
  virtual uint64_t consumed() const = 0;
};

// Bytes [begin, end) of an uncompressed file.
class RawSource : public ByteSource {
 public:
  RawSource(std::unique_ptr<RandomAccessFile> f, uint64_t begin, uint64_t end)
      : f_(std::move(f)), pos_(begin), end_(std::min<uint64_t>(end, f_->Size())), begin_(begin) {}
  absl::StatusOr<size_t> Read(char* buf, size_t n) override {
    if (pos_ >= end_) return size_t{0};
    uint64_t want = std::min<uint64_t>(n, end_ - pos_);
    if (split_end_ < end_) {
      // Reading past the split's end only finishes its last line: up to the end and a small tail
      // in one read, then reads as long as what was read past the end so far (a long line costs
      // at most twice itself). A split much smaller than the read size then reads about itself,
      // not the read size.
      const uint64_t stop = pos_ < split_end_
                                ? split_end_ + kTailRead
                                : pos_ + std::max<uint64_t>(kTailRead, pos_ - split_end_);
      want = std::min<uint64_t>(want, stop - pos_);
    }
    ASSIGN_OR_RETURN(size_t got, f_->ReadAt(pos_, buf, want));
    pos_ += got;
    return got;
  }
  uint64_t consumed() const override { return pos_ - begin_; }
  // Extends the readable range to the end of the file (a split's last line may cross its end);
  // reads beyond the former end grow from kTailRead bytes (see Read).
  void ExtendToEof() {
    split_end_ = end_;
    end_ = f_->Size();
  }
  uint64_t pos() const { return pos_; }
  // Continues reading at `p` (only before the first Read of a LineReader over this source).
  void Seek(uint64_t p) { pos_ = p; }

 private:
  static constexpr uint64_t kTailRead = 16 << 10;
  std::unique_ptr<RandomAccessFile> f_;
  uint64_t pos_, end_, begin_;
  uint64_t split_end_ = UINT64_MAX;
};

// A decompressing source: reads the compressed file in chunks and decodes into the caller's buffer.
// A damaged stream hands back what was decoded before the damage first; the error comes with the
// next Read, so every line before the damage still reaches the caller.
//
// Input limit (the stream splits of internal/stream_cutter.h): with set_input_limit(L), the source
// reads no compressed byte at or after offset L. A Read that returns 0 with paused() true has
// returned everything the compressed bytes before L decode to (the decoder made no more progress
// without input); raising the limit continues the stream. The sequence of decoder calls, and so the
// decoded bytes delivered before each pause, depends only on the file and the limits, never on the
// caller's thread or timing.
class DecodingSource : public ByteSource {
 public:
  DecodingSource(std::unique_ptr<SequentialFile> f, size_t chunk) : f_(std::move(f)), in_(chunk) {}
  absl::StatusOr<size_t> Read(char* buf, size_t n) final {
    if (!pending_.ok()) return pending_;
    if (done_) return size_t{0};
    at_limit_ = false;
    size_t produced = 0;
    absl::Status s = Decode(buf, n, &produced);
    if (s.ok()) return produced;
    if (produced == 0) return s;
    pending_ = std::move(s);
    return produced;
  }
  uint64_t consumed() const final { return consumed_; }
  // Compressed bytes at or after `limit` are not read (UINT64_MAX: no limit). Must not be below
  // consumed().
  void set_input_limit(uint64_t limit) { limit_ = limit; }
  // Whether the last Read stopped at the input limit (see above).
  bool paused() const { return at_limit_; }
  const std::string& path() const { return f_->path(); }

 protected:
  // Decodes up to n bytes into buf, setting *produced; sets done_ at the clean end of the input.
  // When Refill() returns 0 with at_limit_ set, the implementation drains the decoder's pending
  // output (calls it without new input until it makes no progress) and returns without error.
  virtual absl::Status Decode(char* buf, size_t n, size_t* produced) = 0;
  // The next chunk of compressed input (0 bytes at the end of the file, or at the input limit with
  // at_limit_ set).
  absl::StatusOr<size_t> Refill() {
    const uint64_t room = limit_ - consumed_;
    if (room == 0) {
      at_limit_ = true;
      return size_t{0};
    }
    ASSIGN_OR_RETURN(size_t got, f_->Read(in_.data(), std::min<uint64_t>(in_.size, room)));
    consumed_ += got;
    return got;
  }
  absl::Status Corrupt(const std::string& what) const {
    return absl::DataLossError(absl::StrCat(f_->path(), ": ", what));
  }
  std::unique_ptr<SequentialFile> f_;
  Buffer in_;
  bool done_ = false;
  bool at_limit_ = false;

 private:
  absl::Status pending_;
  uint64_t consumed_ = 0;
  uint64_t limit_ = UINT64_MAX;
};

// The gzip (concatenated members, zlib headers too) and zstd (concatenated frames, skippable frames
// skipped) decoders over `f`.
std::unique_ptr<DecodingSource> NewGzipSource(std::unique_ptr<SequentialFile> f);
std::unique_ptr<DecodingSource> NewZstdSource(std::unique_ptr<SequentialFile> f);

// Tests only: while set, every allocation of a zstd decoder's memory fails (as when the process is
// out of memory), so a zstd source's reads return ResourceExhausted. Any thread.
void SetZstdDecoderAllocationFailsForTesting(bool fails);

}  // namespace grist::internal

#endif  // GRIST_COMMON_INTERNAL_BYTE_SOURCES_H_
